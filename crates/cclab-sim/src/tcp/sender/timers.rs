//! The one retransmission timer (Linux `icsk_retransmit_timer`): RTO (RFC 6298),
//! tail-loss probe and RACK reorder timeout (RFC 8985).

use super::{FlowEvent, TcpSender, Transmission, XmitTimer, RETRANS_IN_FLIGHT, SACKED, TCP_TIMEOUT_MIN};
use crate::event::{EventQueue, TimerKind};
use crate::tcp::rtt::{TCP_RTO_MIN, TCP_TIMEOUT_INIT};
use cclab_cc::{CaState, CongestionControl, CwndEvent, SimDuration, SimTime};

impl TcpSender {

    pub(super) fn arm_xmit_timer(&mut self, kind: XmitTimer, at: SimTime, queue: &mut EventQueue) {
        self.xmit_timer_kind = kind;
        let ev = self.timer_event(TimerKind::Retransmit);
        self.retransmit_timer.arm(at, queue, ev);
    }

    /// `tcp_rearm_rto`.
    pub(super) fn rearm_rto(&mut self, now: SimTime, queue: &mut EventQueue) {
        if self.packets_out() == 0 {
            self.retransmit_timer.cancel();
            return;
        }
        let rto = self.rto_backed_off();
        let at = if self.retransmit_timer.is_armed() && matches!(self.xmit_timer_kind, XmitTimer::ReoTimeout | XmitTimer::LossProbe) {
            // Count the RTO from the oldest outstanding transmission.
            (self.segments[0].xmit_time + rto).max(now + SimDuration(1))
        } else {
            now + rto
        };
        self.arm_xmit_timer(XmitTimer::Rto, at, queue);
    }

    /// `tcp_schedule_loss_probe`: a tail-loss probe 2 x srtt after the last send.
    pub(super) fn schedule_loss_probe(&mut self, now: SimTime, advancing_rto: bool, queue: &mut EventQueue) -> bool {
        if self.packets_out() == 0 || !matches!(self.tcp.ca_state, CaState::Open | CaState::Cwr) {
            return false;
        }
        let srtt = self.rtt.srtt();
        let mut timeout = if srtt.as_nanos() > 0 {
            // PTO = 2 srtt, plus room for a delayed ACK when only one packet is out.
            let extra = if self.packets_out() == 1 { TCP_RTO_MIN } else { TCP_TIMEOUT_MIN };
            SimDuration(2 * srtt.as_nanos()) + extra
        } else {
            TCP_TIMEOUT_INIT
        };
        let rto_delta = if advancing_rto {
            self.rto_backed_off()
        } else {
            (self.segments[0].xmit_time + self.rto_backed_off()).saturating_since(now)
        };
        if rto_delta.as_nanos() > 0 {
            timeout = timeout.min(rto_delta);
        }
        self.arm_xmit_timer(XmitTimer::LossProbe, now + timeout, queue);
        true
    }

    /// `tcp_set_xmit_timer`.
    pub(super) fn set_xmit_timer(&mut self, now: SimTime, queue: &mut EventQueue) {
        if !self.schedule_loss_probe(now, true, queue) {
            self.rearm_rto(now, queue);
        }
    }

    pub fn on_timer(&mut self, now: SimTime, kind: TimerKind, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        match kind {
            TimerKind::Retransmit => {
                let ev = self.timer_event(TimerKind::Retransmit);
                if !self.retransmit_timer.on_pop(now, queue, ev) {
                    return;
                }
                self.tcp.now = now;
                match self.xmit_timer_kind {
                    XmitTimer::Rto => self.on_rto(now, queue, out),
                    XmitTimer::LossProbe => self.on_loss_probe(now, queue, out),
                    XmitTimer::ReoTimeout => self.on_reo_timeout(now, queue, out),
                }
            }
            TimerKind::Pacing => {
                let ev = self.timer_event(TimerKind::Pacing);
                if self.pacing_timer.on_pop(now, queue, ev) {
                    self.transmit(now, queue, out);
                }
            }
            TimerKind::DelayedAck | TimerKind::CompressedAck | TimerKind::Read => unreachable!("receiver timers"),
        }
    }

