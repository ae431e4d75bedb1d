//! BBRv3 (google/bbr branch `v3`, `net/ipv4/tcp_bbr.c`, the version
//! draft-ietf-ccwg-bbr describes) and BBRv2alpha (branch `v2alpha`,
//! `net/ipv4/tcp_bbr2.c`) in one implementation: the two differ in the
//! constants of [`Params`] and in a few paths marked `Version::V2Alpha`.
//!
//! Over BBRv1 ([`crate::bbr`]) these add a model of the path's bounds: a
//! long-term upper bound on inflight (`inflight_hi`) learned from loss or ECN
//! above a threshold while probing, a short-term lower bound (`bw_lo`,
//! `inflight_lo`) cut multiplicatively by loss or ECN while not probing,
//! PROBE_BW as DOWN / CRUISE / REFILL / UP with a randomized wait between
//! probes (2-3 s of wall clock, or sooner after about a BDP of rounds),
//! STARTUP exit on loss or ECN, and PROBE_RTT every 5 s at half the BDP.
//!
//! Fixed point, time units and the ACK-aggregation allowance are shared with
//! BBRv1. Files: `params` (the constants), `startup` (full-pipe detection,
//! STARTUP exit, DRAIN), `probe_bw` (the cycle), `bounds` (inflight_hi /
//! inflight_lo / bw_lo and the cwnd cap they give), `signals` (per-round loss
//! and delivery signals, `skb_marked_lost`), `ecn` (alpha), `probe_rtt`,
//! `cwnd` (BDP, TSO budget, cwnd). This file holds `bbr_main` and the hooks.

mod bounds;
mod cwnd;
mod ecn;
mod params;
mod probe_bw;
mod probe_rtt;
mod signals;
mod startup;
#[cfg(test)]
mod testutil;

pub use params::{Params, Version};

use crate::bbr::ack_aggregation::AckAggregation;
use crate::bbr::{BBR_SCALE, BBR_UNIT, BW_SCALE, DEFAULT_HZ, NO_MIN_RTT_US, PACING_MARGIN_PERCENT, USEC_PER_SEC};
use crate::rng::SimRng;
use crate::{CaState, CcTelemetry, CongestionControl, CwndEvent, LostPacket, RateSample, SimDuration, SimTime, TcpState, INFINITE_SSTHRESH};
use probe_bw::{AckPhase, Phase};

/// `~0U`: "no bound" for `inflight_lo`, `inflight_hi`, `bw_lo`.
const UNSET: u32 = u32::MAX;
const UNSET_BW: u64 = u32::MAX as u64;

/// Options of a BBRv2/v3 flow. Defaults are the kernel's.
#[derive(Clone, Debug, PartialEq)]
pub struct Bbr3Config {
    /// `CONFIG_HZ`, the tick of the min-RTT and PROBE_RTT timers (as BBRv1's).
    pub hz: u32,
    /// Whether the sender-side ECN logic may run: in v3 the route has
    /// `features ecn_low` (`TCP_ECN_LOW`, shallow-threshold marking) on top
    /// of negotiated ECN; in v2alpha the `ecn_enable` module parameter. Off
    /// in the kernel by default, so off here.
    pub ecn_low: bool,
}

impl Default for Bbr3Config {
    fn default() -> Self {
        Bbr3Config { hz: DEFAULT_HZ, ecn_low: false }
    }
}

