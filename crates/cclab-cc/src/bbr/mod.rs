//! BBRv1 as Linux 6.x `net/ipv4/tcp_bbr.c` implements it.
//!
//! Reference: Linux `tcp_bbr.c` as of 6.x — which includes the 5.10 change
//! to postpone PROBE_RTT only on a strictly lower RTT, the 5.14 fix that
//! starts the round counter at `tp->delivered` in `bbr_init`,
//! `get_random_u32_below` for the start phase and `GSO_LEGACY_MAX_SIZE` in
//! the TSO goal — plus `lib/win_minmax.c`; the BBR Internet-Draft
//! (draft-cardwell-iccrg-bbr-congestion-control) for background. Where the
//! draft and Linux differ, this follows Linux: the 1% pacing margin, the TSO
//! quantization budget, the ACK-aggregation allowance and the long-term
//! (policer) estimator are as `tcp_bbr.c` has them.
//!
//! Fixed point as in Linux so that rounding matches: gains in `BBR_UNIT`
//! (1/256) and bandwidth in packets per microsecond scaled by `BW_UNIT` (2^24).
//! Linux keeps RTTs and timestamps in whole microseconds and the min-RTT
//! filter's clock in jiffies; this module converts the simulator's
//! nanoseconds the same way (truncating), see `us` and `Bbr::jiffies`.
//!
//! One file per state, each owning its constants: `startup`, `drain`,
//! `probe_bw`, `probe_rtt`; plus the long-term ("policer") bandwidth
//! estimator `lt_bw`, the ACK-aggregation allowance `ack_aggregation` and
//! the windowed max filter `minmax`, and the cwnd arithmetic `cwnd`. This
//! file holds the per-ACK flow (`bbr_main`), the pacing rate, and the hooks.

pub(crate) mod ack_aggregation;
pub(crate) mod cwnd;
mod drain;
mod lt_bw;
mod minmax;
mod probe_bw;
mod probe_rtt;
mod startup;
#[cfg(test)]
mod testutil;

use crate::rng::SimRng;
use crate::{
    CaState, CcTelemetry, CongestionControl, CwndEvent, RateSample, SimDuration, SimTime, TcpState, INFINITE_SSTHRESH,
};
use ack_aggregation::AckAggregation;
use lt_bw::LtBw;
use minmax::WindowedMax;

/// `BW_SCALE`: bandwidth is packets per microsecond << 24 (~715 bit/s per unit at 1500 B).
pub(crate) const BW_SCALE: u32 = 24;
pub(crate) const BW_UNIT: u64 = 1 << BW_SCALE;
/// `BBR_SCALE`: gains are fractions of 256.
pub(crate) const BBR_SCALE: u32 = 8;
pub(crate) const BBR_UNIT: u32 = 1 << BBR_SCALE;

/// `bbr_bw_rtts` (= CYCLE_LEN + 2): window of the max bandwidth filter, in rounds.
const BW_FILTER_ROUNDS: u32 = probe_bw::CYCLE_LEN as u32 + 2;
/// `bbr_pacing_margin_percent`: pace about 1% below the estimated bandwidth.
pub(crate) const PACING_MARGIN_PERCENT: u64 = 1;
/// `USEC_PER_SEC`.
pub(crate) const USEC_PER_SEC: u64 = 1_000_000;
/// `tcp_min_rtt()` / `min_rtt_us` before any RTT sample (`~0U` in Linux).
pub(crate) const NO_MIN_RTT_US: u64 = u32::MAX as u64;
/// Linux `CONFIG_HZ` default (`kernel/Kconfig.hz`), and the kernel testbed's.
pub(crate) const DEFAULT_HZ: u32 = 250;

/// Parameters of one BBR flow. Defaults are Linux's.
#[derive(Clone, Debug, PartialEq)]
pub struct BbrConfig {
    /// PROBE_BW's up-gain, phase 0 of the gain cycle (Linux: 5/4). Cao et al.'s
    /// BBR_1.1 and BBR_1.5 variants set 1.1 and 1.5. Converted to 1/256 units
    /// with truncation, as `BBR_UNIT * 11 / 10` would be in C (1.1 -> 281/256).
    pub probe_bw_gain: f64,
    /// `CONFIG_HZ`: the tick of `tcp_jiffies32`, which times the 10 s min-RTT
    /// window and the 200 ms PROBE_RTT (250 is the Kconfig default).
    pub hz: u32,
}

