//! The ACK's processing (`tcp_ack`): the cumulative ACK and SACK blocks mark the queue,
//! the rate sample and RTT are taken, and the CC, loss recovery and the writer follow.

use super::{Transmission, TcpSender, EVER_RETRANS, LOST, RETRANS_IN_FLIGHT, SACKED, TCP_REORDERING};
use crate::event::EventQueue;
use crate::tcp::rate::{self, SampleBuilder};
use crate::tcp::receiver::AckPacket;
use crate::tcp::rtt::tsopt_rtt;
use cclab_cc::{AckSample, CaState, CongestionControl, SimDuration, SimTime};

impl TcpSender {
    pub fn on_ack(&mut self, now: SimTime, ack: &AckPacket, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        let cum_ack = ack.cum_ack.min(self.tcp.snd_nxt);
        if cum_ack < self.tcp.snd_una {
            return; // old ACK
        }
        self.tcp.now = now;
        // tcp_ack_update_window: an ACK that moves snd_una, or offers more, sets the
        // window; tcp_store_ts_recent keeps its TSval for the next segments' echo.
        if cum_ack > self.tcp.snd_una || ack.window_end > self.snd_wnd_end {
            self.snd_wnd_end = ack.window_end;
            self.note_peer_window();
        }
        self.ts_recent = self.ts_recent.max(ack.tsval);
        let prior_snd_una = self.tcp.snd_una;
        let prior_in_flight = self.in_flight();
        let prior_delivered = self.tcp.delivered;
        let prior_lost = self.tcp.lost;
        // tcp_ecn_rcv_ecn_echo: FLAG_ECE on an ECN connection. With Accurate ECN, the
        // increase of the CE count (tcp_accecn_process) is both the flag and its size.
        let accecn_delta = if self.accecn && self.tcp.ecn_ok {
            let delta = ack.ce_count.wrapping_sub(self.last_ce_count);
            self.last_ce_count = ack.ce_count;
            Some(delta)
        } else {
            None
        };
        let ece = match accecn_delta {
            Some(delta) => delta > 0,
            None => ack.ece && self.tcp.ecn_ok,
        };
        let min_rtt = self.rtt.min_rtt();
        let mut rs = SampleBuilder::default();
        let mut first_sackt: Option<SimTime> = None;
        let mut last_sackt: Option<SimTime> = None;
        let mut newly_sacked = 0u32;

        // tcp_sacktag_write_queue: only the parts of each block not yet SACKed.
        let mut new_ranges = std::mem::take(&mut self.scratch_ranges);
        new_ranges.clear();
        for &(start, end) in ack.sacks() {
            let (start, end) = (start.max(cum_ack), end.min(self.tcp.snd_nxt));
            if start < end {
                self.sacked_ranges.insert(start, end, |a, b| new_ranges.push((a, b)));
            }
        }
        for &(a, b) in &new_ranges {
            for seq in a..b {
                newly_sacked += 1;
                self.sack_one(now, seq, min_rtt, &mut rs, &mut first_sackt, &mut last_sackt);
            }
        }
        self.scratch_ranges = new_ranges;

        // tcp_clean_rtx_queue: the cumulative ACK.
        let mut pkts_acked = 0u32;
        let mut first_ackt: Option<SimTime> = None;
        let mut last_ackt: Option<SimTime> = None;
        let mut retrans_data_acked = false;
        while self.tcp.snd_una < cum_ack {
            let seq = self.tcp.snd_una;
            let mut seg = self.segments.pop_front().expect("outstanding segment");
            if seg.flags & SACKED != 0 {
                self.sacked_out -= 1;
            } else {
                self.tcp.delivered += 1;
                let retransmitted = seg.flags & EVER_RETRANS != 0;
                self.rack.advance(now, seg.xmit_time, seq, retransmitted, min_rtt);
                self.rate.on_delivered(&mut seg.tx, seg.xmit_time, seq, retransmitted, false, &mut rs);
                if seg.flags & LOST != 0 {
                    self.lost_out -= 1;
                }
                if retransmitted {
                    retrans_data_acked = true;
                } else {
                    first_ackt.get_or_insert(seg.xmit_time);
                    last_ackt = Some(seg.xmit_time);
                }
            }
            if seg.flags & RETRANS_IN_FLIGHT != 0 {
                self.retrans_out -= 1;
            }
            pkts_acked += 1;
            self.tcp.snd_una += 1;
        }
        self.sacked_ranges.remove_below(cum_ack);
        self.send_buffer.on_cumulative_ack(cum_ack);
        let snd_una_advanced = cum_ack > prior_snd_una;
        if snd_una_advanced {
            self.consecutive_rtos = 0;
        }

        // tcp_ack_update_rtt (Karn: no sample from retransmitted data).
        let mut seq_rtt = match first_ackt {
            Some(t) if !retrans_data_acked => Some(now - t),
            _ => first_sackt.map(|t| now - t),
        };
        let mut ca_rtt = last_sackt.or(if retrans_data_acked { None } else { last_ackt }).map(|t| now - t);
        // Nothing timed, yet data acknowledged (FLAG_ACKED): the timestamp echo times it.
        if seq_rtt.is_none() && pkts_acked > 0 {
            if let Some(tsecr) = ack.tsecr {
                let sample = tsopt_rtt(self.ts_clock.read(now), tsecr);
                (seq_rtt, ca_rtt) = (Some(sample), Some(sample));
            }
        }
        if let (Some(seq_rtt), Some(ca_rtt)) = (seq_rtt, ca_rtt) {
            self.rtt.update_min_rtt(ca_rtt);
            self.rtt.on_sample(seq_rtt, self.tcp.snd_una, self.tcp.snd_nxt);
            self.rto_backoff = 0;
            self.stats.rtt_samples_us.push(ca_rtt.as_micros().min(u32::MAX as u64) as u32);
        }
        // tcp_count_delivered(.., ece_ack): everything this ACK delivered; with AccECN the
        // packets it counted CE (tcp_count_delivered_ce).
        let ece_delta = match accecn_delta {
            Some(delta) => delta,
            None if ece => (self.tcp.delivered - prior_delivered) as u32,
            None => 0,
        };
        self.tcp.delivered_ce += ece_delta as u64;
        if pkts_acked > 0 || newly_sacked > 0 {
            self.sync_state(now);
            let sample = AckSample { pkts_acked, rtt: ca_rtt, in_flight: prior_in_flight };
            self.cc.pkts_acked(&mut self.tcp, &sample);
        }
        if self.tlp_high_seq.is_some_and(|h| cum_ack >= h) {
            self.tlp_high_seq = None;
        }
        // tcp_in_ack_event: after the deliveries are counted, before recovery acts
        // (snd_una, snd_nxt, delivered and delivered_ce are current; DCTCP reads those).
        self.cc.in_ack_event(&mut self.tcp);

        // Loss detection and recovery state (only for "dubious" ACKs, as Linux:
        // tcp_ack_is_dubious counts ECE as an alert).
        let mut set_xmit_timer = snd_una_advanced;
        if !snd_una_advanced || newly_sacked > 0 || ece || self.tcp.ca_state != CaState::Open {
            self.fastretrans_alert(now, ece, !snd_una_advanced, newly_sacked > 0, &mut set_xmit_timer, queue);
        }

        // tcp_rate_gen + tcp_cong_control.
        let newly_delivered = (self.tcp.delivered - prior_delivered) as u32;
        let newly_lost = (self.tcp.lost - prior_lost) as u32;
        if newly_delivered > 0 {
            self.tcp.delivered_time = now;
        }
        let mut sample = rate::generate(&rs, now, self.tcp.delivered, self.tcp.lost, self.tcp.delivered_ce, newly_delivered, newly_lost, prior_in_flight, self.rtt.min_rtt(), ca_rtt, &mut self.tcp.app_limited);
        sample.ece_delta = ece_delta;
        self.sync_state(now);
        if self.cc.cong_control(&mut self.tcp, &sample) {
            self.cc_owns_cwnd = true;
        } else if self.in_cwnd_reduction() {
            let in_flight = self.in_flight();
            if let Some(cwnd) = self.prr.on_ack(self.tcp.snd_ssthresh, in_flight, newly_delivered, newly_lost, snd_una_advanced) {
                self.tcp.snd_cwnd = cwnd.max(1);
            }
        } else if snd_una_advanced {
            self.cc.cong_avoid(&mut self.tcp, cum_ack, newly_delivered);
        }
        self.tcp.snd_cwnd = self.tcp.snd_cwnd.clamp(1, self.tcp.snd_cwnd_clamp);
        self.update_unpaced_pacing_rate();

        if set_xmit_timer {
            self.set_xmit_timer(now, queue);
        }
        if self.packets_out() == 0 {
            self.retransmit_timer.cancel();
        }
        self.note_mode(now);
        // tcp_data_snd_check: push what is queued, then tcp_check_space; a writer it wakes
        // checks for an application-limited gap first (tcp_sendmsg_locked), then writes and
        // pushes again.
        self.transmit(now, queue, out);
        if self.send_buffer.writer_wakes(self.in_flight(), self.tcp.snd_cwnd, TCP_REORDERING, self.tcp.snd_una, self.tcp.snd_nxt) {
            // tcp_check_space clears SOCK_NOSPACE: the send-buffer chrono stops.
            if let Some(since) = self.stats.sndbuf_limited_since.take() {
                self.stats.sndbuf_limited_ns += (now - since).as_nanos();
            }
            if self.send_buffer.write_seq() == self.tcp.snd_nxt {
                self.check_app_limited();
            }
            self.send_buffer.write(self.tcp.snd_una, self.tcp.snd_nxt);
            self.transmit(now, queue, out);
        }
    }