/// `enum bbr_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// Linux `struct bbr` of the v3 tree (v2alpha's is the same but for `bw_hi`).
pub struct Bbr3 {
    p: Params,
    config: Bbr3Config,
    rng: SimRng,
    mode: Mode,
    cycle_idx: Phase,
    ack_phase: AckPhase,
    min_rtt_us: u64,
    /// Jiffies.
    min_rtt_stamp: u64,
    probe_rtt_done_stamp: Option<u64>,
    probe_rtt_round_done: bool,
    probe_rtt_min_us: u64,
    probe_rtt_min_stamp: u64,
    next_rtt_delivered: u64,
    cycle_mstamp: SimTime,
    prev_ca_state: CaState,
    round_start: bool,
    idle_restart: bool,
    try_fast_path: bool,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_now: bool,
    full_bw_cnt: u32,
    full_bw: u64,
    has_seen_rtt: bool,
    init_cwnd: u32,
    prior_cwnd: u32,
    ack_agg: AckAggregation,
    /// v3 `bw_hi[2]` (v2alpha `max_bw[2]`): max delivery rate of this and the
    /// previous PROBE_BW cycle.
    max_bw: [u64; 2],
    /// v2alpha's separate `bw_hi`, only ever set by the ECN response.
    bw_hi_v2: u64,
    bw_lo: u64,
    bw_latest: u64,
    inflight_lo: u32,
    inflight_hi: u32,
    inflight_latest: u32,
    bw_probe_up_rounds: u32,
    bw_probe_up_cnt: u32,
    bw_probe_up_acks: u32,
    probe_wait_us: u64,
    rounds_since_probe: u32,
    bw_probe_samples: bool,
    prev_probe_too_high: bool,
    stopped_risky_probe: bool,
    got_ok_bw_probe_sample: bool,
    loss_round_delivered: u64,
    loss_round_start: bool,
    loss_in_round: bool,
    ecn_in_round: bool,
    loss_in_cycle: bool,
    ecn_in_cycle: bool,
    loss_events_in_round: u32,
    startup_ecn_rounds: u32,
    ecn_eligible: bool,
    ecn_alpha: u32,
    alpha_last_delivered: u64,
    alpha_last_delivered_ce: u64,
    /// `tp->delivered_ce` at the previous ACK, to tell whether this one
    /// carried ECE (`rs->is_ece`, FLAG_ECE).
    last_delivered_ce: u64,
    /// `undo_bw_lo`, `undo_inflight_lo`, `undo_inflight_hi`: the loss-adapted
    /// model when recovery began, restored if it proves spurious.
    undo_bw_lo: u64,
    undo_inflight_lo: u32,
    undo_inflight_hi: u32,
}

impl Bbr3 {
    pub fn new(p: Params, config: Bbr3Config, seed: u64) -> Self {
        Bbr3 {
            p,
            config,
            rng: SimRng::new(seed),
            mode: Mode::Startup,
            cycle_idx: Phase::Up,
            ack_phase: AckPhase::Init,
            min_rtt_us: NO_MIN_RTT_US,
            min_rtt_stamp: 0,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            probe_rtt_min_us: NO_MIN_RTT_US,
            probe_rtt_min_stamp: 0,
            next_rtt_delivered: 0,
            cycle_mstamp: SimTime::ZERO,
            prev_ca_state: CaState::Open,
            round_start: false,
            idle_restart: false,
            try_fast_path: false,
            pacing_gain: p.startup_pacing_gain,
            cwnd_gain: p.startup_cwnd_gain,
            full_bw_reached: false,
            full_bw_now: false,
            full_bw_cnt: 0,
            full_bw: 0,
            has_seen_rtt: false,
            init_cwnd: 0,
            prior_cwnd: 0,
            ack_agg: AckAggregation::default(),
            max_bw: [0; 2],
            bw_hi_v2: UNSET_BW,
            bw_lo: UNSET_BW,
            bw_latest: 0,
            inflight_lo: UNSET,
            inflight_hi: UNSET,
            inflight_latest: 0,
            bw_probe_up_rounds: 0,
            bw_probe_up_cnt: UNSET,
            bw_probe_up_acks: 0,
            probe_wait_us: 0,
            rounds_since_probe: 0,
            bw_probe_samples: false,
            prev_probe_too_high: false,
            stopped_risky_probe: false,
            got_ok_bw_probe_sample: false,
            loss_round_delivered: 0,
            loss_round_start: false,
            loss_in_round: false,
            ecn_in_round: false,
            loss_in_cycle: false,
            ecn_in_cycle: false,
            loss_events_in_round: 0,
            startup_ecn_rounds: 0,
            ecn_eligible: false,
            ecn_alpha: p.ecn_alpha_init,
            alpha_last_delivered: 0,
            alpha_last_delivered_ce: 0,
            last_delivered_ce: 0,
            undo_bw_lo: 0,
            undo_inflight_lo: 0,
            undo_inflight_hi: 0,
        }
    }