    /// `tcp_retransmit_timer` + `tcp_enter_loss`.
    pub(super) fn on_rto(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        if self.packets_out() == 0 {
            return;
        }
        self.stats.rto_count += 1;
        self.events.push(FlowEvent { time: now, kind: "rto", detail: format!("backoff {}", self.rto_backoff) });
        // tcp_timeout_mark_lost: the head, and every packet RACK would time out.
        let snd_una = self.tcp.snd_una;
        for idx in 0..self.segments.len() {
            let seq = snd_una + idx as u64;
            let seg = self.segments[idx];
            if seg.flags & SACKED != 0 {
                continue;
            }
            if idx > 0 && self.rack.remaining(now, seg.xmit_time, SimDuration::ZERO) > 0 {
                continue;
            }
            self.mark_lost(seq);
        }
        let state = self.tcp.ca_state;
        if matches!(state, CaState::Open | CaState::Disorder) || self.high_seq <= snd_una || (state == CaState::Loss && self.consecutive_rtos == 0) {
            self.tcp.prior_cwnd = self.tcp.snd_cwnd;
            self.sync_state(now);
            self.tcp.snd_ssthresh = self.cc.ssthresh(&self.tcp);
            self.cc.cwnd_event(&mut self.tcp, CwndEvent::Loss);
        }
        self.tcp.snd_cwnd = self.in_flight() + 1;
        self.tcp.snd_cwnd_cnt = 0;
        self.set_ca_state(now, CaState::Loss);
        self.high_seq = self.tcp.snd_nxt;
        self.tlp_high_seq = None;
        self.queue_cwr();
        self.consecutive_rtos += 1;
        // Retransmit the head regardless of cwnd, then back off.
        if self.segment(snd_una).flags & (SACKED | RETRANS_IN_FLIGHT) == 0 {
            self.send_segment(now, snd_una, true, out, queue);
        }
        self.rto_backoff += 1;
        let at = now + self.rto_backed_off();
        self.arm_xmit_timer(XmitTimer::Rto, at, queue);
        self.note_mode(now);
        self.transmit(now, queue, out);
    }

    /// `tcp_send_loss_probe`: new data if there is any, else the last segment again.
    pub(super) fn on_loss_probe(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        if self.tlp_high_seq.is_none() && self.packets_out() > 0 {
            let probe = if self.has_new_data() {
                Some((self.tcp.snd_nxt, false))
            } else {
                let last = self.tcp.snd_nxt - 1;
                (self.segment(last).flags & (SACKED | RETRANS_IN_FLIGHT) == 0).then_some((last, true))
            };
            if let Some((seq, is_retrans)) = probe {
                self.send_segment(now, seq, is_retrans, out, queue);
                self.stats.loss_probes += 1;
                self.tlp_high_seq = Some(self.tcp.snd_nxt);
                self.retransmit_timer.cancel();
            }
        }
        self.rearm_rto(now, queue);
    }

    /// `tcp_rack_reo_timeout`.
    pub(super) fn on_reo_timeout(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        let prior_in_flight = self.in_flight();
        let wait = self.rack_detect_loss(now);
        if self.in_flight() != prior_in_flight && self.tcp.ca_state != CaState::Recovery {
            self.enter_recovery(now);
            if !self.cc_owns_cwnd {
                let in_flight = self.in_flight();
                if let Some(cwnd) = self.prr.on_ack(self.tcp.snd_ssthresh, in_flight, 1, 0, false) {
                    self.tcp.snd_cwnd = cwnd.max(1);
                }
            }
        }
        match wait {
            Some(w) => self.arm_xmit_timer(XmitTimer::ReoTimeout, now + w + TCP_TIMEOUT_MIN, queue),
            None => self.rearm_rto(now, queue),
        }
        self.transmit(now, queue, out);
    }
}
