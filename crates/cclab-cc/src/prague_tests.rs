use super::*;
use crate::SimDuration;

/// A Prague connection past slow start: cwnd 100, srtt `rtt_ms`, ECN negotiated.
fn established(rtt_ms: u64) -> (Prague, TcpState) {
    let mut tcp = TcpState::new(1448);
    tcp.ecn_ok = true;
    tcp.snd_cwnd = 100;
    tcp.snd_ssthresh = 100;
    tcp.srtt = SimDuration::from_millis(rtt_ms);
    tcp.is_cwnd_limited = true;
    tcp.now = SimTime(1_000_000_000);
    let mut cc = Prague::default();
    cc.init(&mut tcp);
    (cc, tcp)
}

/// One ACK of `acked` packets, `marked` of them CE.
fn ack(cc: &mut Prague, tcp: &mut TcpState, acked: u32, marked: u32) {
    tcp.snd_una += acked as u64;
    tcp.snd_nxt = tcp.snd_nxt.max(tcp.snd_una + tcp.snd_cwnd as u64);
    tcp.delivered += acked as u64;
    tcp.delivered_ce += marked as u64;
    tcp.now = tcp.now + SimDuration::from_micros(100);
    let rs = RateSample { acked_sacked: acked, ece_delta: marked, ..RateSample::default() };
    assert!(cc.cong_control(tcp, &rs));
}

/// `rounds` whole rounds (all that was out when each began), unmarked, with at least
/// 25 ms passing per round so alpha may move once per round.
fn rounds(cc: &mut Prague, tcp: &mut TcpState, rounds: u32) {
    for _ in 0..rounds {
        tcp.now = tcp.now + SimDuration::from_millis(25);
        let out = (cc.next_seq - tcp.snd_una).max(1) as u32;
        ack(cc, tcp, out, 0);
    }
}

#[test]
fn the_first_ce_halves_the_window_and_alpha_starts_then() {
    let (mut cc, mut tcp) = established(20);
    assert_eq!(cc.alpha(), 0.0);
    ack(&mut cc, &mut tcp, 1, 1);
    // frac_cwnd halves at once; snd_cwnd follows by one packet per ACK.
    assert_eq!(cc.frac_cwnd, 50 << CWND_UNIT);
    assert_eq!(tcp.snd_cwnd, 99);
    assert_eq!(tcp.snd_ssthresh, 99, "each step down ends slow start");
    for _ in 0..60 {
        ack(&mut cc, &mut tcp, 1, 0);
    }
    assert!((50..=52).contains(&tcp.snd_cwnd), "cwnd {}", tcp.snd_cwnd);
}

#[test]
fn alpha_is_the_ewma_of_the_marked_fraction_with_gain_one_sixteenth() {
    let (mut cc, mut tcp) = established(20);
    ack(&mut cc, &mut tcp, 1, 1); // the first CE: alpha may move from now on
    let mut expected = 0.0f64;
    for _ in 0..100 {
        tcp.now = tcp.now + SimDuration::from_millis(25);
        let before = cc.alpha();
        // A round of 100 packets, 10 marked, acknowledged at once.
        tcp.snd_nxt = tcp.snd_una + 100;
        ack(&mut cc, &mut tcp, 100, 10);
        if cc.alpha() != before {
            expected = expected * 15.0 / 16.0 + 0.1 / 16.0;
        }
    }
    assert!((cc.alpha() - expected).abs() < 0.01 && (cc.alpha() - 0.1).abs() < 0.01, "alpha {} expected {expected}", cc.alpha());
}

#[test]
fn entering_cwr_takes_half_of_alpha_off_the_window() {
    let (mut cc, mut tcp) = established(20);
    cc.saw_ce = true;
    cc.upscaled_alpha = (MAX_ALPHA / 4) << SHIFT_G; // alpha = 1/4
    let before = cc.frac_cwnd;
    cc.set_state(&mut tcp, CaState::Cwr);
    assert_eq!(cc.frac_cwnd, before - before / 8);
    // A loss halves instead, and holds the increase until the state is Open.
    let before = cc.frac_cwnd;
    tcp.ca_state = CaState::Cwr;
    cc.set_state(&mut tcp, CaState::Recovery);
    assert_eq!(cc.frac_cwnd, before - (before >> 1));
    let held = cc.frac_cwnd;
    ack(&mut cc, &mut tcp, 10, 0);
    assert_eq!(cc.frac_cwnd, held);
    tcp.ca_state = CaState::Recovery;
    cc.set_state(&mut tcp, CaState::Open);
    ack(&mut cc, &mut tcp, 10, 0);
    assert!(cc.frac_cwnd > held);
}

#[test]
fn the_additive_increase_is_one_packet_per_rtt_scaled_by_srtt_over_25_ms_squared() {
    // RTT independence: once past 4 rounds after slow start, a 5 ms path grows its window
    // (5/25)^2 = 1/25 as fast per RTT as a 25 ms one, i.e. both by one packet per 25 ms x 25 ms.
    for (rtt_ms, per_rtt) in [(5u64, 1.0 / 25.0), (25, 1.0), (50, 1.0)] {
        let (mut cc, mut tcp) = established(rtt_ms);
        rounds(&mut cc, &mut tcp, 6); // past the transition
        assert!(cc.rtt_independent(&tcp));
        let before = cc.frac_cwnd as f64 / ONE_CWND as f64;
        // One RTT's worth of unmarked ACKs: cwnd of them.
        let w = (cc.frac_cwnd >> CWND_UNIT) as u32;
        for _ in 0..w {
            ack(&mut cc, &mut tcp, 1, 0);
        }
        let grown = cc.frac_cwnd as f64 / ONE_CWND as f64 - before;
        // x 1500 / 1500: the sim's MSS 1448 makes an MTU of exactly 1500.
        assert!((grown - per_rtt).abs() < 0.02 * per_rtt.max(0.1), "rtt {rtt_ms} ms: grew {grown} per RTT, expected {per_rtt}");
    }
}

#[test]
fn it_paces_at_the_window_per_srtt_in_bursts_of_a_quarter_millisecond() {
    let (mut cc, mut tcp) = established(20);
    rounds(&mut cc, &mut tcp, 6);
    // The window (~103 packets after the rounds) x 1500 B / 20 ms on the wire, 1448/1500 of it payload.
    let window = (cc.frac_cwnd >> CWND_UNIT) as i64;
    let expected: i64 = window * 1500 * 1000 / 20 * 1448 / 1500;
    let rate = tcp.pacing_rate_bytes_per_sec as i64;
    assert!((rate - expected).abs() < expected / 50, "rate {rate} expected {expected}");
    // 5000 packets/s >> 12 = 1 packet per burst at this rate.
    assert_eq!(cc.tso_segs(&tcp), Some(1));
    assert!(cc.needs_pacing() && cc.needs_ecn() && cc.needs_accecn());
}

#[test]
fn without_negotiated_ecn_it_is_reno() {
    let mut tcp = TcpState::new(1448);
    tcp.snd_cwnd = 100;
    let mut cc = Prague::default();
    cc.init(&mut tcp);
    assert!(!cc.needs_ecn() && !cc.needs_pacing() && !cc.needs_accecn());
    assert_eq!(cc.ssthresh(&tcp), 50);
    assert!(!cc.cong_control(&mut tcp, &RateSample::default()));
}
