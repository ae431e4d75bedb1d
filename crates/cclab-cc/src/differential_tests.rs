use super::*;
use crate::cubic::{Cubic, CubicConfig};
use crate::reno::Reno;
use crate::{SimDuration, SimTime};

const RTT: SimDuration = SimDuration(20_000_000);

/// A minimal TCP around `cc`: rounds of one ACK per packet of cwnd at a fixed RTT, and one
/// loss (ssthresh, Recovery, back to Open at ssthresh) in round `loss_round`.
fn drive(cc: &mut AnyCc, rounds: u64, loss_round: u64) {
    let mut tcp = TcpState::new(1448);
    tcp.is_cwnd_limited = true;
    tcp.srtt = RTT;
    cc.init(&mut tcp);
    for round in 0..rounds {
        if round == loss_round {
            tcp.snd_ssthresh = cc.ssthresh(&tcp);
            cc.set_state(&mut tcp, CaState::Recovery);
            tcp.ca_state = CaState::Recovery;
            tcp.snd_cwnd = tcp.snd_ssthresh;
            cc.set_state(&mut tcp, CaState::Open);
            tcp.ca_state = CaState::Open;
        }
        let cwnd = tcp.snd_cwnd as u64;
        for i in 0..cwnd {
            tcp.now = SimTime(round * RTT.0 + i * RTT.0 / cwnd);
            tcp.snd_una += 1;
            tcp.snd_nxt = tcp.snd_una + cwnd;
            tcp.delivered += 1;
            let sample = AckSample { pkts_acked: 1, rtt: Some(RTT), in_flight: cwnd as u32 };
            cc.pkts_acked(&mut tcp, &sample);
            cc.in_ack_event(&mut tcp);
            let ack_seq = tcp.snd_una;
            cc.cong_avoid(&mut tcp, ack_seq, 1);
        }
    }
}

/// Drives `driver` (a recorder around it) and compares `reference` and `candidate` on its calls.
fn compared(driver: AnyCc, reference: AnyCc, candidate: AnyCc, rounds: u64, loss_round: u64) -> Comparison {
    let mut cc = AnyCc::Recorded(Box::new(Recorder::new(driver, Comparator::new(reference, candidate))));
    drive(&mut cc, rounds, loss_round);
    match cc {
        AnyCc::Recorded(recorder) => recorder.comparison(),
        _ => unreachable!(),
    }
}

fn cubic(hystart: bool) -> AnyCc {
    AnyCc::Cubic(Cubic::new(CubicConfig { hystart, ..CubicConfig::default() }))
}

#[test]
fn a_recorder_changes_nothing_it_forwards() {
    let mut plain = cubic(true);
    drive(&mut plain, 12, 8);
    let mut wrapped = AnyCc::Recorded(Box::new(Recorder::new(cubic(true), Comparator::new(cubic(true), cubic(true)))));
    drive(&mut wrapped, 12, 8);
    let state = TcpState::new(1448);
    assert_eq!(plain.telemetry(&state), wrapped.telemetry(&state));
    assert_eq!(plain.ssthresh(&state), wrapped.ssthresh(&state));
}

#[test]
fn a_cc_driven_against_itself_never_differs() {
    let comparison = compared(cubic(true), cubic(true), cubic(true), 20, 10);
    // init, three calls per ACK, and ssthresh and two set_state at the loss.
    assert!(comparison.calls > 3 * 200, "{}", comparison.calls);
    assert_eq!(comparison.differing_calls, 0);
    assert!(comparison.fields.is_empty());
    assert_eq!(comparison.hooks.iter().map(|t| t.calls).sum::<usize>(), comparison.calls);
    assert_eq!(comparison.hooks.iter().find(|t| t.hook == "ssthresh").map(|t| t.calls), Some(1));
}

#[test]
fn reno_and_cubic_first_part_at_the_loss_where_reno_halves_and_cubic_keeps_717_of_1024() {
    // HyStart off: this driver's evenly spread ACKs are an ACK train HyStart would end slow
    // start on (the first difference would then be its ssthresh, on a pkts_acked).
    let comparison = compared(AnyCc::Reno(Reno::default()), AnyCc::Reno(Reno::default()), cubic(false), 10, 6);
    // Slow start is Linux's tcp_slow_start for both: the first difference is ssthresh's
    // answer (tcp_reno_ssthresh: cwnd / 2; bictcp_recalc_ssthresh: cwnd x 717 / 1024).
    let first = comparison.fields.iter().min_by_key(|f| f.first_call).expect("they differ");
    assert_eq!((first.field, first.first_hook), ("returned", "ssthresh"));
    let cwnd: u64 = 10 << 6; // the initial 10, doubled by each of the six rounds before the loss
    assert_eq!(first.reference, (cwnd / 2).to_string());
    assert_eq!(first.candidate, (cwnd * 717 / 1024).to_string());
    let ssthresh = comparison.hooks.iter().find(|t| t.hook == "ssthresh").unwrap();
    assert_eq!((ssthresh.calls, ssthresh.differing_calls), (1, 1));
    // After the loss each ACK of congestion avoidance grows the two differently, though not
    // on every ACK (Reno's counter and CUBIC's target both move by less than a packet).
    let avoid = comparison.hooks.iter().find(|t| t.hook == "cong_avoid").unwrap();
    assert!(avoid.differing_calls > 0 && avoid.differing_calls < avoid.calls, "{avoid:?}");
}

#[test]
fn hystart_ends_cubics_slow_start_on_an_ack_train_where_reno_goes_on() {
    let comparison = compared(AnyCc::Reno(Reno::default()), AnyCc::Reno(Reno::default()), cubic(true), 10, 9);
    let first = comparison.fields.iter().min_by_key(|f| f.first_call).expect("they differ");
    // bictcp_acked -> hystart_update sets ssthresh = cwnd on the train's ACK.
    assert_eq!((first.field, first.first_hook), ("snd_ssthresh", "pkts_acked"));
    assert_eq!(first.reference, crate::INFINITE_SSTHRESH.to_string());
}
