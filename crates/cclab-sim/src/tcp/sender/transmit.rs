//! Sending (`tcp_write_xmit`, `tcp_xmit_retransmit_queue`): lost segments first, then new
//! data, within cwnd and the pacing clock; send-side rate-sample stamps.

use super::{Segment, TcpSender, Transmission, XmitTimer, EVER_RETRANS, LOST, RETRANS_IN_FLIGHT, SACKED, UNPACED_INITIAL_SEGMENTS};
use crate::event::{EventQueue, TimerKind};
use cclab_cc::{CongestionControl, CwndEvent, SimDuration, SimTime};
use std::cmp::Reverse;

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

    pub(super) fn transmit(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        let mut sent_new = 0u32;
        let mut cwnd_limited = false;
        loop {
            let lost = self.next_lost();
            let new_data = self.has_new_data();
            if lost.is_none() && !new_data {
                break;
            }
            if self.in_flight() >= self.tcp.snd_cwnd {
                cwnd_limited = true;
                break;
            }
            if self.pacing && self.tcp.next_send_time > now {
                let ev = self.timer_event(TimerKind::Pacing);
                let at = self.tcp.next_send_time;
                self.pacing_timer.arm(at, queue, ev);
                break;
            }
            match lost {
                Some(seq) => {
                    self.lost_queue.pop();
                    let head = seq == self.tcp.snd_una;
                    self.send_segment(now, seq, true, out, queue);
                    if head && self.xmit_timer_kind != XmitTimer::ReoTimeout {
                        let at = now + self.rto_backed_off();
                        self.arm_xmit_timer(XmitTimer::Rto, at, queue);
                    }
                }
                None => {
                    let seq = self.tcp.snd_nxt;
                    self.send_segment(now, seq, false, out, queue);
                    sent_new += 1;
                }
            }
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

    pub(super) fn send_segment(&mut self, now: SimTime, seq: u64, is_retrans: bool, out: &mut Vec<Transmission>, queue: &mut EventQueue) {
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
        self.advance_send_clock(now, bytes);
        if !is_retrans && (prior_packets_out == 0 || (self.retransmit_timer.is_armed() && self.xmit_timer_kind == XmitTimer::LossProbe)) {
            self.rearm_rto(now, queue);
        }
        out.push(Transmission { seq, payload_bytes: bytes, is_retransmission: is_retrans });
    }

    /// `tcp_wstamp_ns` bookkeeping in `__tcp_transmit_skb` and
    /// `tcp_update_skb_after_send`: the clock never lags `now`; when pacing,
    /// the next departure is one packet's time at the pacing rate later, less
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
