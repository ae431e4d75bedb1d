//! Long-term ("LT") bandwidth: detect a token-bucket policer and pace at its
//! rate (Linux `bbr_lt_bw_sampling`, `bbr_lt_bw_interval_done`). Linux-only;
//! the BBR draft has no such estimator.
//!
//! Two consecutive sampling intervals (4..16 rounds each, starting at a loss
//! and ending at a loss) with a loss rate of at least 50/256 (~20%) and
//! consistent delivery rates (within 1/8 or 4 kbit/s) mean "policed": BBR then
//! uses their average rate as its bandwidth, at gain 1, for 48 rounds.

use super::{Bbr, Mode, BBR_SCALE, BBR_UNIT, BW_UNIT};
use crate::{RateSample, TcpState};

/// `bbr_lt_intvl_min_rtts`: least rounds in a sampling interval.
pub(super) const LT_INTVL_MIN_RTTS: u32 = 4;
/// `bbr_lt_loss_thresh`: an interval is lossy if lost/delivered >= 50/256.
pub(super) const LT_LOSS_THRESH: u64 = 50;
/// `bbr_lt_bw_ratio`: rates within 1/8 of each other are consistent...
pub(super) const LT_BW_RATIO: u64 = BBR_UNIT as u64 / 8;
/// `bbr_lt_bw_diff`: ...or within 4 kbit/s (500 bytes/s).
pub(super) const LT_BW_DIFF_BYTES_PER_SEC: u64 = 4000 / 8;
/// `bbr_lt_bw_max_rtts`: rounds to use the policed rate before re-probing.
pub(super) const LT_BW_MAX_RTTS: u32 = 48;

/// The `lt_*` fields of Linux `struct bbr`.
#[derive(Clone, Debug, Default)]
pub(super) struct LtBw {
    pub(super) is_sampling: bool,
    pub(super) rtt_cnt: u32,
    pub(super) use_bw: bool,
    /// Policed rate estimate, packets/us << 24.
    pub(super) bw: u64,
    last_delivered: u64,
    /// `lt_last_stamp`: interval start in ms (Linux keeps ms here, not us).
    last_stamp_ms: u64,
    last_lost: u64,
}

impl Bbr {
    /// `bbr_reset_lt_bw_sampling_interval`.
    fn reset_lt_bw_sampling_interval(&mut self, tcp: &TcpState) {
        self.lt.last_stamp_ms = tcp.delivered_time.as_nanos() / 1_000_000;
        self.lt.last_delivered = tcp.delivered;
        self.lt.last_lost = tcp.lost;
        self.lt.rtt_cnt = 0;
    }

    /// `bbr_reset_lt_bw_sampling`.
    pub(super) fn reset_lt_bw_sampling(&mut self, tcp: &TcpState) {
        self.lt.bw = 0;
        self.lt.use_bw = false;
        self.lt.is_sampling = false;
        self.reset_lt_bw_sampling_interval(tcp);
    }

    /// `bbr_lt_bw_interval_done`: a lossy interval ended with rate `bw`.
    fn lt_bw_interval_done(&mut self, tcp: &TcpState, bw: u64) {
        if self.lt.bw > 0 {
            let diff = bw.abs_diff(self.lt.bw);
            if diff * BBR_UNIT as u64 <= LT_BW_RATIO * self.lt.bw
                || Self::rate_bytes_per_sec(tcp, diff, BBR_UNIT) <= LT_BW_DIFF_BYTES_PER_SEC
            {
                // Two consistent lossy intervals: policed. Use their average.
                self.lt.bw = (bw + self.lt.bw) >> 1;
                self.lt.use_bw = true;
                self.pacing_gain = BBR_UNIT; // avoid further drops
                self.lt.rtt_cnt = 0;
                return;
            }
        }
        self.lt.bw = bw;
        self.reset_lt_bw_sampling_interval(tcp);
    }

