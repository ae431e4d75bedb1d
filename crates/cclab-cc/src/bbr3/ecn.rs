//! The ECN signal: alpha, an EWMA (gain 1/16) of the fraction of delivered
//! packets that came back with ECE, updated once per round; it sets how far
//! ECN cuts inflight_lo (by alpha x 1/3) and, with two rounds of CE above
//! 50%, ends STARTUP (v3 `bbr_update_ecn_alpha`, `bbr_ecn_cut`,
//! `bbr_check_ecn_too_high_in_startup`, `bbr_can_use_ecn`).
//!
//! Eligibility follows the kernel: v3 uses ECN only with ECN negotiated and
//! a shallow-threshold (`ecn_low`) route, v2alpha only with `ecn_enable`;
//! both only on paths whose min_rtt is at most 5 ms (`bbr_ecn_max_rtt_us`).

use super::{Bbr3, Version};
use crate::bbr::{BBR_SCALE, BBR_UNIT};
use crate::TcpState;

impl Bbr3 {
    /// `bbr_can_use_ecn` (v3) / `bbr_ecn_enable` (v2alpha).
    fn can_use_ecn(&self, tcp: &TcpState) -> bool {
        match self.p.version {
            Version::V3 => tcp.ecn_ok && self.config.ecn_low,
            Version::V2Alpha => self.config.ecn_low,
        }
    }

    /// `bbr_update_ecn_alpha`, at the start of each round. Returns the round's
    /// CE ratio in BBR_UNIT, if there was one.
    pub(super) fn update_ecn_alpha(&mut self, tcp: &TcpState) -> Option<u32> {
        let p = self.p;
        let low_rtt = self.min_rtt_us <= p.ecn_max_rtt_us || p.ecn_max_rtt_us == 0;
        if p.version == Version::V2Alpha && p.ecn_factor == 0 {
            return None;
        }
        if p.version == Version::V3 {
            if !self.ecn_eligible && self.can_use_ecn(tcp) && p.ecn_factor > 0 && low_rtt {
                self.ecn_eligible = true;
            }
            // (The kernel also updates alpha for PLB, which the simulator lacks.)
            if !self.ecn_eligible {
                return None;
            }
        }
        let delivered = tcp.delivered - self.alpha_last_delivered;
        let delivered_ce = tcp.delivered_ce - self.alpha_last_delivered_ce;
        if delivered == 0 {
            return None;
        }
        if p.version == Version::V2Alpha && !self.ecn_eligible && self.can_use_ecn(tcp) && low_rtt {
            self.ecn_eligible = true;
        }
        let ce_ratio = ((delivered_ce << BBR_SCALE) / delivered) as u32;
        let gain = p.ecn_alpha_gain;
        // alpha = (1 - g) x alpha + g x ce_ratio
        let alpha = (((BBR_UNIT - gain) * self.ecn_alpha) >> BBR_SCALE) + ((gain * ce_ratio) >> BBR_SCALE);
        self.ecn_alpha = alpha.min(BBR_UNIT);
        self.alpha_last_delivered = tcp.delivered;
        self.alpha_last_delivered_ce = tcp.delivered_ce;
        self.check_ecn_too_high_in_startup(tcp, ce_ratio);
        Some(ce_ratio)
    }

    /// `bbr_ecn_cut`: 1 - alpha x ecn_factor.
    pub(super) fn ecn_cut(&self) -> u32 {
        BBR_UNIT - ((self.ecn_alpha * self.p.ecn_factor) >> BBR_SCALE)
    }

    /// `bbr_check_ecn_too_high_in_startup`: `full_ecn_cnt` consecutive rounds
    /// with a CE ratio at or above `ecn_thresh` end STARTUP.
    fn check_ecn_too_high_in_startup(&mut self, tcp: &TcpState, ce_ratio: u32) {
        if self.full_bw_reached || !self.ecn_eligible || self.p.full_ecn_cnt == 0 || self.p.ecn_thresh == 0 {
            return;
        }
        if ce_ratio >= self.p.ecn_thresh {
            self.startup_ecn_rounds += 1;
        } else {
            self.startup_ecn_rounds = 0;
        }
        if self.startup_ecn_rounds >= self.p.full_ecn_cnt {
            self.handle_queue_too_high_in_startup(tcp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Harness;
    use super::super::{Bbr3, Bbr3Config, Params};
    use crate::CongestionControl;

    fn ecn_harness() -> Harness {
        let mut h = Harness::with(Bbr3::new(Params::V3, Bbr3Config { ecn_low: true, ..Bbr3Config::default() }, 1), 2_000);
        h.tcp.ecn_ok = true;
        h.bbr.init(&mut h.tcp);
        h
    }

    #[test]
    fn alpha_moves_a_sixteenth_of_the_way_to_the_rounds_ce_ratio() {
        let mut h = ecn_harness();
        assert_eq!(h.bbr.ecn_alpha, 256, "alpha starts at 1.0");
        // A round of 100 delivered, none marked: alpha = 240/256 x 256 = 240.
        h.tcp.delivered += 100;
        assert_eq!(h.bbr.update_ecn_alpha(&h.tcp), Some(0));
        assert!(h.bbr.ecn_eligible);
        assert_eq!(h.bbr.ecn_alpha, 240);
        // Half marked: 240 x 240 / 256 + 16 x 128 / 256 = 225 + 8 = 233.
        h.tcp.delivered += 100;
        h.tcp.delivered_ce += 50;
        assert_eq!(h.bbr.update_ecn_alpha(&h.tcp), Some(128));
        assert_eq!(h.bbr.ecn_alpha, 233);
        // ECN then cuts inflight_lo to 1 - 233/256 x 1/3.
        assert_eq!(h.bbr.ecn_cut(), 256 - 233 * 85 / 256);
    }

    #[test]
    fn two_rounds_of_half_the_packets_marked_end_startup() {
        let mut h = ecn_harness();
        for _ in 0..2 {
            h.tcp.delivered += 100;
            h.tcp.delivered_ce += 50;
            h.bbr.update_ecn_alpha(&h.tcp);
        }
        assert!(h.bbr.full_bw_reached);
        assert!(h.bbr.inflight_hi().is_some());
    }

    #[test]
    fn ecn_is_ignored_on_paths_longer_than_5_ms_or_without_an_ecn_low_route() {
        let mut h = ecn_harness();
        h.bbr.min_rtt_us = 5_001;
        h.tcp.delivered += 100;
        assert_eq!(h.bbr.update_ecn_alpha(&h.tcp), None);
        let mut h = Harness::new(Params::V3);
        h.tcp.ecn_ok = true;
        h.bbr.min_rtt_us = 1_000;
        h.tcp.delivered += 100;
        assert_eq!(h.bbr.update_ecn_alpha(&h.tcp), None);
    }
}
