//! Sending (`tcp_write_xmit`, `tcp_xmit_retransmit_queue`): lost segments first, then new
//! data, within cwnd and the pacing clock; send-side rate-sample stamps.
//!
//! A paced sender emits GSO bursts, as Linux does: TCP always builds GSO skbs (since
//! Linux 4.13), so turning GSO off on the NIC only moves segmentation into software, and
//! the segments of one skb still leave back to back. Each skb holds about 1 ms of data at
//! the pacing rate (`tcp_tso_autosize`), at least the CC's `min_tso_segs`, and the pacing
//! clock advances once for the whole skb (`tcp_update_skb_after_send`). Measured on the
//! kernel engine (docs/FIDELITY.md): BBR at 25-60 Mbit/s leaves in bursts of 2-4 frames.

use super::{Segment, TcpSender, Transmission, XmitTimer, EVER_RETRANS, LOST, RETRANS_IN_FLIGHT, SACKED, UNPACED_INITIAL_SEGMENTS};
use crate::event::{EventQueue, TimerKind};
use cclab_cc::{CongestionControl, CwndEvent, SimDuration, SimTime};
use std::cmp::Reverse;

/// `sk_pacing_shift` default (`sock_init_data`): a GSO skb holds ~1 ms (2^-10 s) of data
/// at the pacing rate.
const PACING_SHIFT: u32 = 10;
/// `sk_gso_max_size` of a veth (`GSO_LEGACY_MAX_SIZE`): the largest GSO skb in bytes.
const GSO_MAX_BYTES: u64 = 65_536;
/// `sysctl_tcp_tso_rtt_log` default: below 2^(9 + 5) us of min_rtt, `tcp_tso_autosize`
/// allows larger skbs (`gso_max_size >> (min_rtt_us >> 9)`).
const TSO_RTT_LOG: u32 = 9;
/// `bbr_min_tso_rate` (bit/s): BBR's `min_tso_segs` hook asks for one segment per skb
/// below this pacing rate and two above; the only paced CC here is BBR.
const BBR_MIN_TSO_RATE_BPS: u64 = 1_200_000;

/// What a GSO burst is made of: an skb is either new data or one lost skb resent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BurstKind {
    New,
    Retransmit,
}

impl TcpSender {

    pub(super) fn has_new_data(&self) -> bool {
        self.total_segments.is_none_or(|t| self.tcp.snd_nxt < t)
            && self.rwnd_segments.is_none_or(|w| self.packets_out() < w)
    }

    /// The lowest lost segment not yet retransmitted.
    pub(super) fn next_lost(&mut self) -> Option<u64> {
        while let Some(&Reverse(seq)) = self.lost_queue.peek() {
            if seq >= self.tcp.snd_una {
                let flags = self.segment(seq).flags;
                if flags & LOST != 0 && flags & (SACKED | RETRANS_IN_FLIGHT) == 0 {
                    return Some(seq);
                }
            }
            self.lost_queue.pop();
        }
        None
    }

    /// `tcp_tso_segs` for a paced sender: segments per GSO skb, ~1 ms at the pacing rate
    /// (`tcp_tso_autosize`), at least BBR's `min_tso_segs`. Unpaced senders send one
    /// segment per skb here (their ACK clock releases one or two segments per ACK anyway).
    pub(super) fn tso_segs(&self) -> u32 {
        let rate = self.tcp.pacing_rate_bytes_per_sec;
        if !self.pacing || rate == u64::MAX {
            return 1;
        }
        let min_segs = if rate < BBR_MIN_TSO_RATE_BPS / 8 { 1 } else { 2 };
        let mut bytes = rate >> PACING_SHIFT;
        // Short paths get larger skbs (`sysctl_tcp_tso_rtt_log`).
        let rtt_shift = self.rtt.min_rtt().map_or(u64::MAX, |r| r.as_micros() >> TSO_RTT_LOG);
        if rtt_shift < 32 {
            bytes += GSO_MAX_BYTES >> rtt_shift;
        }
        let segs = (bytes.min(GSO_MAX_BYTES) / self.tcp.mss_bytes as u64) as u32;
        segs.max(min_segs)
    }

    /// `tcp_cwnd_test`: segments cwnd lets one skb carry (at most half of cwnd, so
    /// that at least two skbs are in flight).
    fn cwnd_quota(&self) -> u32 {
        let (in_flight, cwnd) = (self.in_flight(), self.tcp.snd_cwnd);
        if in_flight >= cwnd {
            return 0;
        }
        (cwnd / 2).max(1).min(cwnd - in_flight)
    }