    /// `bbr_undo_cwnd`: the loss recovery was spurious; restore the model
    /// saved when it began and return the cwnd to resume at. Not a trait hook
    /// yet: the simulated sender never undoes (no DSACK/F-RTO), as for BBRv1.
    pub fn undo_cwnd(&mut self) -> u32 {
        match self.p.version {
            Version::V3 => self.reset_full_bw(),
            Version::V2Alpha => (self.full_bw, self.full_bw_cnt) = (0, 0),
        }
        self.loss_in_round = false;
        self.bw_lo = self.bw_lo.max(self.undo_bw_lo);
        self.inflight_lo = self.inflight_lo.max(self.undo_inflight_lo);
        self.inflight_hi = self.inflight_hi.max(self.undo_inflight_hi);
        self.try_fast_path = false;
        self.prior_cwnd
    }

    pub fn params(&self) -> &Params {
        &self.p
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `inflight_hi`, `None` while unset (`~0U`).
    pub fn inflight_hi(&self) -> Option<u32> {
        (self.inflight_hi != UNSET).then_some(self.inflight_hi)
    }

    /// `bbr_get_phase` as the names the flow series uses.
    pub fn mode_name(&self) -> &'static str {
        match self.mode {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeRtt => "probe_rtt",
            Mode::ProbeBw => match self.cycle_idx {
                Phase::Down => "probe_bw_down",
                Phase::Cruise => "probe_bw_cruise",
                Phase::Refill => "probe_bw_refill",
                Phase::Up => "probe_bw_up",
            },
        }
    }

    fn jiffies(&self, now: SimTime) -> u64 {
        (now.as_nanos() as u128 * self.config.hz as u128 / 1_000_000_000) as u64
    }

    fn msecs_to_jiffies(&self, ms: u64) -> u64 {
        (ms * self.config.hz as u64).div_ceil(1_000)
    }

    /// `bbr_max_bw`: max of the two cycle slots.
    fn max_bw(&self) -> u64 {
        self.max_bw[0].max(self.max_bw[1])
    }

    /// `bbr_bw`: the max filter, bounded by bw_lo (and v2alpha's bw_hi).
    fn bw(&self) -> u64 {
        let bw = self.max_bw().min(self.bw_lo);
        match self.p.version {
            Version::V3 => bw,
            Version::V2Alpha => bw.min(self.bw_hi_v2),
        }
    }

    /// `bbr_rate_bytes_per_sec` with the pacing margin (`bbr_bw_to_pacing_rate`;
    /// no `sk_max_pacing_rate` cap in the simulator), at least 1 B/s.
    fn pacing_rate_bytes_per_sec(tcp: &TcpState, bw: u64, gain: u32) -> u64 {
        let mut r = bw * tcp.mss_bytes as u64;
        r *= gain as u64;
        r >>= BBR_SCALE;
        r *= USEC_PER_SEC / 100 * (100 - PACING_MARGIN_PERCENT);
        (r >> BW_SCALE).max(1)
    }

    /// `bbr_init_pacing_rate_from_rtt`.
    fn init_pacing_rate_from_rtt(&mut self, tcp: &mut TcpState) {
        let srtt_us = tcp.srtt.as_micros();
        let rtt_us = if srtt_us > 0 {
            self.has_seen_rtt = true;
            srtt_us
        } else {
            1_000
        };
        let bw = tcp.snd_cwnd as u64 * crate::bbr::BW_UNIT / rtt_us;
        tcp.pacing_rate_bytes_per_sec = Self::pacing_rate_bytes_per_sec(tcp, bw, self.p.startup_pacing_gain);
    }

