//! RACK loss detection state (RFC 8985, Linux `tcp_recovery.c`): a packet is
//! lost when a packet sent sufficiently later has been delivered.

use cclab_cc::{SimDuration, SimTime};

/// Linux's default `tp->reordering` (`net.ipv4.tcp_reordering`): SACKed
/// packets after which RACK stops waiting for reordering (its DupThresh rule).
pub const TCP_REORDERING: u32 = 3;

#[derive(Clone, Copy, Debug, Default)]
pub struct Rack {
    /// Send time and sequence of the most recently sent packet that was delivered.
    pub xmit_time: SimTime,
    pub end_seq: u64,
    /// RTT of that packet (`rack.rtt_us`).
    pub rtt: SimDuration,
    /// Set when a newer delivery arrived, so detection needs to run.
    pub advanced: bool,
}

/// `tcp_skb_sent_after`: was (t1, seq1) sent after (t2, seq2)?
pub fn sent_after(t1: SimTime, seq1: u64, t2: SimTime, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Rack {
    /// `tcp_rack_advance`: a packet sent at `xmit_time` was (S)ACKed at `now`.
    /// `retransmitted` packets whose RTT is below min_rtt are ambiguous (the
    /// original may be what arrived) and are ignored (RFC 8985 6.2 step 2).
    pub fn advance(&mut self, now: SimTime, xmit_time: SimTime, end_seq: u64, retransmitted: bool, min_rtt: Option<SimDuration>) {
        let rtt = now.saturating_since(xmit_time);
        if retransmitted && min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        self.advanced = true;
        self.rtt = rtt;
        if sent_after(xmit_time, end_seq, self.xmit_time, self.end_seq) {
            self.xmit_time = xmit_time;
            self.end_seq = end_seq;
        }
    }

    /// How long after `xmit_time` a packet may still be outstanding before it
    /// is deemed lost: `rack.rtt + reo_wnd - (now - xmit_time)` (`tcp_rack_skb_timeout`).
    pub fn remaining(&self, now: SimTime, xmit_time: SimTime, reo_wnd: SimDuration) -> i64 {
        (self.rtt.as_nanos() + reo_wnd.as_nanos()) as i64 - now.saturating_since(xmit_time).as_nanos() as i64
    }
}

/// `tcp_rack_reo_wnd`: the reordering window. Without observed reordering it
/// is zero in recovery, or once `TCP_REORDERING` packets are SACKed; otherwise
/// min_rtt/4 (RFC 8985 6.2 step 4), capped at srtt.
pub fn reo_wnd(reordering_seen: bool, in_recovery: bool, sacked_out: u32, min_rtt: Option<SimDuration>, srtt: SimDuration) -> SimDuration {
    if !reordering_seen && (in_recovery || sacked_out >= TCP_REORDERING) {
        return SimDuration::ZERO;
    }
    let quarter_min_rtt = SimDuration(min_rtt.map_or(0, |m| m.as_nanos() / 4));
    quarter_min_rtt.min(srtt)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_reordering_window_is_a_quarter_of_min_rtt_before_dupthresh() {
        let w = reo_wnd(false, false, 1, Some(SimDuration(40 * MS)), SimDuration(50 * MS));
        assert_eq!(w, SimDuration(10 * MS));
    }

    #[test]
    fn the_reordering_window_closes_after_three_sacks_or_in_recovery() {
        let min_rtt = Some(SimDuration(40 * MS));
        assert_eq!(reo_wnd(false, false, 3, min_rtt, SimDuration(50 * MS)), SimDuration::ZERO);
        assert_eq!(reo_wnd(false, true, 0, min_rtt, SimDuration(50 * MS)), SimDuration::ZERO);
        // Once reordering was seen the window stays open.
        assert_eq!(reo_wnd(true, true, 5, min_rtt, SimDuration(50 * MS)), SimDuration(10 * MS));
    }

    #[test]
    fn the_reordering_window_never_exceeds_srtt() {
        assert_eq!(reo_wnd(false, false, 0, Some(SimDuration(400 * MS)), SimDuration(20 * MS)), SimDuration(20 * MS));
    }

    #[test]
    fn a_packet_sent_before_the_delivered_one_expires_after_rtt_plus_window() {
        let mut rack = Rack::default();
        // Packet 7 sent at 10 ms, SACKed at 60 ms: rack.rtt = 50 ms.
        rack.advance(SimTime(60 * MS), SimTime(10 * MS), 7, false, None);
        // Packet 5 sent at 9 ms: at 60 ms, remaining = 50 + 10 - 51 = 9 ms.
        assert_eq!(rack.remaining(SimTime(60 * MS), SimTime(9 * MS), SimDuration(10 * MS)), 9 * MS as i64);
        // With no window it is already lost.
        assert!(rack.remaining(SimTime(60 * MS), SimTime(9 * MS), SimDuration::ZERO) <= 0);
    }

    #[test]
    fn an_ambiguous_fast_retransmission_does_not_advance_rack() {
        let mut rack = Rack::default();
        rack.advance(SimTime(100 * MS), SimTime(95 * MS), 3, true, Some(SimDuration(20 * MS)));
        assert!(!rack.advanced);
        rack.advance(SimTime(100 * MS), SimTime(70 * MS), 3, true, Some(SimDuration(20 * MS)));
        assert!(rack.advanced);
        assert_eq!(rack.xmit_time, SimTime(70 * MS));
    }
}
