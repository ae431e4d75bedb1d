//! Loss recovery without RACK (`net.ipv4.tcp_recovery = 0`): the duplicate-ACK scoreboard
//! (`tcp_time_to_recover`, `tcp_update_scoreboard`, `tcp_mark_head_lost`).

use super::*;
use cclab_cc::CaState;
use crate::tcp::receiver::AckPacket;

fn sack(blocks: &[(u64, u64)]) -> AckPacket {
    let mut ack = AckPacket { cum_ack: 0, ..AckPacket::default() };
    for (i, &block) in blocks.iter().enumerate() {
        ack.sack_blocks[i] = block;
    }
    ack.sack_count = blocks.len() as u8;
    ack
}

/// A classic-recovery CUBIC sender whose initial window (0..10) left at 20 ms over a 20 ms path.
fn classic_sender() -> (TcpSender, EventQueue, SimTime) {
    let (mut s, q, t0, out) = started_cubic_sender(SimDuration::from_millis(20), false);
    assert_eq!(out.len(), 10);
    s.use_classic_loss_recovery();
    (s, q, t0 + SimDuration::from_millis(20))
}

#[test]
fn a_hole_is_lost_once_three_segments_above_it_are_sacked_and_not_before() {
    let (mut s, mut q, now) = classic_sender();
    let mut out = Vec::new();
    // Segment 0 lost; 1 and 2 SACKed: two duplicate ACKs' worth, below tp->reordering (3).
    s.on_ack(now, &sack(&[(1, 3)]), &mut q, &mut out);
    assert_eq!((s.tcp.ca_state, s.lost_out), (CaState::Disorder, 0));
    assert!(!out.iter().any(|t| t.is_retransmission));
    // The third: sacked_out + 1 > 3 enters Recovery and marks the head lost, sent at once.
    s.on_ack(now + SimDuration::from_micros(10), &sack(&[(1, 4)]), &mut q, &mut out);
    assert_eq!((s.tcp.ca_state, s.lost_out), (CaState::Recovery, 1));
    assert!(out.iter().any(|t| t.is_retransmission && t.seq == 0));
    s.check_invariants().unwrap();
}

#[test]
fn holes_with_fewer_than_three_sacked_segments_above_wait() {
    let (mut s, mut q, now) = classic_sender();
    let mut out = Vec::new();
    // 0 and 5 lost; 1-4 and 6-7 SACKed: sacked_out 6, so the walk from the head marks until it
    // passes 6 - 3 = 3 SACKed segments: 0 is lost, and 5 (with only 6 and 7 above) is not yet.
    s.on_ack(now, &sack(&[(1, 5), (6, 8)]), &mut q, &mut out);
    assert_eq!(s.tcp.ca_state, CaState::Recovery);
    assert_ne!(s.segment(0).flags & LOST, 0);
    assert_eq!(s.segment(5).flags & LOST, 0);
    // One more SACKed above it (8): now 5 has three SACKed segments above and is lost too.
    s.on_ack(now + SimDuration::from_micros(10), &sack(&[(1, 5), (6, 9)]), &mut q, &mut out);
    assert_ne!(s.segment(5).flags & LOST, 0);
    assert_eq!(s.lost_out, 2);
    s.check_invariants().unwrap();
}
