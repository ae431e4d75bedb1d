//! STARTUP and DRAIN. STARTUP ends when the bandwidth stops growing by 25%
//! for 3 rounds, or (new in v2) when a recovery round saw at least
//! `full_loss_cnt` loss events and loss above 2%, or two rounds of CE above
//! 50%; the latter two set inflight_hi to the estimated BDP. DRAIN paces at
//! 1/2.89 until inflight is down to the BDP (v3 `bbr_check_full_bw_reached`,
//! `bbr_check_loss_too_high_in_startup`, `bbr_handle_queue_too_high_in_startup`,
//! `bbr_check_drain`; v2alpha's `bbr_check_full_bw_reached` is BBRv1's).

use super::{Bbr3, Mode, Version};
use crate::bbr::{BBR_SCALE, BBR_UNIT};
use crate::{CaState, RateSample, TcpState};

impl Bbr3 {
    /// `bbr_check_full_bw_reached`. v3 checks every non-app-limited sample
    /// against the full_bw of its round and keeps running after STARTUP
    /// (PROBE_UP uses `full_bw_now`); v2alpha checks the max filter once a round.
    pub(super) fn check_full_bw_reached(&mut self, rs: &RateSample, sample_bw: u64) {
        let p = self.p;
        match p.version {
            Version::V3 => {
                if self.full_bw_now || rs.is_app_limited {
                    return;
                }
                let bw_thresh = (self.full_bw * p.full_bw_thresh as u64) >> BBR_SCALE;
                if sample_bw >= bw_thresh {
                    self.reset_full_bw();
                    self.full_bw = sample_bw;
                    return;
                }
                if !self.round_start {
                    return;
                }
                self.full_bw_cnt += 1;
                self.full_bw_now = self.full_bw_cnt >= p.full_bw_cnt;
                self.full_bw_reached |= self.full_bw_now;
            }
            Version::V2Alpha => {
                if self.full_bw_reached || !self.round_start || rs.is_app_limited {
                    return;
                }
                let bw_thresh = (self.full_bw * p.full_bw_thresh as u64) >> BBR_SCALE;
                if self.max_bw() >= bw_thresh {
                    self.full_bw = self.max_bw();
                    self.full_bw_cnt = 0;
                    return;
                }
                self.full_bw_cnt += 1;
                self.full_bw_reached = self.full_bw_cnt >= p.full_bw_cnt;
            }
        }
    }

    /// `bbr_handle_queue_too_high_in_startup`: the pipe is full and inflight_hi
    /// is the BDP (v3: or what the latest round delivered, if more).
    pub(super) fn handle_queue_too_high_in_startup(&mut self, tcp: &TcpState) {
        self.full_bw_reached = true;
        let bdp = self.inflight(tcp, self.max_bw(), BBR_UNIT);
        self.inflight_hi = match self.p.version {
            Version::V3 => bdp.max(self.inflight_latest),
            Version::V2Alpha => bdp,
        };
    }

    /// `bbr_check_loss_too_high_in_startup`: at the end of each round of
    /// recovery in STARTUP, exit if the round had many loss events and loss
    /// above the threshold.
    pub(super) fn check_loss_too_high_in_startup(&mut self, tcp: &TcpState, rs: &RateSample) {
        if self.full_bw_reached {
            return;
        }
        if rs.losses > 0 && self.loss_events_in_round < 0xf {
            self.loss_events_in_round += 1;
        }
        if self.p.full_loss_cnt > 0
            && self.loss_round_start
            && tcp.ca_state == CaState::Recovery
            && self.loss_events_in_round >= self.p.full_loss_cnt
            && self.is_inflight_too_high(rs)
        {
            self.handle_queue_too_high_in_startup(tcp);
            return;
        }
        if self.loss_round_start {
            self.loss_events_in_round = 0;
        }
    }

    /// `bbr_check_drain`: enter DRAIN once the pipe is full, PROBE_BW once
    /// the queue it built is gone.
    pub(super) fn check_drain(&mut self, tcp: &mut TcpState) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            // Exported for monitoring only: ssthresh no longer infinite.
            tcp.snd_ssthresh = self.inflight(tcp, self.max_bw(), BBR_UNIT);
            self.reset_congestion_signals();
        }
        if self.mode == Mode::Drain && self.packets_in_net_at_edt(tcp, tcp.packets_in_flight) <= self.inflight(tcp, self.max_bw(), BBR_UNIT) {
            self.mode = Mode::ProbeBw;
            self.start_bw_probe_down(tcp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness};
    use super::super::Params;
    use super::*;

    #[test]
    fn startup_exits_after_a_recovery_round_with_six_loss_events_above_two_percent() {
        let mut h = Harness::new(Params::V3);
        h.round(1, 10); // a valid first round, bw grows
        h.tcp.ca_state = CaState::Recovery;
        // Five ACKs each reporting a loss: not yet (v3 needs 6 events).
        for _ in 0..5 {
            h.ack(Ack { losses: 1, lost: 5, tx_in_flight: 100, prior_delivered: Some(0), ..Ack::one_packet(100) });
        }
        assert_eq!(h.bbr.mode_name(), "startup");
        // The sixth, at the end of the loss round: 5 of 100 lost > 2%.
        let end = h.bbr.loss_round_delivered;
        h.ack(Ack { losses: 1, lost: 5, tx_in_flight: 100, prior_delivered: Some(end), ..Ack::one_packet(100) });
        assert!(h.bbr.full_bw_reached);
        assert_ne!(h.bbr.mode_name(), "startup");
        assert!(h.bbr.inflight_hi().is_some(), "inflight_hi is set to the BDP");
    }

    #[test]
    fn v2_startup_tolerates_up_to_eight_loss_events_a_round() {
        let mut h = Harness::new(Params::V2ALPHA);
        h.round(1, 10);
        h.tcp.ca_state = CaState::Recovery;
        for _ in 0..5 {
            h.ack(Ack { losses: 1, lost: 5, tx_in_flight: 100, prior_delivered: Some(0), ..Ack::one_packet(100) });
        }
        let end = h.bbr.loss_round_delivered;
        h.ack(Ack { losses: 1, lost: 5, tx_in_flight: 100, prior_delivered: Some(end), ..Ack::one_packet(100) });
        assert_eq!(h.bbr.mode_name(), "startup");
    }

    #[test]
    fn a_bandwidth_plateau_of_three_rounds_ends_startup() {
        let mut h = Harness::new(Params::V3);
        for _ in 0..3 {
            h.round(10, 100);
        }
        assert_eq!(h.bbr.mode_name(), "startup");
        h.round(10, 100);
        assert!(h.bbr.full_bw_reached);
        assert_ne!(h.bbr.mode_name(), "startup");
    }
}
