//! Sending (`tcp_write_xmit`, `tcp_xmit_retransmit_queue`): lost segments first, then new
//! data, within cwnd and the pacing clock; send-side rate-sample stamps.
//!
//! A paced sender emits GSO bursts, as Linux does: TCP always builds GSO skbs (since
//! Linux 4.13), so turning GSO off on the NIC only moves segmentation into software, and
//! the segments of one skb still leave back to back. Each skb holds about 1 ms of data at
//! the pacing rate (`tcp_tso_autosize`), at least the CC's `min_tso_segs`, and the pacing
//! clock advances once for the whole skb (`tcp_update_skb_after_send`). Measured on the
//! kernel engine (docs/FIDELITY.md): BBR at 25-60 Mbit/s leaves in bursts of 2-4 frames.
//!
//! Unpaced senders (CUBIC, Reno) build GSO skbs too: Linux sets `sk_pacing_rate` for
//! them as well (`tcp_update_pacing_rate`: 200% of cwnd/srtt in slow start, 120% after),
//! only to size skbs, and `tcp_tso_should_defer` holds back an skb that cwnd would cut
//! short while more ACKs are due, so an ACK-clocked sender releases a few segments at a
//! time rather than one or two per ACK. Measured on the kernel engine (router capture,
//! two CUBIC flows, 50 Mbit/s): the 20 ms flow arrives in runs of 3-4 frames, the
//! 60 ms flow in runs of 2 (`tcp_min_tso_segs`).
//!
//! Paced senders meet the same deferral once the pacing clock lets them go (`tcp_write_xmit`
//! checks pacing, then cwnd, then `tcp_tso_should_defer`): a cwnd-limited BBR flow in
//! STARTUP releases about a millisecond of skbs at a time. Measured on the kernel engine
//! (router capture, two BBR flows, 50 Mbit/s, 20/40 ms): 8-10 frames every 1.1 ms, where
//! sending at each ACK gave pairs every 0.24 ms.

use cclab_aqm::Ecn;
use super::{Segment, TcpSender, Transmission, XmitTimer, EVER_RETRANS, LOST, RETRANS_IN_FLIGHT, SACKED, UNPACED_INITIAL_SEGMENTS};
use crate::event::{EventQueue, TimerKind};
use cclab_cc::{CaState, CongestionControl, CwndEvent, SimDuration, SimTime};
use std::cmp::Reverse;

/// `sk_pacing_shift` default (`sock_init_data`): a GSO skb holds ~1 ms (2^-10 s) of data
/// at the pacing rate.
const PACING_SHIFT: u32 = 10;
/// `sk_gso_max_size` of a veth (`GSO_LEGACY_MAX_SIZE`): the largest GSO skb in bytes.
const GSO_MAX_BYTES: u64 = 65_536;
/// `sysctl_tcp_tso_rtt_log` default: below 2^(9 + 5) us of min_rtt, `tcp_tso_autosize`
/// allows larger skbs (`gso_max_size >> (min_rtt_us >> 9)`).
const TSO_RTT_LOG: u32 = 9;
/// `sysctl_tcp_min_tso_segs` default: the smallest skb of a CC without a `min_tso_segs` hook.
const TCP_MIN_TSO_SEGS: u32 = 2;
/// `sysctl_tcp_pacing_ss_ratio` / `sysctl_tcp_pacing_ca_ratio` defaults (percent):
/// `tcp_update_pacing_rate` for CCs that do not set the pacing rate themselves.
const PACING_SS_RATIO_PCT: u64 = 200;
const PACING_CA_RATIO_PCT: u64 = 120;
/// `sysctl_tcp_tso_win_divisor` default: send at once when a third of the window is free.
const TSO_WIN_DIVISOR: u32 = 3;
/// `tcp_tso_should_defer`: defer only if the last write was at most this long ago.
const TSO_DEFER_RECENT_WRITE: SimDuration = SimDuration::from_millis(1);
/// `tcp_tso_should_defer`: defer only if the head's ACK is due within min(srtt/2, this).
const TSO_DEFER_ACK_DUE_WITHIN: SimDuration = SimDuration::from_millis(1);

