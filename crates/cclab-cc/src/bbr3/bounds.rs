//! The model's bounds on inflight and rate (v3 `bbr_is_inflight_too_high`,
//! `bbr_handle_inflight_too_high`, `bbr_adapt_upper_bounds`,
//! `bbr_probe_inflight_hi_upward`, `bbr_raise_inflight_hi_slope`,
//! `bbr_inflight_with_headroom`, `bbr_bound_cwnd_for_inflight_model`,
//! `bbr_adapt_lower_bounds`, `bbr_init/reset_lower_bounds`).
//!
//! inflight_hi is the long-term upper bound: set when a bandwidth probe saw
//! loss above 2% (or CE above 50%) to max(tx_in_flight, 0.7 x target), and
//! raised again, one packet per `bw_probe_up_cnt` ACKed, doubling each round
//! of PROBE_UP that sees neither. inflight_lo / bw_lo are the short-term
//! lower bounds: cut to 0.7x (loss) or by alpha/3 (ECN) once per round while
//! not probing, never below what the latest round delivered.

use super::{Bbr3, Mode, Phase, Version, UNSET, UNSET_BW};
use crate::bbr::{BBR_SCALE, BBR_UNIT};
use crate::{RateSample, TcpState};

impl Bbr3 {
    /// `bbr_is_probing_bandwidth`: STARTUP, REFILL or UP.
    pub(super) fn is_probing_bandwidth(&self) -> bool {
        self.mode == Mode::Startup || (self.mode == Mode::ProbeBw && matches!(self.cycle_idx, Phase::Refill | Phase::Up))
    }

    /// `bbr_is_inflight_too_high`: loss above `loss_thresh` of the flight
    /// the sampled packet was sent into, or CE above `ecn_thresh` of delivered.
    pub(super) fn is_inflight_too_high(&self, rs: &RateSample) -> bool {
        if rs.lost > 0 && rs.tx_in_flight > 0 {
            let loss_thresh = (rs.tx_in_flight as u64 * self.p.loss_thresh as u64) >> BBR_SCALE;
            if rs.lost > loss_thresh {
                return true;
            }
        }
        if rs.delivered_ce > 0 && rs.delivered > 0 && self.ecn_eligible && self.p.ecn_thresh > 0 {
            let ecn_thresh = (rs.delivered * self.p.ecn_thresh as u64) >> BBR_SCALE;
            // v2alpha counts a ratio equal to the threshold as too high.
            let too_high = match self.p.version {
                Version::V3 => rs.delivered_ce > ecn_thresh,
                Version::V2Alpha => rs.delivered_ce >= ecn_thresh,
            };
            if too_high {
                return true;
            }
        }
        false
    }

    /// `bbr_handle_inflight_too_high`: once per probe, cut inflight_hi to
    /// max(tx_in_flight, (1 - beta) x target) and stop probing up.
    pub(super) fn handle_inflight_too_high(&mut self, tcp: &TcpState, rs: &RateSample) {
        self.prev_probe_too_high = true;
        self.bw_probe_samples = false; // react once per probe
        // An app-limited flight did not robustly probe how much fits.
        if !rs.is_app_limited {
            let cut = ((self.target_inflight(tcp) as u64 * (BBR_UNIT - self.p.beta) as u64) >> BBR_SCALE) as u32;
            self.inflight_hi = rs.tx_in_flight.max(cut);
            if self.p.ecn_cuts_bw && self.ecn_eligible && !self.got_ok_bw_probe_sample {
                // v2alpha bbr2_handle_inflight_too_high_via_ecn
                if self.bw_hi_v2 == UNSET_BW {
                    self.bw_hi_v2 = self.max_bw();
                }
                self.bw_hi_v2 = (self.bw_hi_v2 * self.ecn_cut() as u64) >> BBR_SCALE;
            }
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
            self.start_bw_probe_down(tcp);
        }
    }