    /// `bbr_lt_bw_sampling`, once per ACK (and on RTO with one loss).
    pub(super) fn lt_bw_sampling(&mut self, tcp: &TcpState, rs: &RateSample) {
        if self.lt.use_bw {
            // Policed: after 48 rounds in PROBE_BW, forget it and probe again.
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt.rtt_cnt += 1;
                if self.lt.rtt_cnt >= LT_BW_MAX_RTTS {
                    self.reset_lt_bw_sampling(tcp);
                    self.reset_probe_bw_mode(tcp);
                }
            }
            return;
        }
        // Start at a loss, when the policer has spent its tokens; earlier
        // samples would include the burst and overestimate the rate.
        if !self.lt.is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval(tcp);
            self.lt.is_sampling = true;
        }
        // Running out of data would underestimate: start over.
        if rs.is_app_limited {
            self.reset_lt_bw_sampling(tcp);
            return;
        }
        if self.round_start {
            self.lt.rtt_cnt += 1;
        }
        if self.lt.rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if self.lt.rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            self.reset_lt_bw_sampling(tcp); // too long
            return;
        }
        // End the interval at a loss, once the tokens are surely exhausted.
        if rs.losses == 0 {
            return;
        }
        let lost = tcp.lost - self.lt.last_lost;
        let delivered = tcp.delivered - self.lt.last_delivered;
        if delivered == 0 || (lost << BBR_SCALE) < LT_LOSS_THRESH * delivered {
            return; // not lossy enough (yet)
        }
        let t_ms = (tcp.delivered_time.as_nanos() / 1_000_000) as i64 - self.lt.last_stamp_ms as i64;
        if t_ms < 1 {
            return; // under a millisecond: wait
        }
        if t_ms as u64 >= u32::MAX as u64 / 1_000 {
            self.reset_lt_bw_sampling(tcp); // would overflow Linux's u32 us
            return;
        }
        let bw = delivered * BW_UNIT / (t_ms as u64 * 1_000);
        self.lt_bw_interval_done(tcp, bw);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness, RTT_US};
    use super::super::Mode;
    use crate::{CaState, CongestionControl};

    /// One 100 ms round through a policer at half the path rate (0.5 packet/ms):
    /// 50 delivered, `lost` dropped.
    fn policed_round(h: &mut Harness, delivered: u64, lost: u32) {
        let prior_delivered = Some(h.tcp.delivered); // each call ends a round
        h.ack(Ack {
            advance_us: RTT_US,
            prior_delivered,
            delivered,
            interval_us: RTT_US,
            losses: lost,
            ..Ack::one_packet(120)
        });
    }

    #[test]
    fn two_consistent_lossy_intervals_are_taken_for_a_policer() {
        let mut h = Harness::in_probe_bw(1);
        assert_eq!(h.bbr.max_bw(), 16_777);
        // Round 1 (t0): the first loss starts sampling; it counts as round 1.
        policed_round(&mut h, 50, 13);
        assert!(h.bbr.lt.is_sampling);
        assert_eq!(h.bbr.lt.rtt_cnt, 1);
        // Rounds 2-4: 150 delivered and 39 lost since t0, over 300 ms:
        // 39*256 = 9984 >= 50*150, bw = 150 * 2^24 / 300000 = 8388.
        for _ in 0..3 {
            policed_round(&mut h, 50, 13);
        }
        assert_eq!(h.bbr.lt.bw, 8_388);
        assert!(!h.bbr.lt.use_bw);
        assert_eq!(h.bbr.lt.rtt_cnt, 0, "a new interval starts");
        // Rounds 5-8: 200 delivered in 400 ms, bw 8388 again: policed.
        for _ in 0..4 {
            assert!(!h.bbr.lt.use_bw);
            policed_round(&mut h, 50, 13);
        }
        assert!(h.bbr.lt.use_bw);
        assert_eq!(h.bbr.lt.bw, 8_388);
        // BBR now paces at the policed rate at gain 1:
        // 8388 * 1000 B * 256 >> 8 = 8_388_000; * 990000 >> 24 = 494_964 B/s.
        assert_eq!(h.bbr.pacing_gain, 256);
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, 494_964);
        // Telemetry reports it: 8388 * 1000 * 10^6 >> 24 = 499_963 B/s = 3_999_704 bit/s.
        assert_eq!(h.bbr.telemetry(&h.tcp).bw_estimate_bps, Some(3_999_704));
        // The max filter still holds the unpoliced rate.
        assert_eq!(h.bbr.max_bw(), 16_777);
    }

    #[test]
    fn the_policed_rate_is_dropped_after_48_rounds() {
        let mut h = Harness::in_probe_bw(1);
        for _ in 0..8 {
            policed_round(&mut h, 50, 13);
        }
        assert!(h.bbr.lt.use_bw);
        for _ in 0..47 {
            h.round(50, 100);
        }
        assert!(h.bbr.lt.use_bw);
        h.round(50, 100);
        assert!(!h.bbr.lt.use_bw);
        assert_eq!(h.bbr.lt.bw, 0);
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
    }

    #[test]
    fn an_interval_with_under_20_percent_loss_is_not_a_policer() {
        let mut h = Harness::in_probe_bw(1);
        // 9 of 50 lost per round: 9*256 = 2304 < 50*50 = 2500.
        for _ in 0..12 {
            policed_round(&mut h, 50, 9);
        }
        assert!(h.bbr.lt.is_sampling);
        assert_eq!(h.bbr.lt.bw, 0);
        assert!(!h.bbr.lt.use_bw);
    }

    #[test]
    fn inconsistent_rates_restart_the_comparison_instead() {
        let mut h = Harness::in_probe_bw(1);
        for _ in 0..4 {
            policed_round(&mut h, 50, 13);
        }
        assert_eq!(h.bbr.lt.bw, 8_388);
        // Next interval at twice the rate: 400 in 400 ms = 16777. The difference
        // (8389) is over 1/8 of 8388 and over 4 kbit/s (495_023 B/s): not consistent.
        for _ in 0..4 {
            policed_round(&mut h, 100, 25);
        }
        assert!(!h.bbr.lt.use_bw);
        assert_eq!(h.bbr.lt.bw, 16_777);
    }

    #[test]
    fn app_limited_samples_abort_long_term_sampling() {
        let mut h = Harness::in_probe_bw(1);
        policed_round(&mut h, 50, 13);
        assert!(h.bbr.lt.is_sampling);
        h.ack(Ack { app_limited: true, ..Ack::one_packet(10) });
        assert!(!h.bbr.lt.is_sampling);
    }

    #[test]
    fn an_rto_counts_as_a_loss_that_starts_sampling() {
        let mut h = Harness::in_probe_bw(1);
        h.bbr.set_state(&mut h.tcp, CaState::Loss);
        assert!(h.bbr.lt.is_sampling);
        assert_eq!(h.bbr.lt.rtt_cnt, 1, "the RTO is treated as the end of a round");
        assert_eq!(h.bbr.full_bw, 0);
        assert_eq!(h.bbr.prev_ca_state, CaState::Loss);
    }
}
