//! The timestamp option's RTT (`tcp_ack_update_rtt`'s fallback): an ACK whose newly
//! acknowledged data Karn's rule cannot time is timed by its TSecr, in whole milliseconds.

use super::*;
use crate::tcp::receiver::AckPacket;
use crate::tcp::rtt::TsClock;

/// A CUBIC sender whose initial window (segments 0..10) left at 20 ms over a 20.3 ms path;
/// segment 0 is lost, 1..10 are SACKed, and the sender retransmits 0. Returns the sender,
/// when the retransmission left, and its queue.
fn sender_that_retransmitted_the_first_segment() -> (TcpSender, SimTime, EventQueue) {
    let (mut s, mut q, t0, mut out) = started_cubic_sender(SimDuration::from_micros(20_300), false);
    assert_eq!(out.len(), 10);
    let mut now = t0 + SimDuration::from_micros(20_300);
    let sack = AckPacket { cum_ack: 0, sack_blocks: [(1, 10), (0, 0), (0, 0)], sack_count: 1, tsecr: Some(t0), ..AckPacket::default() };
    out.clear();
    s.on_ack(now, &sack, &mut q, &mut out);
    // RACK may wait out its reordering window: run the timers until segment 0 leaves again.
    while !out.iter().any(|t| t.is_retransmission && t.seq == 0) {
        let (t, ev) = q.pop().expect("a timer is armed");
        now = t;
        if let Event::Timer(_, kind) = ev {
            s.on_timer(now, kind, &mut q, &mut out);
        }
    }
    assert_eq!(s.rtt.min_rtt(), Some(SimDuration::from_micros(20_300)), "the SACKed segments timed the path");
    (s, now, q)
}

#[test]
fn the_ack_that_fills_the_hole_is_timed_by_its_echo_in_whole_milliseconds() {
    let (mut s, retransmitted_at, mut q) = sender_that_retransmitted_the_first_segment();
    let now = retransmitted_at + SimDuration::from_micros(20_300);
    let filler = AckPacket { cum_ack: 10, tsecr: Some(retransmitted_at), ..AckPacket::default() };
    let mut out = Vec::new();
    s.on_ack(now, &filler, &mut q, &mut out);
    // The clock ticked 20 times in those 20.3 ms (from a tick's first 0.7 ms).
    let ticks = now.as_nanos() / 1_000_000 - retransmitted_at.as_nanos() / 1_000_000;
    assert_eq!(ticks, 20, "retransmitted at {retransmitted_at:?}");
    // So the sample, 20 ms, undercuts the path's 20.3 ms, as on Linux.
    assert_eq!(s.rtt.min_rtt(), Some(SimDuration::from_millis(20)));
}

#[test]
fn the_echo_is_read_on_the_hosts_clock_whose_phase_can_add_a_tick() {
    let (mut s, retransmitted_at, mut q) = sender_that_retransmitted_the_first_segment();
    // Move the clock's edges so that the retransmission's reading sits 0.8 ms into a tick:
    // the 20.3 ms to its ACK then cross 21 edges, and 21 ms is no new minimum.
    let into_tick = retransmitted_at.as_nanos() % 1_000_000;
    s.ts_clock = TsClock { phase: SimDuration((1_000_000 + 800_000 - into_tick) % 1_000_000) };
    let now = retransmitted_at + SimDuration::from_micros(20_300);
    let filler = AckPacket { cum_ack: 10, tsecr: Some(s.ts_clock.read(retransmitted_at)), ..AckPacket::default() };
    s.on_ack(now, &filler, &mut q, &mut Vec::new());
    assert_eq!(s.rtt.min_rtt(), Some(SimDuration::from_micros(20_300)));
    assert!(s.rtt.srtt() > SimDuration::from_micros(20_300), "the 21 ms sample was taken: {:?}", s.rtt.srtt());
}

#[test]
fn without_an_echo_the_hole_filler_gives_no_sample() {
    let (mut s, retransmitted_at, mut q) = sender_that_retransmitted_the_first_segment();
    let srtt = s.rtt.srtt();
    let filler = AckPacket { cum_ack: 10, tsecr: None, ..AckPacket::default() };
    s.on_ack(retransmitted_at + SimDuration::from_micros(20_300), &filler, &mut q, &mut Vec::new());
    assert_eq!(s.rtt.min_rtt(), Some(SimDuration::from_micros(20_300)));
    assert_eq!(s.rtt.srtt(), srtt, "Karn: retransmitted data is not timed");
}