    /// `bbr_adapt_upper_bounds`: track which ACKs reflect probing; cut
    /// inflight_hi on high loss/ECN, raise it when a higher level proved safe.
    /// Returns true if it decided a state transition.
    pub(super) fn adapt_upper_bounds(&mut self, tcp: &mut TcpState, rs: &RateSample, sample_bw: u64) -> bool {
        use super::probe_bw::AckPhase;
        if self.ack_phase == AckPhase::ProbeStarting && self.round_start {
            self.ack_phase = AckPhase::ProbeFeedback;
        }
        if self.ack_phase == AckPhase::ProbeStopping && self.round_start {
            // The last samples of the probe have arrived.
            self.bw_probe_samples = false;
            self.ack_phase = AckPhase::Init;
            // Best time to forget the previous cycle's bw: advance the window.
            if self.mode == Mode::ProbeBw && !rs.is_app_limited && self.max_bw[1] != 0 {
                self.max_bw = [self.max_bw[1], 0];
            }
            // Reached the old inflight_hi without high loss/ECN: probe again.
            if self.mode == Mode::ProbeBw && self.stopped_risky_probe && !self.prev_probe_too_high {
                self.start_bw_probe_refill(tcp, 0);
                return true;
            }
        }
        if self.is_inflight_too_high(rs) {
            if self.bw_probe_samples {
                self.handle_inflight_too_high(tcp, rs);
            }
            return false;
        }
        self.got_ok_bw_probe_sample |= self.bw_probe_samples;
        let no_bound = match self.p.version {
            Version::V3 => self.inflight_hi == UNSET,
            Version::V2Alpha => self.inflight_hi == UNSET && self.bw_hi_v2 == UNSET_BW,
        };
        if no_bound {
            return false; // no excess-queue signal yet
        }
        // Resilience to random loss: raise the bound whenever a higher level was safe.
        if rs.tx_in_flight > self.inflight_hi {
            self.inflight_hi = rs.tx_in_flight;
        }
        if self.p.version == Version::V2Alpha && sample_bw > self.bw_hi_v2 {
            self.bw_hi_v2 = sample_bw;
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
            self.probe_inflight_hi_upward(tcp, rs);
        }
        false
    }

    /// `bbr_raise_inflight_hi_slope`: each round of PROBE_UP doubles growth.
    pub(super) fn raise_inflight_hi_slope(&mut self, tcp: &TcpState) {
        let growth_this_round = 1u32 << self.bw_probe_up_rounds;
        self.bw_probe_up_rounds = (self.bw_probe_up_rounds + 1).min(30);
        self.bw_probe_up_cnt = (tcp.snd_cwnd / growth_this_round).max(1);
    }

    /// `bbr_probe_inflight_hi_upward`: +1 per `bw_probe_up_cnt` packets ACKed
    /// while cwnd-limited at inflight_hi.
    fn probe_inflight_hi_upward(&mut self, tcp: &TcpState, rs: &RateSample) {
        // `tp->is_cwnd_limited`, not `tcp_is_cwnd_limited()`: once STARTUP set ssthresh, a
        // pacing-limited flow below it would count as cwnd-limited by slow start's clause.
        if !tcp.is_cwnd_limited_raw || tcp.snd_cwnd < self.inflight_hi {
            if self.p.version == Version::V2Alpha {
                self.bw_probe_up_acks = 0; // no unused credit
            }
            return;
        }
        self.bw_probe_up_acks += rs.acked_sacked;
        if self.bw_probe_up_acks >= self.bw_probe_up_cnt {
            let delta = self.bw_probe_up_acks / self.bw_probe_up_cnt;
            self.bw_probe_up_acks -= delta * self.bw_probe_up_cnt;
            self.inflight_hi += delta;
            self.try_fast_path = false;
        }
        if self.round_start {
            self.raise_inflight_hi_slope(tcp);
        }
    }

    /// `bbr_inflight_with_headroom`: inflight_hi less 15% (at least 1 packet).
    pub(super) fn inflight_with_headroom(&self) -> u32 {
        if self.inflight_hi == UNSET {
            return UNSET;
        }
        let headroom = ((self.inflight_hi as u64 * self.p.inflight_headroom as u64) >> BBR_SCALE).max(1) as u32;
        self.inflight_hi.saturating_sub(headroom).max(self.p.cwnd_min_target)
    }

