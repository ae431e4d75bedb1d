//! The sender's side of RFC 3168 as Linux runs it (tcp_ecn_send, tcp_enter_cwr,
//! tcp_count_delivered): unit checks of one connection.

use super::*;
use cclab_cc::CaState;
use crate::config::FlowConfig;
use crate::tcp::receiver::AckPacket;

const MSS: u32 = 1448;

/// A CUBIC sender with ECN negotiated whose initial window (segments 0..10)
/// left at `t0` over a 20 ms path.
fn ecn_sender() -> (TcpSender, EventQueue, SimTime, Vec<Transmission>) {
    started_cubic_sender(SimDuration::from_millis(20), true)
}

/// With nothing acknowledged, fires the sender's timers from `t0` until one retransmits;
/// returns that time and everything sent.
fn timers_until_a_retransmission(s: &mut TcpSender, q: &mut EventQueue, t0: SimTime) -> (SimTime, Vec<Transmission>) {
    let mut out = Vec::new();
    let mut now = t0;
    while !out.iter().any(|t: &Transmission| t.is_retransmission) {
        let (t, ev) = q.pop().expect("a timer is armed");
        now = t;
        if let Event::Timer(_, kind) = ev {
            s.on_timer(now, kind, q, &mut out);
        }
    }
    (now, out)
}

fn ack(cum_ack: u64, ece: bool) -> AckPacket {
    AckPacket { cum_ack, ece, ..AckPacket::default() }
}

#[test]
fn new_data_of_an_ecn_connection_leaves_ect0_without_cwr() {
    let (_, _, _, out) = ecn_sender();
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|t| t.ecn == Ecn::Ect0 && !t.cwr));
}

#[test]
fn an_ece_reduces_the_window_once_per_window_and_the_next_new_segment_carries_cwr() {
    let (mut s, mut q, t0, _) = ecn_sender();
    let mut out = Vec::new();
    let t1 = t0 + SimDuration::from_millis(20);
    s.on_ack(t1, &ack(5, true), &mut q, &mut out);
    assert_eq!(s.tcp.ca_state, CaState::Cwr);
    // CUBIC's ssthresh: cwnd x 717/1024 (beta 0.7) of the 10-packet window.
    assert_eq!(s.tcp.snd_ssthresh, 7);
    // tcp_count_delivered: all five packets this ECE ACK delivered.
    assert_eq!(s.tcp.delivered_ce, 5);
    assert!(!out.is_empty(), "PRR lets some data out");
    assert!(out[0].cwr && out[0].ecn == Ecn::Ect0, "CWR on the first new segment");
    assert!(out[1..].iter().all(|t| !t.cwr));
    // More ECE inside the same window: no second reduction.
    out.clear();
    s.on_ack(t1 + SimDuration::from_micros(100), &ack(8, true), &mut q, &mut out);
    assert_eq!(s.tcp.snd_ssthresh, 7);
    assert_eq!(s.tcp.delivered_ce, 8);
    assert!(out.iter().all(|t| !t.cwr));
    // Once data past the reduction's start (snd_nxt then: 10) is acknowledged, CWR ends at ssthresh.
    let high = s.tcp.snd_nxt;
    out.clear();
    s.on_ack(t1 + SimDuration::from_millis(20), &ack(high, false), &mut q, &mut out);
    assert_eq!(s.tcp.ca_state, CaState::Open);
    assert_eq!(s.tcp.delivered_ce, 8);
}

#[test]
fn an_ece_is_ignored_without_negotiated_ecn() {
    let (mut s, mut q, t0, _) = ecn_sender();
    s.tcp.ecn_ok = false;
    let mut out = Vec::new();
    s.on_ack(t0 + SimDuration::from_millis(20), &ack(5, true), &mut q, &mut out);
    assert_eq!(s.tcp.ca_state, CaState::Open);
    assert_eq!(s.tcp.delivered_ce, 0);
    assert!(out.iter().all(|t| t.ecn == Ecn::NotEct));
}

#[test]
fn retransmissions_leave_not_ect_and_a_timeout_queues_a_cwr() {
    let (mut s, mut q, t0, _) = ecn_sender();
    // Nothing is acknowledged: a loss probe (new data, ECT(0)), then the RTO fires.
    let (now, mut out) = timers_until_a_retransmission(&mut s, &mut q, t0);
    assert!(out.iter().all(|t| t.ecn == if t.is_retransmission { Ecn::NotEct } else { Ecn::Ect0 }), "{out:?}");
    // tcp_enter_loss queued a CWR: the next new data segment carries it.
    let high = s.tcp.snd_nxt;
    out.clear();
    s.on_ack(now + SimDuration::from_millis(20), &ack(high, false), &mut q, &mut out);
    let first_new = out.iter().find(|t| !t.is_retransmission).expect("new data after the RTO");
    assert!(first_new.cwr);
}

