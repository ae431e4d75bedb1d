//! STARTUP: double the sending rate each round until the bandwidth estimate
//! stops growing (Linux `bbr_reset_startup_mode`, `bbr_check_full_bw_reached`).

use super::{Bbr, Mode, BBR_SCALE, BBR_UNIT};
use crate::RateSample;

/// `bbr_high_gain` = 2/ln 2 (+1/256): the smallest pacing gain whose paced
/// slow start doubles the delivery rate every round, like Reno's.
pub(super) const HIGH_GAIN: u32 = BBR_UNIT * 2885 / 1000 + 1;
/// `bbr_full_bw_thresh`: growth of 25% or more means there may be more bandwidth.
pub(super) const FULL_BW_THRESH: u32 = BBR_UNIT * 5 / 4;
/// `bbr_full_bw_cnt`: rounds without that growth before the pipe counts as full.
pub(super) const FULL_BW_CNT: u32 = 3;

impl Bbr {
    /// `bbr_reset_startup_mode`.
    pub(super) fn reset_startup_mode(&mut self) {
        self.mode = Mode::Startup;
    }

    /// `bbr_check_full_bw_reached`: once per non-app-limited round, compare the
    /// max bandwidth with the last one that grew by 25%; three rounds without
    /// such growth mean STARTUP filled the pipe.
    pub(super) fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let bw_thresh = (self.full_bw * FULL_BW_THRESH as u64) >> BBR_SCALE;
        if self.max_bw() >= bw_thresh {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Harness, RTT_US};
    use super::super::Mode;
    use super::*;

    #[test]
    fn high_gain_is_2_over_ln2_in_256ths() {
        // 256 * 2885 / 1000 = 738 (truncated), + 1.
        assert_eq!(HIGH_GAIN, 739);
        assert!((HIGH_GAIN as f64 / 256.0 - 2.0 / std::f64::consts::LN_2).abs() < 0.01);
    }

    #[test]
    fn startup_paces_and_grows_cwnd_at_high_gain() {
        let mut h = Harness::new(1);
        assert_eq!(h.bbr.mode(), Mode::Startup);
        // Initial pacing rate: 10 packets per 100 ms srtt -> bw 10*2^24/100000 = 1677;
        // 1677 * 1000 B * 739 >> 8 = 4_840_984; * 990_000 >> 24 = 285_662 B/s.
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, 285_662);
        h.round(10, 10);
        // Not full yet: cwnd grows by the packets acked.
        assert_eq!(h.tcp.snd_cwnd, 20);
        assert_eq!(h.bbr.pacing_gain, HIGH_GAIN);
        assert_eq!(h.bbr.cwnd_gain, HIGH_GAIN);
    }

    #[test]
    fn full_pipe_is_declared_after_exactly_three_rounds_without_25_percent_growth() {
        let mut h = Harness::new(1);
        // bw per round (pkts/us << 24): 1677, 3355, 6710, 13421, 16777. Each is at
        // least 1.25x the last (13421 * 320 >> 8 = 16776 <= 16777), so the count resets.
        for pkts in [10, 20, 40, 80, 100] {
            h.round(pkts, 250);
            assert_eq!(h.bbr.full_bw_cnt, 0);
        }
        assert_eq!(h.bbr.full_bw, 16_777);
        h.round(100, 250);
        assert_eq!((h.bbr.full_bw_cnt, h.bbr.mode()), (1, Mode::Startup));
        h.round(100, 250);
        assert_eq!((h.bbr.full_bw_cnt, h.bbr.mode()), (2, Mode::Startup));
        h.round(100, 250);
        assert!(h.bbr.full_bw_reached);
        assert_eq!(h.bbr.mode(), Mode::Drain);
    }

    #[test]
    fn growth_of_less_than_25_percent_does_not_reset_the_count() {
        let mut h = Harness::new(1);
        h.round(80, 10); // full_bw = 13421
        h.round(99, 10); // 16609 < 16776
        h.round(99, 10);
        assert_eq!(h.bbr.full_bw_cnt, 2);
        assert_eq!(h.bbr.full_bw, 13_421);
    }

    #[test]
    fn app_limited_rounds_and_mid_round_acks_do_not_count_toward_a_full_pipe() {
        let mut h = Harness::new(1);
        h.round(100, 10);
        h.round_app_limited(100, 10);
        h.round_app_limited(100, 10);
        h.round_app_limited(100, 10);
        assert_eq!(h.bbr.full_bw_cnt, 0);
        // An ACK for a packet sent before the round began is not a round start.
        let prior = h.tcp.delivered - 1;
        h.ack_with_prior(prior, 100, RTT_US, 10);
        assert!(!h.bbr.round_start);
        assert_eq!(h.bbr.full_bw_cnt, 0);
    }
}