    /// `tcp_sacktag_one` for a newly SACKed segment.
    fn sack_one(&mut self, now: SimTime, seq: u64, min_rtt: Option<SimDuration>, rs: &mut SampleBuilder, first_sackt: &mut Option<SimTime>, last_sackt: &mut Option<SimTime>) {
        let idx = (seq - self.tcp.snd_una) as usize;
        let seg = &mut self.segments[idx];
        debug_assert!(seg.flags & SACKED == 0);
        let retransmitted = seg.flags & EVER_RETRANS != 0;
        self.rack.advance(now, seg.xmit_time, seq, retransmitted, min_rtt);
        if seg.flags & RETRANS_IN_FLIGHT != 0 {
            // Only a retransmission of a lost segment is known to be what arrived.
            if seg.flags & LOST != 0 {
                seg.flags &= !(LOST | RETRANS_IN_FLIGHT);
                self.lost_out -= 1;
                self.retrans_out -= 1;
            }
        } else {
            if !retransmitted {
                first_sackt.get_or_insert(seg.xmit_time);
                *last_sackt = Some(seg.xmit_time);
            }
            if seg.flags & LOST != 0 {
                seg.flags &= !LOST;
                self.lost_out -= 1;
            }
        }
        seg.flags |= SACKED;
        self.sacked_out += 1;
        self.tcp.delivered += 1;
        let xmit_time = seg.xmit_time;
        let mut tx = seg.tx;
        self.rate.on_delivered(&mut tx, xmit_time, seq, retransmitted, true, rs);
        self.segments[idx].tx = tx;
    }
}