#[test]
fn a_dctcp_sender_keeps_ect0_on_retransmissions_and_cuts_by_half_its_alpha() {
    // TCP_CONG_NEEDS_ECN: tcp_ecn_send skips INET_ECN_dontxmit, so retransmissions stay ECT.
    let (mut s, mut q, t0, _) = started_sender("dctcp", SimDuration::from_millis(20), true);
    let (_, out) = timers_until_a_retransmission(&mut s, &mut q, t0);
    assert!(out.iter().all(|t| t.ecn == Ecn::Ect0), "{out:?}");

    // An ECE on a fresh connection: alpha starts at 1, so the first cut halves; with
    // alpha lower the cut is alpha / 2 of cwnd (dctcp_ssthresh).
    let (mut s, mut q, t0, _) = started_sender("dctcp", SimDuration::from_millis(20), true);
    let mut out = Vec::new();
    s.on_ack(t0 + SimDuration::from_millis(20), &ack(10, true), &mut q, &mut out);
    assert_eq!(s.tcp.ca_state, CaState::Cwr);
    let cwnd_before = s.tcp.prior_cwnd;
    let alpha = match s.cc() {
        AnyCc::Dctcp(d) => d.alpha(),
        _ => unreachable!(),
    };
    let expected = cwnd_before - (cwnd_before as f64 * alpha / 2.0) as u32;
    assert!(s.tcp.snd_ssthresh.abs_diff(expected) <= 1, "ssthresh {} expected {expected} (alpha {alpha})", s.tcp.snd_ssthresh);
}

#[test]
fn a_prague_sender_sends_ect1_and_counts_ce_from_the_accecn_counter_without_cwr() {
    let (mut s, mut q, t0, out) = started_sender("prague", SimDuration::from_millis(20), true);
    assert!(s.accecn);
    assert!(out.iter().all(|t| t.ecn == Ecn::Ect1), "{out:?}");
    let mut out = Vec::new();
    // Four of the ten packets this ACK delivers were CE-marked: exactly four count.
    let ack = AckPacket { cum_ack: 10, ce_count: 4, ..AckPacket::default() };
    s.on_ack(t0 + SimDuration::from_millis(20), &ack, &mut q, &mut out);
    assert_eq!(s.tcp.delivered_ce, 4);
    assert_eq!(s.tcp.ca_state, CaState::Cwr);
    assert!(out.iter().all(|t| t.ecn == Ecn::Ect1 && !t.cwr), "AccECN has no CWR flag: {out:?}");
    // The same count again: nothing new was marked.
    let ack = AckPacket { cum_ack: 12, ce_count: 4, ..AckPacket::default() };
    s.on_ack(t0 + SimDuration::from_millis(21), &ack, &mut q, &mut out);
    assert_eq!(s.tcp.delivered_ce, 4);
}

#[test]
fn bbr_enters_cwr_on_an_ece_but_its_own_cwnd_is_untouched() {
    // tcp_bbr.c owns cwnd through cong_control and only reacts to Recovery and Loss
    // (bbr_set_cwnd_to_recover_or_restore), so CWR changes nothing it sends.
    let cc = FlowConfig::bulk(0, "bbr").cc_config().unwrap();
    let sender = || {
        let mut s = TcpSender::new(0, &cc, MSS, None, None, 1);
        s.tcp.ecn_ok = true;
        let (mut q, mut out) = (EventQueue::default(), Vec::new());
        s.start(SimTime(20_000_000), SimDuration::from_millis(20), &mut q, &mut out);
        (s, q)
    };
    let (mut plain, mut q1) = sender();
    let (mut marked, mut q2) = sender();
    let (mut out1, mut out2) = (Vec::new(), Vec::new());
    for (i, cum) in [2u64, 4, 6, 8, 10].into_iter().enumerate() {
        let now = SimTime(40_000_000 + i as u64 * 100_000);
        plain.on_ack(now, &ack(cum, false), &mut q1, &mut out1);
        marked.on_ack(now, &ack(cum, true), &mut q2, &mut out2);
        assert_eq!(plain.tcp.snd_cwnd, marked.tcp.snd_cwnd, "ACK {cum}");
    }
    assert_eq!(marked.tcp.ca_state, CaState::Cwr);
    assert_eq!(marked.tcp.delivered_ce, 10);
    assert_eq!(out1.len(), out2.len());
}