    /// `bbr_set_pacing_rate`: never slower before the pipe is known full.
    fn set_pacing_rate(&mut self, tcp: &mut TcpState, bw: u64, gain: u32) {
        let rate = Self::pacing_rate_bytes_per_sec(tcp, bw, gain);
        if !self.has_seen_rtt && tcp.srtt > SimDuration::ZERO {
            self.init_pacing_rate_from_rtt(tcp);
        }
        if self.full_bw_reached || rate > tcp.pacing_rate_bytes_per_sec {
            tcp.pacing_rate_bytes_per_sec = rate;
        }
    }

    /// `bbr_update_round_start`.
    fn update_round_start(&mut self, tcp: &TcpState, rs: &RateSample) {
        self.round_start = false;
        if rs.interval.is_some_and(|i| i.as_micros() > 0) && rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = tcp.delivered;
            self.round_start = true;
        }
    }

    /// `bbr_calculate_bw_sample`: delivered / interval, rounded up.
    fn bw_sample(rs: &RateSample) -> u64 {
        match rs.interval.map(|i| i.as_micros()) {
            Some(us) if us > 0 => (rs.delivered * crate::bbr::BW_UNIT).div_ceil(us),
            _ => 0,
        }
    }

    /// `bbr_update_gains`.
    fn update_gains(&mut self) {
        let p = &self.p;
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (p.startup_pacing_gain, p.startup_cwnd_gain),
            Mode::Drain => (p.drain_gain, p.startup_cwnd_gain), // keep cwnd
            Mode::ProbeBw => {
                let mut cwnd_gain = p.cwnd_gain;
                if self.cycle_idx == Phase::Up {
                    cwnd_gain += BBR_UNIT * p.bw_probe_cwnd_gain_quarters / 4;
                }
                (p.pacing_gain[self.cycle_idx as usize], cwnd_gain)
            }
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    /// `bbr_update_model`, in the kernel's order.
    fn update_model(&mut self, tcp: &mut TcpState, rs: &RateSample, sample_bw: u64) {
        self.update_congestion_signals(tcp, rs, sample_bw);
        let (bw, round_start) = (self.bw(), self.round_start);
        // v3 (and v2's extra_acked_in_startup): 1-round slots before the pipe is full.
        let win = if self.full_bw_reached { crate::bbr::ack_aggregation::EXTRA_ACKED_WIN_RTTS } else { 1 };
        self.ack_agg.update(tcp, rs, bw, round_start, win);
        self.check_loss_too_high_in_startup(tcp, rs);
        self.check_full_bw_reached(rs, sample_bw);
        self.check_drain(tcp);
        self.update_cycle_phase(tcp, rs, sample_bw);
        self.update_min_rtt(tcp, rs);
    }

    /// `bbr_run_fast_path`: an app-limited sample below the estimate with no
    /// congestion signal cannot change the model; skip it.
    fn run_fast_path(&mut self, tcp: &mut TcpState, rs: &RateSample, sample_bw: u64, update_model: &mut bool) -> bool {
        if !(self.try_fast_path && rs.is_app_limited && sample_bw < self.max_bw() && !self.loss_in_round && !self.ecn_in_round) {
            return false;
        }
        let (prev_mode, prev_min_rtt) = (self.mode, self.min_rtt_us);
        self.check_drain(tcp);
        self.update_cycle_phase(tcp, rs, sample_bw);
        self.update_min_rtt(tcp, rs);
        if self.mode == prev_mode && self.min_rtt_us == prev_min_rtt && self.try_fast_path {
            return true;
        }
        *update_model = false; // control still needs updating
        false
    }
}

