//! The constants of BBRv3 and BBRv2alpha, side by side. Every value is the
//! kernel's default, in the kernel's fixed point (gains in 1/256), taken from
//! google/bbr branch `v3` `net/ipv4/tcp_bbr.c` (the `static const` block at
//! the top) and branch `v2alpha` `net/ipv4/tcp_bbr2.c` (its module
//! parameters and `bbr2_init`). Where a value is the same in both, one
//! expression serves; where v3 changed it, both are written out.

use crate::bbr::BBR_UNIT;

/// Which google/bbr release the parameters (and the few behavioural
/// differences marked `Version::V2Alpha` in the code) follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// google/bbr branch `v2alpha`, `tcp_bbr2.c`.
    V2Alpha,
    /// google/bbr branch `v3`, `tcp_bbr.c`.
    V3,
}

/// One BBRv2/v3 parameter set. Gains and fractions are in BBR_UNIT (1/256).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    pub version: Version,
    /// v3 `bbr_startup_pacing_gain` = 256 * 277/100 + 1 (4 ln 2);
    /// v2 `bbr_high_gain` = 256 * 2885/1000 + 1 (2/ln 2).
    pub startup_pacing_gain: u32,
    /// v3 `bbr_startup_cwnd_gain` = 2.0; v2 `bbr_startup_cwnd_gain` = 2.89.
    pub startup_cwnd_gain: u32,
    /// `bbr_drain_gain` = 256 * 1000/2885 (both).
    pub drain_gain: u32,
    /// `bbr_cwnd_gain` = 2.0 (both).
    pub cwnd_gain: u32,
    /// `bbr_pacing_gain[]` indexed by phase UP, DOWN, CRUISE, REFILL:
    /// v3 {5/4, 91/100, 1, 1}; v2 {5/4, 3/4, 1, 1}.
    pub pacing_gain: [u32; 4],
    /// v3 `bbr_bw_probe_cwnd_gain` = 1: cwnd_gain + 1/4 in PROBE_UP; v2 has none.
    pub bw_probe_cwnd_gain_quarters: u32,
    /// `bbr_full_bw_thresh` = 5/4 and `bbr_full_bw_cnt` = 3 (both).
    pub full_bw_thresh: u32,
    pub full_bw_cnt: u32,
    /// `bbr_full_loss_cnt`: STARTUP exits after this many loss events in a
    /// recovery round with loss above `loss_thresh`: v3 6, v2 8.
    pub full_loss_cnt: u32,
    /// `bbr_full_ecn_cnt` = 2 (both): rounds of high CE ratio that end STARTUP.
    pub full_ecn_cnt: u32,
    /// `bbr_loss_thresh` = 2% (both).
    pub loss_thresh: u32,
    /// `bbr_beta` = 30%: loss cuts bw_lo/inflight_lo and inflight_hi to 0.7x (both).
    pub beta: u32,
    /// `bbr_inflight_headroom` = 15% (both).
    pub inflight_headroom: u32,
    /// `bbr_ecn_alpha_gain` = 1/16, `bbr_ecn_alpha_init` = 1.0,
    /// `bbr_ecn_factor` = 1/3, `bbr_ecn_thresh` = 1/2 (both).
    pub ecn_alpha_gain: u32,
    pub ecn_alpha_init: u32,
    pub ecn_factor: u32,
    pub ecn_thresh: u32,
    /// `bbr_ecn_max_rtt_us` = 5000: ECN logic only on paths with min_rtt <= 5 ms (both).
    pub ecn_max_rtt_us: u64,
    /// `bbr_ecn_reprobe_gain`: v3 1/2, v2 0 (disabled).
    pub ecn_reprobe_gain: u32,
    /// v2 `bbr_ecn_bw_lo` / `bbr_ecn_bw_hi` (true): ECN also cuts bw_lo / bw_hi.
    /// v3 dropped both (ECN cuts inflight_lo only).
    pub ecn_cuts_bw: bool,
    /// `bbr_bw_probe_max_rounds` = 63, `bbr_bw_probe_rand_rounds` = 2 (both).
    pub bw_probe_max_rounds: u32,
    pub bw_probe_rand_rounds: u32,
    /// `bbr_bw_probe_base_us` = 2 s, `bbr_bw_probe_rand_us` = 1 s (both):
    /// the wall-clock wait before a probe is uniform in [2 s, 3 s).
    pub bw_probe_base_us: u64,
    pub bw_probe_rand_us: u32,
    /// v2 `bbr_bw_probe_pif_gain` = 5/4: PROBE_UP ends once inflight reaches
    /// 1.25 x BDP after one min_rtt. v3 ends PROBE_UP on a bw plateau instead.
    pub bw_probe_pif_gain: u32,
    /// `bbr_probe_rtt_cwnd_gain` = 1/2 (both): PROBE_RTT holds cwnd at 0.5 x BDP.
    pub probe_rtt_cwnd_gain: u32,
    /// `bbr_probe_rtt_mode_ms` = 200, `bbr_probe_rtt_win_ms` = 5000,
    /// `bbr_min_rtt_win_sec` = 10 (both).
    pub probe_rtt_mode_ms: u64,
    pub probe_rtt_win_ms: u64,
    pub min_rtt_win_sec: u64,
    /// `bbr_cwnd_min_target` = 4 (both).
    pub cwnd_min_target: u32,
}