    /// `bbr_bound_cwnd_for_inflight_model`: probing phases may reach
    /// inflight_hi; CRUISE and PROBE_RTT leave headroom below it; all respect
    /// inflight_lo.
    pub(super) fn bound_cwnd_for_inflight_model(&self, tcp: &mut TcpState) {
        let mut cap = UNSET;
        if self.mode == Mode::ProbeBw && self.cycle_idx != Phase::Cruise {
            cap = self.inflight_hi;
        } else if self.mode == Mode::ProbeRtt || (self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Cruise) {
            cap = self.inflight_with_headroom();
        }
        cap = cap.min(self.inflight_lo).max(self.p.cwnd_min_target);
        tcp.snd_cwnd = tcp.snd_cwnd.min(cap);
    }

    /// `bbr_adapt_lower_bounds`: once per round, outside probing, cut the
    /// short-term bounds for the loss or ECN the round saw.
    pub(super) fn adapt_lower_bounds(&mut self, tcp: &TcpState) {
        if self.is_probing_bandwidth() {
            return;
        }
        let mut ecn_inflight_lo = UNSET;
        let mut ecn_bw_lo = UNSET_BW;
        if self.ecn_in_round && self.p.ecn_factor > 0 && (self.ecn_eligible || self.p.is_v3()) {
            let cut = self.ecn_cut() as u64;
            self.init_lower_bounds(tcp, self.p.ecn_cuts_bw);
            ecn_inflight_lo = ((self.inflight_lo as u64 * cut) >> BBR_SCALE) as u32;
            if self.p.ecn_cuts_bw {
                ecn_bw_lo = (self.bw_lo * cut) >> BBR_SCALE;
            }
        }
        if self.loss_in_round {
            self.init_lower_bounds(tcp, true);
            let loss_cut = (BBR_UNIT - self.p.beta) as u64;
            self.bw_lo = self.bw_latest.max((self.bw_lo * loss_cut) >> BBR_SCALE);
            self.inflight_lo = self.inflight_latest.max(((self.inflight_lo as u64 * loss_cut) >> BBR_SCALE) as u32);
        }
        self.inflight_lo = self.inflight_lo.min(ecn_inflight_lo);
        match self.p.version {
            Version::V3 => self.bw_lo = self.bw_lo.max(1),
            Version::V2Alpha => self.bw_lo = self.bw_lo.min(ecn_bw_lo),
        }
    }

    /// `bbr_init_lower_bounds`: start the bounds at the current estimate and cwnd.
    fn init_lower_bounds(&mut self, tcp: &TcpState, init_bw: bool) {
        if init_bw && self.bw_lo == UNSET_BW {
            self.bw_lo = self.max_bw();
        }
        if self.inflight_lo == UNSET {
            self.inflight_lo = tcp.snd_cwnd;
        }
    }

    /// `bbr_reset_lower_bounds`.
    pub(super) fn reset_lower_bounds(&mut self) {
        self.bw_lo = UNSET_BW;
        self.inflight_lo = UNSET;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness};
    use super::super::Params;
    use super::*;

    #[test]
    fn a_loss_round_while_cruising_cuts_the_lower_bounds_to_seven_tenths() {
        let mut h = Harness::cruising(Params::V3);
        h.tcp.snd_cwnd = 200;
        h.bbr.loss_in_round = true;
        h.bbr.inflight_latest = 50;
        h.bbr.bw_latest = 100;
        h.bbr.adapt_lower_bounds(&h.tcp);
        assert_eq!(h.bbr.inflight_lo, 200 * 180 / 256);
        assert_eq!(h.bbr.bw_lo, ((16_777u64 * 180) >> 8));
        // Never below what the latest round delivered.
        h.bbr.inflight_latest = 139;
        h.bbr.adapt_lower_bounds(&h.tcp);
        assert_eq!(h.bbr.inflight_lo, 139);
    }