impl Default for BbrConfig {
    fn default() -> Self {
        BbrConfig { probe_bw_gain: 1.25, hz: DEFAULT_HZ }
    }
}

/// Linux `enum bbr_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeBw => "probe_bw",
            Mode::ProbeRtt => "probe_rtt",
        }
    }
}

/// The order of `enum tcp_ca_state`, which BBR compares with `<`.
pub(crate) fn ca_rank(s: CaState) -> u8 {
    match s {
        CaState::Open => 0,
        CaState::Disorder => 1,
        CaState::Cwr => 2,
        CaState::Recovery => 3,
        CaState::Loss => 4,
    }
}

/// Whole microseconds of a timestamp, as `tp->tcp_mstamp` holds it.
pub(crate) fn us(t: SimTime) -> u64 {
    t.as_nanos() / 1_000
}

/// `tcp_stamp_us_delta(t1, t0)`: microseconds between two stamps, never negative.
pub(crate) fn us_delta(t1: SimTime, t0: SimTime) -> u64 {
    us(t1).saturating_sub(us(t0))
}

/// Linux `struct bbr` plus its configuration and random source.
pub struct Bbr {
    config: BbrConfig,
    rng: SimRng,
    /// `bbr_pacing_gain[0]` in BBR_UNIT, from `config.probe_bw_gain`.
    probe_bw_up_gain: u32,
    mode: Mode,
    /// `min_rtt_us` and when it was taken (`min_rtt_stamp`, jiffies).
    min_rtt_us: u64,
    min_rtt_stamp: u64,
    /// `probe_rtt_done_stamp` (jiffies); `None` for Linux's 0.
    probe_rtt_done_stamp: Option<u64>,
    probe_rtt_round_done: bool,
    /// Max recent delivery rate, packets/us << 24, over `BW_FILTER_ROUNDS` rounds.
    bw: WindowedMax,
    /// `rtt_cnt`: packet-timed rounds elapsed (u32 like Linux; the filter's clock).
    rtt_cnt: u32,
    /// `next_rtt_delivered`: `tp->delivered` at which the current round ends.
    next_rtt_delivered: u64,
    /// `cycle_mstamp`: when the current gain-cycle phase began.
    cycle_mstamp: SimTime,
    cycle_idx: usize,
    prev_ca_state: CaState,
    packet_conservation: bool,
    round_start: bool,
    idle_restart: bool,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_cnt: u32,
    full_bw: u64,
    has_seen_rtt: bool,
    /// `prior_cwnd`: cwnd saved on entering recovery or PROBE_RTT.
    prior_cwnd: u32,
    lt: LtBw,
    ack_agg: AckAggregation,
}