impl Params {
    /// google/bbr v3 `tcp_bbr.c`.
    pub const V3: Params = Params {
        version: Version::V3,
        startup_pacing_gain: BBR_UNIT * 277 / 100 + 1,
        startup_cwnd_gain: BBR_UNIT * 2,
        drain_gain: BBR_UNIT * 1000 / 2885,
        cwnd_gain: BBR_UNIT * 2,
        pacing_gain: [BBR_UNIT * 5 / 4, BBR_UNIT * 91 / 100, BBR_UNIT, BBR_UNIT],
        bw_probe_cwnd_gain_quarters: 1,
        full_bw_thresh: BBR_UNIT * 5 / 4,
        full_bw_cnt: 3,
        full_loss_cnt: 6,
        full_ecn_cnt: 2,
        loss_thresh: BBR_UNIT * 2 / 100,
        beta: BBR_UNIT * 30 / 100,
        inflight_headroom: BBR_UNIT * 15 / 100,
        ecn_alpha_gain: BBR_UNIT / 16,
        ecn_alpha_init: BBR_UNIT,
        ecn_factor: BBR_UNIT / 3,
        ecn_thresh: BBR_UNIT / 2,
        ecn_max_rtt_us: 5_000,
        ecn_reprobe_gain: BBR_UNIT / 2,
        ecn_cuts_bw: false,
        bw_probe_max_rounds: 63,
        bw_probe_rand_rounds: 2,
        bw_probe_base_us: 2_000_000,
        bw_probe_rand_us: 1_000_000,
        bw_probe_pif_gain: BBR_UNIT * 5 / 4,
        probe_rtt_cwnd_gain: BBR_UNIT / 2,
        probe_rtt_mode_ms: 200,
        probe_rtt_win_ms: 5_000,
        min_rtt_win_sec: 10,
        cwnd_min_target: 4,
    };

    /// google/bbr v2alpha `tcp_bbr2.c`: v3's values except where noted above.
    pub const V2ALPHA: Params = Params {
        version: Version::V2Alpha,
        startup_pacing_gain: BBR_UNIT * 2885 / 1000 + 1,
        startup_cwnd_gain: BBR_UNIT * 2885 / 1000 + 1,
        pacing_gain: [BBR_UNIT * 5 / 4, BBR_UNIT * 3 / 4, BBR_UNIT, BBR_UNIT],
        bw_probe_cwnd_gain_quarters: 0,
        full_loss_cnt: 8,
        ecn_reprobe_gain: 0,
        ecn_cuts_bw: true,
        ..Params::V3
    };

    pub fn is_v3(&self) -> bool {
        self.version == Version::V3
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v3_changed_the_startup_and_probe_down_gains_and_the_startup_loss_count() {
        assert_eq!(Params::V3.startup_pacing_gain, 710);
        assert_eq!(Params::V2ALPHA.startup_pacing_gain, 739);
        assert_eq!(Params::V3.startup_cwnd_gain, 512);
        assert_eq!(Params::V3.pacing_gain[1], 232);
        assert_eq!(Params::V2ALPHA.pacing_gain[1], 192);
        assert_eq!((Params::V3.full_loss_cnt, Params::V2ALPHA.full_loss_cnt), (6, 8));
        // Shared: 2% loss threshold, beta 0.3, 15% headroom, drain gain.
        assert_eq!((Params::V3.loss_thresh, Params::V3.beta, Params::V3.inflight_headroom), (5, 76, 38));
        assert_eq!(Params::V2ALPHA.drain_gain, 88);
    }
}