    pub(super) fn transmit(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        let mut sent_new = 0u32;
        let mut cwnd_limited = false;
        loop {
            let lost = self.next_lost();
            let new_data = self.has_new_data();
            if lost.is_none() && !new_data {
                break;
            }
            let quota = self.cwnd_quota();
            if quota == 0 {
                cwnd_limited = true;
                break;
            }
            if self.pacing && self.tcp.next_send_time > now {
                let ev = self.timer_event(TimerKind::Pacing);
                let at = self.tcp.next_send_time;
                self.pacing_timer.arm(at, queue, ev);
                break;
            }
            // One skb: up to tso_segs segments back to back, then one pacing interval
            // for all of them.
            let kind = if lost.is_some() { BurstKind::Retransmit } else { BurstKind::New };
            let max_segs = self.tso_segs().min(quota);
            let mut burst_bytes = 0u32;
            let mut prev_seq: Option<u64> = None;
            for _ in 0..max_segs {
                match kind {
                    BurstKind::Retransmit => {
                        // A resent skb covers consecutive lost segments only.
                        let Some(seq) = self.next_lost() else { break };
                        if prev_seq.is_some_and(|p| seq != p + 1) {
                            break;
                        }
                        self.lost_queue.pop();
                        let head = seq == self.tcp.snd_una;
                        burst_bytes += self.emit_segment(now, seq, true, out, queue);
                        if head && self.xmit_timer_kind != XmitTimer::ReoTimeout {
                            let at = now + self.rto_backed_off();
                            self.arm_xmit_timer(XmitTimer::Rto, at, queue);
                        }
                        prev_seq = Some(seq);
                    }
                    BurstKind::New => {
                        if !self.has_new_data() {
                            break;
                        }
                        let seq = self.tcp.snd_nxt;
                        burst_bytes += self.emit_segment(now, seq, false, out, queue);
                        sent_new += 1;
                    }
                }
            }
            self.advance_send_clock(now, burst_bytes);
        }
        if sent_new > 0 || cwnd_limited {
            // tcp_cwnd_validate
            if self.tcp.snd_una >= self.cwnd_usage_seq || cwnd_limited || (!self.cwnd_limited && self.packets_out() > self.max_packets_out) {
                self.cwnd_limited = cwnd_limited;
                self.max_packets_out = self.packets_out();
                self.cwnd_usage_seq = self.tcp.snd_nxt;
            }
        }
        if sent_new > 0 {
            self.schedule_loss_probe(now, false, queue);
        }
        if !self.has_new_data() {
            self.check_app_limited();
        }
    }

    /// `tcp_rate_check_app_limited`: out of data with room in cwnd.
    pub(super) fn check_app_limited(&mut self) {
        if self.in_flight() < self.tcp.snd_cwnd && self.lost_out <= self.retrans_out {
            self.tcp.app_limited = (self.tcp.delivered + self.in_flight() as u64).max(1);
        }
    }

    /// Sends one segment as its own skb (RTO and loss-probe retransmissions).
    pub(super) fn send_segment(&mut self, now: SimTime, seq: u64, is_retrans: bool, out: &mut Vec<Transmission>, queue: &mut EventQueue) {
        let bytes = self.emit_segment(now, seq, is_retrans, out, queue);
        self.advance_send_clock(now, bytes);
    }

    /// Puts one segment on the wire and does its bookkeeping, leaving the pacing clock
    /// to the caller (one advance per skb). Returns its payload bytes.
    fn emit_segment(&mut self, now: SimTime, seq: u64, is_retrans: bool, out: &mut Vec<Transmission>, queue: &mut EventQueue) -> u32 {
        let prior_packets_out = self.packets_out();
        if self.in_flight() == 0 {
            self.sync_state(now);
            self.cc.cwnd_event(&mut self.tcp, CwndEvent::TxStart);
        }
        let tx = self.rate.on_send(now, prior_packets_out, &mut self.tcp);
        if is_retrans {
            let seg = self.segment_mut(seq);
            seg.flags |= RETRANS_IN_FLIGHT | EVER_RETRANS;
            seg.xmit_time = now;
            seg.tx = tx;
            self.retrans_out += 1;
            self.stats.retrans_segments += 1;
        } else {
            debug_assert_eq!(seq, self.tcp.snd_nxt);
            self.segments.push_back(Segment { xmit_time: now, tx, flags: 0 });
            self.tcp.snd_nxt += 1;
        }
        self.time_sorted.push_back((now, seq));
        if self.in_cwnd_reduction() {
            self.prr.on_send(1);
        }
        let bytes = self.segment_bytes(seq);
        self.data_segs_out += 1;
        self.stats.data_segments_sent += 1;
        self.stats.bytes_sent += bytes as u64;
        if !is_retrans && (prior_packets_out == 0 || (self.retransmit_timer.is_armed() && self.xmit_timer_kind == XmitTimer::LossProbe)) {
            self.rearm_rto(now, queue);
        }
        out.push(Transmission { seq, payload_bytes: bytes, is_retransmission: is_retrans });
        bytes
    }