impl Bbr {
    pub fn new(config: BbrConfig, seed: u64) -> Self {
        // The gain lives in a 10-bit field in Linux: at most 1023/256.
        let up_gain = (config.probe_bw_gain * BBR_UNIT as f64).floor().clamp(1.0, 1023.0) as u32;
        Bbr {
            rng: SimRng::new(seed),
            probe_bw_up_gain: up_gain,
            mode: Mode::Startup,
            min_rtt_us: NO_MIN_RTT_US,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            bw: WindowedMax::default(),
            rtt_cnt: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: SimTime::ZERO,
            cycle_idx: 0,
            prev_ca_state: CaState::Open,
            packet_conservation: false,
            round_start: false,
            idle_restart: false,
            pacing_gain: startup::HIGH_GAIN,
            cwnd_gain: startup::HIGH_GAIN,
            full_bw_reached: false,
            full_bw_cnt: 0,
            full_bw: 0,
            has_seen_rtt: false,
            prior_cwnd: 0,
            lt: LtBw::default(),
            ack_agg: AckAggregation::default(),
            config,
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `tcp_jiffies32` at `now` for the configured HZ.
    fn jiffies(&self, now: SimTime) -> u64 {
        (now.as_nanos() as u128 * self.config.hz as u128 / 1_000_000_000) as u64
    }

    /// `msecs_to_jiffies`, rounding up as Linux does.
    fn msecs_to_jiffies(&self, ms: u64) -> u64 {
        (ms * self.config.hz as u64).div_ceil(1_000)
    }

    /// `bbr_max_bw`: the windowed max delivery rate.
    fn max_bw(&self) -> u64 {
        self.bw.get()
    }

    /// `bbr_bw`: the bandwidth estimate in use (the policed rate when policed).
    fn bw(&self) -> u64 {
        if self.lt.use_bw {
            self.lt.bw
        } else {
            self.max_bw()
        }
    }

    /// `bbr_rate_bytes_per_sec`: `rate` (packets/us << 24) times `gain` in
    /// payload bytes per second, less the pacing margin. The order of
    /// operations is Linux's, which keeps u64 from overflowing below ~2.9 Tbit/s.
    fn rate_bytes_per_sec(tcp: &TcpState, rate: u64, gain: u32) -> u64 {
        let mut r = rate * tcp.mss_bytes as u64;
        r *= gain as u64;
        r >>= BBR_SCALE;
        r *= USEC_PER_SEC / 100 * (100 - PACING_MARGIN_PERCENT);
        r >> BW_SCALE
    }

    /// `bbr_init_pacing_rate_from_rtt`: high_gain x cwnd / srtt (1 ms if no RTT yet).
    fn init_pacing_rate_from_rtt(&mut self, tcp: &mut TcpState) {
        let srtt_us = tcp.srtt.as_micros();
        let rtt_us = if srtt_us > 0 {
            self.has_seen_rtt = true;
            srtt_us
        } else {
            1_000
        };
        let bw = tcp.snd_cwnd as u64 * BW_UNIT / rtt_us;
        tcp.pacing_rate_bytes_per_sec = Self::rate_bytes_per_sec(tcp, bw, startup::HIGH_GAIN);
    }

    /// `bbr_set_pacing_rate`: never slow down before the pipe is known to be full.
    fn set_pacing_rate(&mut self, tcp: &mut TcpState, bw: u64, gain: u32) {
        let rate = Self::rate_bytes_per_sec(tcp, bw, gain);
        if !self.has_seen_rtt && tcp.srtt > SimDuration::ZERO {
            self.init_pacing_rate_from_rtt(tcp);
        }
        if self.full_bw_reached || rate > tcp.pacing_rate_bytes_per_sec {
            tcp.pacing_rate_bytes_per_sec = rate;
        }
    }

    /// `bbr_update_bw`: count rounds and feed the max filter.
    fn update_bw(&mut self, tcp: &TcpState, rs: &RateSample) {
        self.round_start = false;
        let Some(interval_us) = rs.interval.map(|i| i.as_micros()).filter(|&i| i > 0) else {
            return; // not a valid sample
        };
        // A round ends when a packet sent after the previous round's end is acked.
        if rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = tcp.delivered;
            self.rtt_cnt = self.rtt_cnt.wrapping_add(1);
            self.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_bw_sampling(tcp, rs);
        let bw = rs.delivered * BW_UNIT / interval_us;
        // App-limited samples only count if they raise the estimate.
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.bw.update(BW_FILTER_ROUNDS, self.rtt_cnt, bw);
        }
    }

    /// `bbr_update_gains`: the mode's pacing and cwnd gains.
    fn update_gains(&mut self) {
        let (pacing, cwnd) = match self.mode {
            Mode::Startup => (startup::HIGH_GAIN, startup::HIGH_GAIN),
            Mode::Drain => (drain::DRAIN_GAIN, startup::HIGH_GAIN), // keep cwnd while draining
            Mode::ProbeBw => {
                let pacing = if self.lt.use_bw { BBR_UNIT } else { self.cycle_pacing_gain(self.cycle_idx) };
                (pacing, probe_bw::CWND_GAIN)
            }
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
        self.pacing_gain = pacing;
        self.cwnd_gain = cwnd;
    }

    /// `bbr_update_model`, in Linux's order.
    fn update_model(&mut self, tcp: &mut TcpState, rs: &RateSample) {
        self.update_bw(tcp, rs);
        self.update_ack_aggregation(tcp, rs);
        self.update_cycle_phase(tcp, rs);
        self.check_full_bw_reached(rs);
        self.check_drain(tcp);
        self.update_min_rtt(tcp, rs);
        self.update_gains();
    }

    /// `bbr_undo_cwnd`: a loss was spurious; restart full-pipe detection and
    /// long-term sampling. Not a trait hook yet: for a sender that undoes.
    pub fn undo_cwnd(&mut self, tcp: &TcpState) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.reset_lt_bw_sampling(tcp);
        tcp.snd_cwnd
    }
}

impl CongestionControl for Bbr {
    /// `bbr_init`.
    fn init(&mut self, tcp: &mut TcpState) {
        self.prior_cwnd = 0;
        tcp.snd_ssthresh = INFINITE_SSTHRESH;
        self.rtt_cnt = 0;
        self.next_rtt_delivered = tcp.delivered;
        self.prev_ca_state = CaState::Open;
        self.packet_conservation = false;
        self.probe_rtt_done_stamp = None;
        self.probe_rtt_round_done = false;
        // `tcp_min_rtt()`: TcpState has no separate min-RTT filter; at init
        // (after the handshake) it holds the one handshake sample, as srtt does.
        let srtt_us = tcp.srtt.as_micros();
        self.min_rtt_us = if srtt_us > 0 { srtt_us } else { NO_MIN_RTT_US };
        self.min_rtt_stamp = self.jiffies(tcp.now);
        self.bw.reset(self.rtt_cnt, 0);
        self.has_seen_rtt = false;
        self.init_pacing_rate_from_rtt(tcp);
        self.round_start = false;
        self.idle_restart = false;
        self.full_bw_reached = false;
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.cycle_mstamp = SimTime::ZERO;
        self.cycle_idx = 0;
        self.reset_lt_bw_sampling(tcp);
        self.reset_startup_mode();
        self.ack_agg = AckAggregation::new(tcp.now);
    }