/// What a GSO burst is made of: an skb is either new data or one lost skb resent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BurstKind {
    New,
    Retransmit,
}

impl TcpSender {

    /// The application has written data not yet sent.
    fn has_app_data(&self) -> bool {
        self.tcp.snd_nxt < self.send_buffer.write_seq()
    }

    /// New segments the receive window allows now (`tcp_snd_wnd_test`: a segment
    /// goes only if it ends within `snd_una + snd_wnd`).
    fn window_room(&self) -> u64 {
        let fixed = self.rwnd_segments.map_or(u64::MAX, |w| w.saturating_sub(self.packets_out()));
        fixed.min(self.snd_wnd_end.saturating_sub(self.tcp.snd_nxt))
    }

    pub(super) fn has_new_data(&self) -> bool {
        self.has_app_data() && self.window_room() > 0
    }

    /// New segments the application and receive window allow now.
    fn new_data_available(&self) -> u64 {
        let app = self.send_buffer.write_seq().saturating_sub(self.tcp.snd_nxt);
        app.min(self.window_room())
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

    /// `tcp_update_pacing_rate`, which `tcp_cong_control` runs at the end of every ACK for
    /// a CC without `cong_control` (CUBIC, Reno): `sk_pacing_rate` = 200% (slow start,
    /// cwnd under half of ssthresh) or 120% of max(cwnd, packets out) per srtt. Nothing
    /// paces by it without fq, but `tcp_tso_autosize` sizes skbs by it and HyStart's
    /// `hystart_ack_delay` reads it. Paced CCs set their own rate.
    pub(super) fn update_unpaced_pacing_rate(&mut self) {
        if self.cc_sets_pacing_rate {
            return;
        }
        let srtt_us = self.rtt.srtt().as_micros();
        if srtt_us == 0 {
            return; // sock_init_data's ~0: no rate yet
        }
        let ratio_pct = if self.tcp.snd_cwnd < self.tcp.snd_ssthresh / 2 { PACING_SS_RATIO_PCT } else { PACING_CA_RATIO_PCT };
        let window_bytes = (self.tcp.snd_cwnd as u64).max(self.packets_out()) * self.tcp.mss_bytes as u64;
        self.tcp.pacing_rate_bytes_per_sec = window_bytes * ratio_pct * 10_000 / srtt_us;
    }

    /// `tcp_tso_segs`: segments per GSO skb, ~1 ms at the skb-sizing rate
    /// (`tcp_tso_autosize`), at least the CC's `min_tso_segs` (BBR's hook, else
    /// `tcp_min_tso_segs`).
    pub(super) fn tso_segs(&self) -> u32 {
        // L4STeam's `.tso_segs` replaces the autosizing (Prague's ~244 us bursts).
        if let Some(segs) = self.cc.tso_segs(&self.tcp) {
            return segs.max(1);
        }
        // `sk_pacing_rate`: the CC's for a paced sender, else tcp_update_pacing_rate's.
        let rate = self.tcp.pacing_rate_bytes_per_sec;
        if rate == u64::MAX {
            return if self.cc_sets_pacing_rate { 1 } else { TCP_MIN_TSO_SEGS };
        }
        let min_segs = if self.cc_sets_pacing_rate { self.cc.min_tso_segs(&self.tcp).unwrap_or(TCP_MIN_TSO_SEGS) } else { TCP_MIN_TSO_SEGS };
        let mut bytes = rate >> PACING_SHIFT;
        // Short paths get larger skbs (`sysctl_tcp_tso_rtt_log`).
        let rtt_shift = self.rtt.min_rtt().map_or(u64::MAX, |r| r.as_micros() >> TSO_RTT_LOG);
        if rtt_shift < 32 {
            bytes += GSO_MAX_BYTES >> rtt_shift;
        }
        let segs = (bytes.min(GSO_MAX_BYTES) / self.tcp.mss_bytes as u64) as u32;
        segs.max(min_segs)
    }

    /// `tcp_tso_should_defer` for the next skb of new data, paced or not (`tcp_write_xmit`
    /// asks it after the pacing check): hold it while cwnd would cut it below `max_segs`
    /// segments and below a third of cwnd, the last write was recent (1 ms), and the
    /// head's ACK is due within min(srtt/2, 1 ms) (Linux 6.18 and the stable kernels
    /// since Oct 2025, "tcp: fix tcp_tso_should_defer() vs large RTT"; before it, the
    /// head had to have left over srtt/2 ago).
    fn should_defer_tso(&self, now: SimTime, max_segs: u32) -> bool {
        if max_segs <= 1 || matches!(self.tcp.ca_state, CaState::Recovery | CaState::Loss) {
            return false;
        }
        // `tcp_wstamp_ns`: the last write for an unpaced sender, the next departure the
        // pacing clock allows for a paced one.
        if now.as_nanos() > self.tcp.next_send_time.as_nanos() + TSO_DEFER_RECENT_WRITE.as_nanos() {
            return false;
        }
        let (in_flight, cwnd) = (self.in_flight(), self.tcp.snd_cwnd);
        let limit_segs = cwnd.saturating_sub(in_flight).min(self.window_room().min(u32::MAX as u64) as u32);
        // Linux compares bytes: limit >= min(snd_wnd, cwnd x mss) / divisor. For whole
        // segments that is limit x divisor >= the chunk's segments (a third of a cwnd of 14
        // is 4.67 segments, so four free segments do not send at once).
        let snd_wnd_segs = self.snd_wnd_end.saturating_sub(self.tcp.snd_una).min(self.rwnd_segments.unwrap_or(u64::MAX));
        let chunk_segs = snd_wnd_segs.min(cwnd as u64);
        if limit_segs >= max_segs || limit_segs as u64 * TSO_WIN_DIVISOR as u64 >= chunk_segs {
            return false;
        }
        let Some(head) = self.segments.front() else { return false };
        let srtt_ns = self.rtt.srtt().as_nanos();
        let expected_ack_ns = head.xmit_time.as_nanos() + srtt_ns;
        let threshold_ns = (srtt_ns / 2).min(TSO_DEFER_ACK_DUE_WITHIN.as_nanos());
        expected_ack_ns <= now.as_nanos() + threshold_ns
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
            let tso_segs = self.tso_segs();
            // Only the first skb of a send opportunity is held back: Linux's write
            // queue holds skbs cut to earlier cwnd limits, and a one-segment remainder
            // goes through the Nagle test, not the deferral (kernel engine, one CUBIC
            // flow at 20 Mbit/s: ACKs of 2 segments 1.2 ms apart, runs of 2 frames and
            // of 3 where cwnd grew, rarely 4).
            if kind == BurstKind::New && sent_new == 0 && self.should_defer_tso(now, tso_segs) {
                cwnd_limited = true;
                break;
            }
            let max_segs = tso_segs.min(quota);
            // tcp_set_tx_in_flight: in flight once this whole skb is out.
            let skb_in_flight = self.in_flight() + (max_segs as u64).min(self.new_data_available()) as u32;
            let mut burst_bytes = 0u32;
            let burst_start = out.len();
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
                        burst_bytes += self.emit_segment(now, seq, true, 0, out, queue);
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
                        burst_bytes += self.emit_segment(now, seq, false, skb_in_flight, out, queue);
                        sent_new += 1;
                    }
                }
            }
            // __tcp_transmit_skb: PSH on every skb of two or more segments ("to expedite GRO
            // flush at receiver"), which tcp_gso_segment leaves on the last one.
            if out.len() - burst_start >= 2 {
                out.last_mut().expect("the skb's segments").psh = true;
            }
            if kind == BurstKind::New && out.len() > burst_start {
                self.send_buffer.on_skb_sent(self.tcp.snd_nxt);
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
            // "The starvation is caused by insufficient sender buffer": data just sent, not
            // cwnd-limited, the write queue empty, the writer waiting for memory.
            if !self.is_cwnd_limited() && !self.has_app_data() && !self.send_buffer.app_written_all() {
                self.stats.sndbuf_limited_since.get_or_insert(now);
            }
        }
        if sent_new > 0 {
            self.schedule_loss_probe(now, false, queue);
        }
        // tcp_write_xmit's chrono: new data held back by the receiver's window, and by
        // nothing tried before it (the pacing check, then tcp_cwnd_test, then
        // tcp_snd_wnd_test); a full window behind a full cwnd is not rwnd-limited.
        let paced_out = self.pacing && self.tcp.next_send_time > now;
        if self.has_app_data() && self.window_room() == 0 && self.cwnd_quota() > 0 && !paced_out {
            self.stats.rwnd_limited_since.get_or_insert(now);
        } else if let Some(since) = self.stats.rwnd_limited_since.take() {
            self.stats.rwnd_limited_ns += (now - since).as_nanos();
        }
        // tcp_rate_check_app_limited: the application, not the receiver, ran dry. (A writer
        // waiting for memory checks when it wakes: TcpSender::on_ack.)
        if !self.has_app_data() && self.send_buffer.app_written_all() {
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
        let tx_in_flight = self.in_flight() + 1;
        let bytes = self.emit_segment(now, seq, is_retrans, tx_in_flight, out, queue);
        if !is_retrans {
            self.send_buffer.on_skb_sent(self.tcp.snd_nxt);
        }
        self.advance_send_clock(now, bytes);
    }

    /// Puts one segment on the wire and does its bookkeeping, leaving the pacing clock
    /// to the caller (one advance per skb). `tx_in_flight` is the skb's
    /// `tx.in_flight` for new data. Returns its payload bytes.
    fn emit_segment(&mut self, now: SimTime, seq: u64, is_retrans: bool, tx_in_flight: u32, out: &mut Vec<Transmission>, queue: &mut EventQueue) -> u32 {
        let prior_packets_out = self.packets_out();
        if self.in_flight() == 0 {
            self.sync_state(now);
            self.cc.cwnd_event(&mut self.tcp, CwndEvent::TxStart);
        }
        let mut tx = self.rate.on_send(now, prior_packets_out, &mut self.tcp);
        if is_retrans {
            let seg = self.segment_mut(seq);
            (tx.in_flight, tx.lost) = (seg.tx.in_flight, seg.tx.lost);
            seg.flags |= RETRANS_IN_FLIGHT | EVER_RETRANS;
            seg.xmit_time = now;
            seg.tx = tx;
            self.retrans_out += 1;
            self.stats.retrans_segments += 1;
        } else {
            debug_assert_eq!(seq, self.tcp.snd_nxt);
            tx.in_flight = tx_in_flight;
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
        // tcp_ecn_send: new data of an ECN connection leaves ECT(0) (INET_ECN_xmit),
        // carrying CWR once after a reduction; retransmissions go Not-ECT, unless the CC
        // needs ECN (DCTCP, Prague), whose socket keeps ECT on everything. A CC that wants
        // ECT(1) (TCP_ECN_ECT_1, Prague) sends that instead.
        let (ecn, cwr) = if self.tcp.ecn_ok && !is_retrans {
            (self.ect, std::mem::take(&mut self.ecn_queue_cwr))
        } else if self.tcp.ecn_ok && self.cc.needs_ecn() {
            (self.ect, false)
        } else {
            (Ecn::NotEct, false)
        };
        out.push(Transmission { seq, payload_bytes: bytes, is_retransmission: is_retrans, ecn, cwr, psh: false });
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
#[path = "transmit_tests.rs"]
mod tests;