    /// `tcp_wstamp_ns` bookkeeping in `__tcp_transmit_skb` and
    /// `tcp_update_skb_after_send`: the clock never lags `now`; when pacing,
    /// the next departure is one skb's time at the pacing rate later, less
    /// up to half of it when the clock had lagged (idle).
    pub(super) fn advance_send_clock(&mut self, now: SimTime, payload_bytes: u32) {
        let prior = self.tcp.next_send_time;
        self.tcp.next_send_time = prior.max(now);
        let rate = self.tcp.pacing_rate_bytes_per_sec;
        if self.pacing && rate != u64::MAX && rate > 0 && self.data_segs_out >= UNPACED_INITIAL_SEGMENTS {
            let mut len_ns = payload_bytes as u64 * 1_000_000_000 / rate;
            let credit = (self.tcp.next_send_time - prior).as_nanos();
            len_ns -= (len_ns / 2).min(credit);
            self.tcp.next_send_time += SimDuration(len_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FlowConfig;

    const MSS: u32 = 1448;

    /// A BBR sender past its unpaced initial window, with room in cwnd and the
    /// given pacing rate (payload bytes per second).
    fn paced_sender(rate_bytes_per_sec: u64, cwnd: u32) -> (TcpSender, EventQueue, SimTime) {
        let cc = FlowConfig::bulk(0, "bbr").cc_config().unwrap();
        let mut s = TcpSender::new(0, &cc, MSS, None, None, 1);
        let mut q = EventQueue::default();
        let mut out = Vec::new();
        let t0 = SimTime(20_000_000);
        s.start(t0, SimDuration::from_millis(20), &mut q, &mut out);
        assert_eq!(out.len() as u64, UNPACED_INITIAL_SEGMENTS, "the initial window leaves unpaced");
        s.tcp.snd_cwnd = cwnd;
        s.tcp.pacing_rate_bytes_per_sec = rate_bytes_per_sec;
        // The skb that completed the initial window was paced: start when it is due.
        let due = s.tcp.next_send_time;
        assert!(due > t0);
        (s, q, due)
    }

    #[test]
    fn a_paced_sender_emits_about_a_millisecond_of_data_back_to_back_then_waits_for_all_of_it() {
        // 47 Mbit/s of payload: 5_875_000 >> 10 = 5737 B, three segments per skb.
        let (mut s, mut q, t0) = paced_sender(5_875_000, 100);
        assert_eq!(s.tso_segs(), 3);
        let mut out = Vec::new();
        s.transmit(t0, &mut q, &mut out);
        assert_eq!(out.len(), 3, "one skb of three segments at once");
        // The clock moves on by the whole skb: 3 x 1448 B at 5.875 MB/s.
        let skb_ns = 3 * MSS as u64 * 1_000_000_000 / 5_875_000;
        assert_eq!(s.tcp.next_send_time, t0 + SimDuration(skb_ns));
        // Nothing more until then; at that time the next skb leaves whole.
        out.clear();
        s.transmit(t0 + SimDuration(skb_ns - 1), &mut q, &mut out);
        assert!(out.is_empty());
        s.transmit(t0 + SimDuration(skb_ns), &mut q, &mut out);
        assert_eq!(out.iter().map(|t| t.seq).collect::<Vec<_>>(), vec![13, 14, 15]);
    }

    #[test]
    fn skbs_never_hold_fewer_than_bbrs_minimum_nor_more_than_cwnd_allows() {
        // 20 Mbit/s: 2441 B per ms is one segment, but BBR asks for two above 1.2 Mbit/s.
        assert_eq!(paced_sender(2_500_000, 100).0.tso_segs(), 2);
        // Below 1.2 Mbit/s one segment per skb.
        assert_eq!(paced_sender(100_000, 100).0.tso_segs(), 1);
        // 200 Mbit/s: 24_414 B, 16 segments.
        assert_eq!(paced_sender(25_000_000, 100).0.tso_segs(), 16);
        // cwnd leaves room for two more segments: the skb carries two (tcp_cwnd_test).
        let (mut s, mut q, t0) = paced_sender(25_000_000, 12);
        let mut out = Vec::new();
        s.transmit(t0, &mut q, &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn an_unpaced_sender_sends_segment_by_segment_within_cwnd() {
        let cc = FlowConfig::bulk(0, "cubic").cc_config().unwrap();
        let mut s = TcpSender::new(0, &cc, MSS, None, None, 1);
        let (mut q, mut out) = (EventQueue::default(), Vec::new());
        s.start(SimTime(20_000_000), SimDuration::from_millis(20), &mut q, &mut out);
        assert_eq!(s.tso_segs(), 1);
        assert_eq!(out.len(), 10);
    }
}