    /// `bbr_ssthresh`: entering recovery; save cwnd, leave ssthresh alone.
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        self.save_cwnd(tcp);
        tcp.snd_ssthresh
    }

    /// `bbr_set_state`: an RTO ends the round, restarts full-pipe growth
    /// tracking and counts as a loss for the policer estimator.
    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Loss {
            let rs = RateSample { losses: 1, ..RateSample::default() };
            self.prev_ca_state = CaState::Loss;
            self.full_bw = 0;
            self.round_start = true;
            self.lt_bw_sampling(tcp, &rs);
        }
    }

    /// `bbr_cwnd_event`: restarting from idle while app-limited.
    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        if event != CwndEvent::TxStart || tcp.app_limited == 0 {
            return;
        }
        self.idle_restart = true;
        self.ack_agg.restart_epoch(tcp.now);
        // No need for speed when restarting app-limited: pace at the estimate.
        match self.mode {
            Mode::ProbeBw => {
                let bw = self.bw();
                self.set_pacing_rate(tcp, bw, BBR_UNIT);
            }
            Mode::ProbeRtt => self.check_probe_rtt_done(tcp),
            Mode::Startup | Mode::Drain => {}
        }
    }

    /// `bbr_main`: update the model, then set pacing rate and cwnd. Linux's
    /// `tcp_cong_control` calls only this (no PRR, no cong_avoid) for BBR.
    fn cong_control(&mut self, tcp: &mut TcpState, rs: &RateSample) -> bool {
        self.update_model(tcp, rs);
        let bw = self.bw();
        self.set_pacing_rate(tcp, bw, self.pacing_gain);
        self.set_cwnd(tcp, rs, rs.acked_sacked, bw, self.cwnd_gain);
        true
    }

    /// `bbr_min_tso_segs` (Linux 6.x `.min_tso_segs`).
    fn min_tso_segs(&self, tcp: &TcpState) -> Option<u32> {
        Some(Self::min_tso_segs(tcp))
    }

    fn needs_pacing(&self) -> bool {
        true
    }
    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr_sndbuf_expand` (net/ipv4/tcp_bbr.c): "Provision 3 * cwnd since BBR may slow-start
    /// even during recovery."
    fn sndbuf_expand(&self) -> Option<u32> {
        Some(3)
    }

    /// As `bbr_get_info` reports: bw in payload bytes/s (here bits/s), min_rtt, gain.
    fn telemetry(&self, tcp: &TcpState) -> CcTelemetry {
        let bytes_per_sec = (self.bw() as u128 * tcp.mss_bytes as u128 * USEC_PER_SEC as u128) >> BW_SCALE;
        CcTelemetry {
            mode: self.mode.name(),
            bw_estimate_bps: Some((bytes_per_sec * 8) as u64),
            min_rtt: (self.min_rtt_us != NO_MIN_RTT_US).then(|| SimDuration::from_micros(self.min_rtt_us)),
            pacing_gain: Some(self.pacing_gain as f64 / BBR_UNIT as f64),
            ecn_alpha: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{Ack, Harness, MSS, RTT_US};
    use super::*;
    use crate::INITIAL_CWND_PKTS;


    #[test]
    fn init_paces_at_high_gain_times_initial_cwnd_over_srtt() {
        let h = Harness::new(1);
        assert_eq!(h.tcp.snd_ssthresh, INFINITE_SSTHRESH);
        assert_eq!(h.bbr.min_rtt_us, RTT_US);
        assert!(h.bbr.has_seen_rtt);
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, 285_662);
        assert!(h.bbr.needs_pacing());
    }

    #[test]
    fn without_an_rtt_sample_init_assumes_1_ms_and_cwnd_targets_the_initial_window() {
        let mut tcp = TcpState::new(MSS);
        let mut bbr = Bbr::new(BbrConfig::default(), 1);
        bbr.init(&mut tcp);
        // 10 packets per 1 ms: bw 167772; * 1000 B * 739 >> 8 * 990000 >> 24.
        assert_eq!(tcp.pacing_rate_bytes_per_sec, 28_578_488);
        assert!(!bbr.has_seen_rtt);
        assert_eq!(bbr.bdp(123_456, probe_bw::CWND_GAIN), INITIAL_CWND_PKTS);
        assert_eq!(bbr.telemetry(&tcp).min_rtt, None);
    }

    #[test]
    fn an_idle_restart_in_probe_bw_paces_at_the_estimate() {
        let mut h = Harness::cruising();
        h.set_phase(0);
        h.ack(Ack::one_packet(200));
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, 1_237_484);
        // A restart that is not app-limited (e.g. after an RTO) changes nothing.
        h.bbr.cwnd_event(&mut h.tcp, CwndEvent::TxStart);
        assert!(!h.bbr.idle_restart);
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, 1_237_484);
        h.tcp.app_limited = h.tcp.delivered + 1;
        h.bbr.cwnd_event(&mut h.tcp, CwndEvent::TxStart);
        assert!(h.bbr.idle_restart);
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, 989_987);
        assert_eq!(h.bbr.ack_agg.epoch_start, h.tcp.now);
    }

    #[test]
    fn startup_never_lowers_the_pacing_rate() {
        let mut h = Harness::new(1);
        let initial = h.tcp.pacing_rate_bytes_per_sec;
        // A tiny first sample (1 packet per 100 ms) would pace far below init.
        h.round(1, 5);
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, initial);
    }

    #[test]
    fn telemetry_reports_mode_bw_in_bits_min_rtt_and_gain() {
        let h = Harness::cruising();
        let t = h.bbr.telemetry(&h.tcp);
        assert_eq!(t.mode, "probe_bw");
        // 16777 * 1000 B * 10^6 >> 24 = 999_987 B/s.
        assert_eq!(t.bw_estimate_bps, Some(7_999_896));
        assert_eq!(t.min_rtt, Some(SimDuration::from_millis(100)));
        assert_eq!(t.pacing_gain, Some(1.0));
        assert_eq!(Harness::new(1).bbr.telemetry(&h.tcp).mode, "startup");
    }

    #[test]
    fn the_mss_scales_the_pacing_rate_in_payload_bytes() {
        let tcp = TcpState::new(1448);
        // 1 packet/ms at gain 1: 16777 * 1448 = 24_293_096; * 990000 >> 24 = 1_433_501.
        assert_eq!(Bbr::rate_bytes_per_sec(&tcp, 16_777, BBR_UNIT), 1_433_501);
    }
}