    #[test]
    fn an_ecn_round_cuts_inflight_lo_by_alpha_over_three_and_only_v2_cuts_bw_lo() {
        for (p, cuts_bw) in [(Params::V3, false), (Params::V2ALPHA, true)] {
            let mut h = Harness::cruising(p);
            h.tcp.snd_cwnd = 200;
            h.bbr.ecn_eligible = true;
            h.bbr.ecn_in_round = true;
            h.bbr.ecn_alpha = 128; // half the packets marked, lately
            h.bbr.adapt_lower_bounds(&h.tcp);
            // cut = 1 - 128/256 x 85/256 = 214/256 (85 = 256/3).
            assert_eq!(h.bbr.inflight_lo, 200 * 214 / 256);
            assert_eq!(h.bbr.bw_lo != UNSET_BW, cuts_bw, "{:?}", p.version);
        }
    }

    #[test]
    fn lower_bounds_are_left_alone_while_probing() {
        let mut h = Harness::cruising(Params::V3);
        h.bbr.cycle_idx = Phase::Refill;
        h.bbr.loss_in_round = true;
        h.bbr.adapt_lower_bounds(&h.tcp);
        assert_eq!(h.bbr.inflight_lo, UNSET);
    }

    /// PROBE_UP with cwnd at inflight_hi (100 packets), inside a round, `tp->is_cwnd_limited`
    /// as given.
    fn probing_up_at_inflight_hi(cwnd_limited: bool) -> Harness {
        let mut h = Harness::cruising(Params::V3);
        h.bbr.inflight_hi = 100;
        h.start_probe_up();
        h.tcp.snd_cwnd = 100;
        h.tcp.is_cwnd_limited_raw = cwnd_limited;
        h
    }

    #[test]
    fn inflight_hi_rises_on_probe_up_acks_without_loss_doubling_each_round() {
        let mut h = probing_up_at_inflight_hi(true);
        // First round: one more packet per cwnd (at entry) ACKed.
        let cnt = h.bbr.bw_probe_up_cnt;
        assert_eq!(h.bbr.bw_probe_up_rounds, 1);
        let before = h.bbr.inflight_hi;
        h.bbr.round_start = false;
        for _ in 0..cnt {
            let rs = Ack::one_packet(100).rate_sample(&h.tcp);
            h.bbr.adapt_upper_bounds(&mut h.tcp, &rs, 0);
        }
        assert_eq!(h.bbr.inflight_hi, before + 1);
        // A new round doubles the growth: cwnd / 2 per increment.
        h.tcp.snd_cwnd = 102;
        h.bbr.round_start = true;
        let rs = Ack::one_packet(100).rate_sample(&h.tcp);
        h.bbr.adapt_upper_bounds(&mut h.tcp, &rs, 0);
        assert_eq!(h.bbr.bw_probe_up_cnt, 51);
    }

    #[test]
    fn inflight_hi_holds_while_the_flow_is_paced_below_ssthresh_not_cwnd_limited() {
        // tcp_is_cwnd_limited() is true below ssthresh (slow start's clause); BBR reads
        // tp->is_cwnd_limited, false for a flow the pacing rate holds back.
        let mut h = probing_up_at_inflight_hi(false);
        h.tcp.snd_ssthresh = 150;
        h.tcp.is_cwnd_limited = true;
        h.bbr.round_start = false;
        for _ in 0..4 * h.bbr.bw_probe_up_cnt {
            let rs = Ack::one_packet(100).rate_sample(&h.tcp);
            h.bbr.adapt_upper_bounds(&mut h.tcp, &rs, 0);
        }
        assert_eq!(h.bbr.inflight_hi, 100);
    }

    #[test]
    fn cruise_leaves_fifteen_percent_headroom_below_inflight_hi() {
        let mut h = Harness::cruising(Params::V3);
        h.bbr.inflight_hi = 200;
        h.tcp.snd_cwnd = 500;
        h.bbr.bound_cwnd_for_inflight_model(&mut h.tcp);
        // headroom = 200 x 38 / 256 = 29.
        assert_eq!(h.tcp.snd_cwnd, 171);
        h.bbr.cycle_idx = Phase::Up;
        h.tcp.snd_cwnd = 500;
        h.bbr.bound_cwnd_for_inflight_model(&mut h.tcp);
        assert_eq!(h.tcp.snd_cwnd, 200);
    }
}
