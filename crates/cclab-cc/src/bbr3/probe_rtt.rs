//! PROBE_RTT: when no RTT sample has been at or below the min over 5 s
//! (`bbr_probe_rtt_win_ms`), hold cwnd at half the BDP for 200 ms and a
//! round, then return to PROBE_BW (cruising, with a fresh probe wait) or
//! STARTUP. The min_rtt estimate itself keeps a 10 s window (v3
//! `bbr_update_min_rtt`, `bbr_check_probe_rtt_done`, `bbr_exit_probe_rtt`).

use super::{AckPhase, Bbr3, Mode, Version};
use crate::{RateSample, TcpState};

impl Bbr3 {
    /// `bbr_update_min_rtt`.
    pub(super) fn update_min_rtt(&mut self, tcp: &mut TcpState, rs: &RateSample) {
        let now = self.jiffies(tcp.now);
        let probe_rtt_expired = now > self.probe_rtt_min_stamp + self.msecs_to_jiffies(self.p.probe_rtt_win_ms);
        if let Some(rtt) = rs.rtt {
            let rtt_us = rtt.as_micros();
            // v2alpha also refreshes the stamp on an equal sample.
            let lower = match self.p.version {
                Version::V3 => rtt_us < self.probe_rtt_min_us,
                Version::V2Alpha => rtt_us <= self.probe_rtt_min_us,
            };
            if lower || (probe_rtt_expired && !rs.is_ack_delayed) {
                self.probe_rtt_min_us = rtt_us;
                self.probe_rtt_min_stamp = now;
            }
        }
        let min_rtt_expired = now > self.min_rtt_stamp + self.p.min_rtt_win_sec * self.config.hz as u64;
        if self.probe_rtt_min_us <= self.min_rtt_us || min_rtt_expired {
            self.min_rtt_us = self.probe_rtt_min_us;
            self.min_rtt_stamp = self.probe_rtt_min_stamp;
        }
        if self.p.probe_rtt_mode_ms > 0 && probe_rtt_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt; // dip, drain the queue
            self.save_cwnd(tcp);
            self.probe_rtt_done_stamp = None;
            self.ack_phase = AckPhase::ProbeStopping;
            self.next_rtt_delivered = tcp.delivered;
        }
        if self.mode == Mode::ProbeRtt {
            // Ignore low-rate samples while in flight is held down.
            tcp.app_limited = (tcp.delivered + tcp.packets_in_flight as u64).max(1);
            if self.probe_rtt_done_stamp.is_none() && tcp.packets_in_flight <= self.probe_rtt_cwnd() {
                self.probe_rtt_done_stamp = Some(now + self.msecs_to_jiffies(self.p.probe_rtt_mode_ms));
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = tcp.delivered;
            } else if self.probe_rtt_done_stamp.is_some() {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(tcp);
                }
            }
        }
        // An idle restart ends once an ACK delivers new data.
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// `bbr_check_probe_rtt_done`.
    pub(super) fn check_probe_rtt_done(&mut self, tcp: &mut TcpState) {
        let now = self.jiffies(tcp.now);
        if self.probe_rtt_done_stamp.is_none_or(|done| now <= done) {
            return;
        }
        self.probe_rtt_min_stamp = now; // schedule the next PROBE_RTT
        tcp.snd_cwnd = tcp.snd_cwnd.max(self.prior_cwnd);
        self.exit_probe_rtt(tcp);
    }

    /// `bbr_exit_probe_rtt`: back to bandwidth probing, cruising first.
    fn exit_probe_rtt(&mut self, tcp: &TcpState) {
        self.reset_lower_bounds();
        if self.full_bw_reached {
            self.mode = Mode::ProbeBw;
            // Raising inflight after PROBE_RTT may cause loss: schedule the
            // next probe at a randomized time, and cruise (inflight is low).
            self.start_bw_probe_down(tcp);
            self.start_bw_probe_cruise();
        } else {
            self.mode = Mode::Startup;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness};
    use super::super::Params;

    #[test]
    fn five_seconds_without_a_lower_rtt_enter_probe_rtt_at_half_the_bdp_for_200_ms() {
        let mut h = Harness::cruising(Params::V3);
        h.tcp.snd_cwnd = 250;
        // RTT samples above the min for 5 s (ACKs 10 ms apart, 101 ms RTT).
        let mut entered = None;
        for i in 0..600 {
            h.ack(Ack { advance_us: 10_000, rtt_us: Some(101_000), in_flight: 200, ..Ack::one_packet(200) });
            if h.bbr.mode_name() == "probe_rtt" {
                entered = Some(i);
                break;
            }
        }
        let i = entered.expect("PROBE_RTT within 6 s");
        assert!((499..=502).contains(&i), "after ~5 s, at ACK {i}");
        assert_eq!(h.tcp.snd_cwnd, h.bbr.probe_rtt_cwnd(), "cwnd at 0.5 x BDP");
        assert!((50..=51).contains(&h.tcp.snd_cwnd));
        // Flight drained to 50: 200 ms and one round later, back to PROBE_BW.
        let mut exited = false;
        for _ in 0..40 {
            let round_end = h.bbr.next_rtt_delivered;
            h.ack(Ack { advance_us: 10_000, in_flight: 40, prior_delivered: Some(round_end), ..Ack::one_packet(50) });
            if h.bbr.mode_name() != "probe_rtt" {
                exited = true;
                break;
            }
        }
        assert!(exited);
        assert_eq!(h.bbr.mode_name(), "probe_bw_cruise");
        assert!(h.tcp.snd_cwnd > 51, "cwnd restored");
    }
}