impl CongestionControl for Bbr3 {
    /// `bbr_init` (v3; v2alpha's `bbr2_init` differs only in starting the
    /// round counter at 0 rather than `tp->delivered`).
    fn init(&mut self, tcp: &mut TcpState) {
        let fresh = Bbr3::new(self.p, self.config.clone(), 0);
        let rng = std::mem::replace(&mut self.rng, SimRng::new(0));
        *self = Bbr3 { rng, ..fresh };
        self.init_cwnd = tcp.snd_cwnd.min(0x7f);
        self.prior_cwnd = tcp.prior_cwnd;
        tcp.snd_ssthresh = INFINITE_SSTHRESH;
        self.next_rtt_delivered = if self.p.is_v3() { tcp.delivered } else { 0 };
        let srtt_us = tcp.srtt.as_micros();
        let now_j = self.jiffies(tcp.now);
        self.min_rtt_us = if srtt_us > 0 { srtt_us } else { NO_MIN_RTT_US };
        self.probe_rtt_min_us = self.min_rtt_us;
        self.min_rtt_stamp = now_j;
        self.probe_rtt_min_stamp = now_j;
        self.init_pacing_rate_from_rtt(tcp);
        self.ack_agg = AckAggregation::new(tcp.now);
        // Start sampling loss/ECN rounds after the first full flight is ACKed.
        self.loss_round_delivered = tcp.delivered + 1;
        self.alpha_last_delivered = 0;
        self.alpha_last_delivered_ce = 0;
        self.last_delivered_ce = tcp.delivered_ce;
    }

    /// `bbr_ssthresh`: save cwnd and the loss-adapted model on entering
    /// recovery (for undo); ssthresh itself is unused.
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        self.save_cwnd(tcp);
        self.undo_bw_lo = self.bw_lo;
        self.undo_inflight_lo = self.inflight_lo;
        self.undo_inflight_hi = self.inflight_hi;
        tcp.snd_ssthresh
    }

    /// `bbr_set_state`.
    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Loss {
            self.prev_ca_state = CaState::Loss;
            match self.p.version {
                Version::V3 => self.reset_full_bw(),
                Version::V2Alpha => self.full_bw = 0,
            }
            // adapt_lower_bounds needs the cwnd from before the RTO.
            if !self.is_probing_bandwidth() && self.inflight_lo == UNSET {
                self.inflight_lo = match self.p.version {
                    Version::V3 => tcp.snd_cwnd.max(self.prior_cwnd),
                    Version::V2Alpha => self.prior_cwnd,
                };
            }
        } else if self.prev_ca_state == CaState::Loss {
            // bbr_exit_loss_recovery
            tcp.snd_cwnd = tcp.snd_cwnd.max(self.prior_cwnd);
            self.try_fast_path = false;
        }
    }

    /// `bbr_cwnd_event`: an idle restart while app-limited paces at the estimate.
    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        if event != CwndEvent::TxStart || tcp.app_limited == 0 {
            return;
        }
        self.idle_restart = true;
        self.ack_agg.restart_epoch(tcp.now);
        match self.mode {
            Mode::ProbeBw => {
                let bw = self.bw();
                self.set_pacing_rate(tcp, bw, BBR_UNIT);
            }
            Mode::ProbeRtt => self.check_probe_rtt_done(tcp),
            Mode::Startup | Mode::Drain => {}
        }
    }

    /// `bbr_main`.
    fn cong_control(&mut self, tcp: &mut TcpState, rs: &RateSample) -> bool {
        let is_ece = tcp.delivered_ce > self.last_delivered_ce;
        self.last_delivered_ce = tcp.delivered_ce;
        self.update_round_start(tcp, rs);
        if self.round_start {
            self.rounds_since_probe = (self.rounds_since_probe + 1).min(0xff);
            self.update_ecn_alpha(tcp);
        }
        self.ecn_in_round |= is_ece && (self.ecn_eligible || !self.p.is_v3());
        let sample_bw = Self::bw_sample(rs);
        if self.p.is_v3() {
            self.update_latest_delivery_signals(tcp, rs, sample_bw);
        }
        let mut update_model = true;
        if !self.run_fast_path(tcp, rs, sample_bw, &mut update_model) {
            if update_model {
                self.update_model(tcp, rs, sample_bw);
            }
            self.update_gains();
            let bw = self.bw();
            self.set_pacing_rate(tcp, bw, self.pacing_gain);
            self.set_cwnd(tcp, rs.acked_sacked, bw, self.cwnd_gain);
            self.bound_cwnd_for_inflight_model(tcp);
        }
        if self.p.is_v3() {
            self.advance_latest_delivery_signals(rs, sample_bw);
        }
        self.prev_ca_state = tcp.ca_state;
        self.loss_in_cycle |= rs.lost > 0;
        self.ecn_in_cycle |= rs.delivered_ce > 0;
        true
    }

    /// `bbr_skb_marked_lost`.
    fn skb_marked_lost(&mut self, tcp: &TcpState, pkt: &LostPacket) {
        self.on_skb_marked_lost(tcp, pkt);
    }

    /// v3 `.tso_segs` takes at least `sysctl_tcp_min_tso_segs` (2); v2alpha
    /// keeps v1's `bbr_min_tso_segs` (1 below 1.2 Mbit/s).
    fn min_tso_segs(&self, tcp: &TcpState) -> Option<u32> {
        Some(self.min_tso_segs_for(tcp))
    }

    fn needs_pacing(&self) -> bool {
        true
    }
    fn has_cong_control(&self) -> bool {
        true
    }

    /// `bbr_sndbuf_expand`, the same 3 in google/bbr v2alpha and v3 as in v1.
    fn sndbuf_expand(&self) -> Option<u32> {
        Some(3)
    }

    /// As `bbr_get_info`: bw (bits/s here), min_rtt, pacing gain, phase.
    fn telemetry(&self, tcp: &TcpState) -> CcTelemetry {
        let bytes_per_sec = (self.bw() as u128 * tcp.mss_bytes as u128 * USEC_PER_SEC as u128) >> BW_SCALE;
        CcTelemetry {
            mode: self.mode_name(),
            bw_estimate_bps: Some((bytes_per_sec * 8) as u64),
            min_rtt: (self.min_rtt_us != NO_MIN_RTT_US).then(|| SimDuration::from_micros(self.min_rtt_us)),
            pacing_gain: Some(self.pacing_gain as f64 / BBR_UNIT as f64),
            // Only where it uses ECN (bbr_can_use_ecn) does alpha mean anything.
            ecn_alpha: self.ecn_eligible.then(|| self.ecn_alpha as f64 / BBR_UNIT as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::Harness;
    use super::*;

    #[test]
    fn v3_starts_at_a_pacing_gain_of_4_ln2_and_a_cwnd_gain_of_2() {
        let h = Harness::new(Params::V3);
        assert_eq!(h.bbr.mode_name(), "startup");
        assert_eq!(h.bbr.pacing_gain, 710);
        assert_eq!(h.bbr.cwnd_gain, 512);
        // 10 packets / 100 ms at 710/256, 1% margin: 167772 * 1000 * 710 >> 8 ...
        let expected = Bbr3::pacing_rate_bytes_per_sec(&h.tcp, 10 * crate::bbr::BW_UNIT / 100_000, 710);
        assert_eq!(h.tcp.pacing_rate_bytes_per_sec, expected);
        assert!(h.bbr.needs_pacing());
    }

    #[test]
    fn undoing_a_spurious_recovery_restores_the_bounds_saved_at_its_start() {
        let mut h = Harness::cruising(Params::V3);
        h.bbr.inflight_hi = 300;
        h.tcp.snd_cwnd = 180;
        assert_eq!(h.bbr.ssthresh(&h.tcp), h.tcp.snd_ssthresh);
        // The recovery's loss round cut the model.
        h.bbr.inflight_hi = 150;
        h.bbr.inflight_lo = 120;
        h.bbr.bw_lo = 10_000;
        assert_eq!(h.bbr.undo_cwnd(), 180);
        assert_eq!(h.bbr.inflight_hi, 300);
        assert_eq!((h.bbr.inflight_lo, h.bbr.bw_lo), (UNSET, UNSET_BW));
    }

    #[test]
    fn telemetry_names_the_probe_bw_phase() {
        let mut h = Harness::cruising(Params::V3);
        assert_eq!(h.bbr.telemetry(&h.tcp).mode, "probe_bw_cruise");
        h.bbr.cycle_idx = Phase::Refill;
        assert_eq!(h.bbr.telemetry(&h.tcp).mode, "probe_bw_refill");
        assert_eq!(h.bbr.telemetry(&h.tcp).min_rtt, Some(SimDuration::from_millis(100)));
    }
}
