//! CUBIC, specified by RFC 9438 "CUBIC for Fast and Long-Distance Networks"
//! (August 2023), implemented as Linux `net/ipv4/tcp_cubic.c` v2.3 does it
//! (the file as of Linux 6.18; HyStart is in [`crate::hystart`]).
//!
//! Linux is the reference; where it departs from the RFC the spot says so.
//! Linux's fixed-point units and truncations are kept:
//! - windows in packets; `beta` in 1/1024 (`BICTCP_BETA_SCALE`);
//! - CUBIC time (t, K) in 1/1024 s ("bic ticks", `BICTCP_HZ` = 10 bits);
//! - the epoch clock in jiffies (`tcp_jiffies32`) at [`CubicConfig::hz`],
//!   derived from `TcpState::now` (ns) by truncation, so jiffy edges fall on
//!   multiples of 1/HZ since time zero; RTTs in microseconds.
//!
//! Deliberately not done as Linux does:
//! - `cubic_root`: Linux uses a 64-entry table plus one Newton step (about
//!   0.2% error on average); we take the exact integer cube root, so K can
//!   differ from Linux's by that approximation error (~10 ms at K = 4 s).
//! - Products that Linux lets wrap in `u32`/`u64` beyond its design range
//!   (cwnd > 1M packets, t - K > ~340 s) saturate here.
//! - No `undo_cwnd` (the trait has no undo hook; Linux uses the Reno one).

use crate::hystart::{Hystart, HystartParams};
use crate::reno::{tcp_cong_avoid_ai, tcp_slow_start};
use crate::time::NANOS_PER_SEC;
use crate::{AckSample, CaState, CongestionControl, CwndEvent, SimTime, TcpState};

/// `BICTCP_BETA_SCALE`: `beta` is in 1/1024.
pub const BETA_SCALE: u32 = 1024;
/// Module parameter `beta` = 717/1024 = 0.7002; RFC 9438 §4.1.1 beta_cubic = 0.7.
pub const DEFAULT_BETA: u32 = 717;
/// Module parameter `bic_scale` = 41: C = 41 * 10 / 1024 = 0.4004; RFC 9438 §4.1.1 C = 0.4.
pub const DEFAULT_BIC_SCALE: u32 = 41;
/// `BICTCP_HZ`: CUBIC time is kept in 1/2^10 s.
pub const BICTCP_HZ_SHIFT: u32 = 10;
/// `CONFIG_HZ`: the kernel's default (`HZ_250` in kernel/Kconfig.hz) and this
/// machine's kernel (6.18, `CONFIG_HZ=250`): a jiffy is 4 ms.
pub const DEFAULT_HZ: u32 = 250;
/// `bictcp_update`: with the target at or below cwnd, grow one packet per
/// 100 cwnd acked (0.01 packet per RTT).
const CNT_WHEN_AT_TARGET_PER_CWND: u32 = 100;
/// `bictcp_update`: with no W_max (before the first loss, or after an RTO),
/// grow at least 5% per RTT (cnt <= 20).
const MAX_CNT_BEFORE_FIRST_LOSS: u32 = 20;
/// `bictcp_update`: at most 1 packet per 2 acked, i.e. cwnd x 1.5 per RTT
/// (RFC 9438 §4.2 caps target at 1.5 cwnd).
const MIN_CNT: u32 = 2;
/// `bictcp_recalc_ssthresh`: ssthresh never below 2 packets (RFC 9438 §4.6 too).
const MIN_SSTHRESH_PKTS: u32 = 2;

/// Linux's `tcp_cubic` module parameters, with their defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct CubicConfig {
    /// `hystart`: hybrid slow start on.
    pub hystart: bool,
    /// `hystart_detect`, `hystart_low_window`, `hystart_ack_delta_us`.
    pub hystart_params: HystartParams,
    /// `fast_convergence` (RFC 9438 §4.7).
    pub fast_convergence: bool,
    /// `tcp_friendliness`: the Reno-friendly region (RFC 9438 §4.3).
    pub tcp_friendliness: bool,
    /// `beta`, in 1/1024.
    pub beta: u32,
    /// `bic_scale`: C x 1024 / 10.
    pub bic_scale: u32,
    /// `initial_ssthresh`, packets; 0 = none (Linux default). Only used without HyStart.
    pub initial_ssthresh_pkts: u32,
    /// `CONFIG_HZ`: jiffies per second, the resolution of CUBIC's epoch clock.
    pub hz: u32,
}

impl Default for CubicConfig {
    fn default() -> Self {
        CubicConfig {
            hystart: true,
            hystart_params: HystartParams::default(),
            fast_convergence: true,
            tcp_friendliness: true,
            beta: DEFAULT_BETA,
            bic_scale: DEFAULT_BIC_SCALE,
            initial_ssthresh_pkts: 0,
            hz: DEFAULT_HZ,
        }
    }
}

/// Linux `struct bictcp` (CUBIC's per-connection state), RFC names where they exist.
pub struct Cubic {
    cfg: CubicConfig,
    /// `beta_scale` = 8 (1024 + beta) / 3 / (1024 - beta) = 15 for beta 717.
    beta_scale: u32,
    /// `cube_rtt_scale` = bic_scale x 10 = C x 1024.
    cube_rtt_scale: u64,
    /// `cube_factor` = 2^40 / (bic_scale x 10) = 2^30 / C, for K in bic ticks.
    cube_factor: u64,
    /// `cnt`: packets to ack per 1-packet cwnd increase.
    cnt: u32,
    /// `last_max_cwnd`: RFC W_max, packets.
    w_max_pkts: u32,
    /// `last_cwnd`, `last_time`: cwnd and jiffy of the last curve evaluation.
    last_cwnd_pkts: u32,
    last_time_jiffies: u64,
    /// `bic_origin_point`: the plateau of this epoch's curve, packets.
    origin_point_pkts: u32,
    /// `bic_K`: RFC K, in bic ticks (1/1024 s).
    k_bic_ticks: u64,
    /// `delay_min`: minimum RTT, microseconds; 0 until the first sample.
    delay_min_us: u64,
    /// `epoch_start`: jiffy the current congestion-avoidance epoch began
    /// (Linux uses 0 for "none"; jiffy 0 is a real time here).
    epoch_start_jiffies: Option<u64>,
    /// `ack_cnt`: packets acked not yet converted into Reno-estimate growth.
    ack_cnt_pkts: u32,
    /// `tcp_cwnd`: RFC W_est, the Reno-friendly estimate, packets.
    w_est_pkts: u32,
    hystart: Hystart,
    /// Time of the last ACK, for TxStart when the sender keeps no send time.
    last_ack_time: SimTime,
}

impl Cubic {
    /// Linux `cubictcp_register` precomputes the scale factors here.
    pub fn new(mut config: CubicConfig) -> Self {
        config.beta = config.beta.min(BETA_SCALE - 1);
        config.hz = config.hz.max(1);
        let c_times_1024 = (config.bic_scale * 10).max(1) as u64;
        Cubic {
            beta_scale: 8 * (BETA_SCALE + config.beta) / 3 / (BETA_SCALE - config.beta),
            cube_rtt_scale: c_times_1024,
            cube_factor: (1u64 << (10 + 3 * BICTCP_HZ_SHIFT)) / c_times_1024,
            cnt: 0,
            w_max_pkts: 0,
            last_cwnd_pkts: 0,
            last_time_jiffies: 0,
            origin_point_pkts: 0,
            k_bic_ticks: 0,
            delay_min_us: 0,
            epoch_start_jiffies: None,
            ack_cnt_pkts: 0,
            w_est_pkts: 0,
            hystart: Hystart::new(config.hystart_params.clone()),
            last_ack_time: SimTime::ZERO,
            cfg: config,
        }
    }

    /// Linux `bictcp_reset`: forget everything but HyStart's round.
    fn reset(&mut self) {
        self.cnt = 0;
        self.w_max_pkts = 0;
        self.last_cwnd_pkts = 0;
        self.last_time_jiffies = 0;
        self.origin_point_pkts = 0;
        self.k_bic_ticks = 0;
        self.delay_min_us = 0;
        self.epoch_start_jiffies = None;
        self.ack_cnt_pkts = 0;
        self.w_est_pkts = 0;
    }

    /// `tcp_jiffies32` at `t`.
    fn jiffies(&self, t: SimTime) -> u64 {
        (t.as_nanos() as u128 * self.cfg.hz as u128 / NANOS_PER_SEC as u128) as u64
    }

    /// Linux `usecs_to_jiffies`, which rounds up.
    fn usecs_to_jiffies(&self, us: u64) -> u64 {
        (us as u128 * self.cfg.hz as u128).div_ceil(1_000_000) as u64
    }

    /// RFC 9438 §4.2, W_cubic(t) = C (t - K)^3 + W_max, for t in bic ticks
    /// since the epoch began. Linux: delta = cube_rtt_scale x |t - K|^3 >> 40,
    /// i.e. C x ((t - K) / 1024 s)^3, truncated to whole packets.
    fn w_cubic_pkts(&self, t_bic_ticks: u64) -> u32 {
        let offs = t_bic_ticks.abs_diff(self.k_bic_ticks) as u128;
        let delta =
            (self.cube_rtt_scale as u128 * offs * offs * offs) >> (10 + 3 * BICTCP_HZ_SHIFT);
        let delta = delta.min(u32::MAX as u128) as u32;
        if t_bic_ticks < self.k_bic_ticks {
            self.origin_point_pkts.saturating_sub(delta)
        } else {
            self.origin_point_pkts.saturating_add(delta)
        }
    }

    /// Linux `bictcp_update`: recompute `cnt`, the ACKs per cwnd increment.
    fn update(&mut self, now: SimTime, cwnd: u32, acked: u32) {
        self.ack_cnt_pkts = self.ack_cnt_pkts.saturating_add(acked);
        let now_jiffies = self.jiffies(now);

        // Unchanged cwnd: re-evaluate the curve only every HZ/32 jiffies.
        if self.last_cwnd_pkts == cwnd
            && now_jiffies.saturating_sub(self.last_time_jiffies) <= (self.cfg.hz / 32) as u64
        {
            return;
        }
        // At most once per jiffy; a new epoch (after any reduction) always evaluates.
        let evaluate_curve =
            !(self.epoch_start_jiffies.is_some() && now_jiffies == self.last_time_jiffies);
        if evaluate_curve {
            self.last_cwnd_pkts = cwnd;
            self.last_time_jiffies = now_jiffies;
            let epoch_start = match self.epoch_start_jiffies {
                Some(e) => e,
                None => self.start_epoch(now_jiffies, cwnd, acked),
            };
            // RFC 9438 §4.2 evaluates the target one RTT ahead, W_cubic(t + RTT);
            // Linux uses the minimum RTT, rounded up to a jiffy.
            let t_jiffies =
                now_jiffies.saturating_sub(epoch_start) + self.usecs_to_jiffies(self.delay_min_us);
            let t_bic_ticks = (t_jiffies << BICTCP_HZ_SHIFT) / self.cfg.hz as u64;
            let target = self.w_cubic_pkts(t_bic_ticks);

            // RFC 9438 §4.4/§4.5: cwnd += (target - cwnd) / cwnd per ACK, so
            // one packet per cwnd / (target - cwnd) acked. At or below target
            // the RFC holds cwnd still; Linux still creeps by 1/(100 cwnd).
            self.cnt = if target > cwnd {
                cwnd / (target - cwnd)
            } else {
                CNT_WHEN_AT_TARGET_PER_CWND.saturating_mul(cwnd)
            };
            // Linux only (not in the RFC): with no W_max (no loss yet, or
            // just after an RTO), at least 5% per RTT.
            if self.w_max_pkts == 0 {
                self.cnt = self.cnt.min(MAX_CNT_BEFORE_FIRST_LOSS);
            }
        }

        if self.cfg.tcp_friendliness {
            // RFC 9438 §4.3: W_est += alpha_cubic x acked / cwnd, with
            // alpha_cubic = 3 (1 - beta) / (1 + beta) = 0.529. Linux: one packet
            // per cwnd x beta_scale / 8 = cwnd x 15/8 acked (alpha = 8/15 = 0.533).
            // The RFC then raises alpha_cubic to 1 once W_est >= cwnd_prior;
            // Linux never does.
            let acks_per_increment = ((cwnd as u64 * self.beta_scale as u64) >> 3).max(1);
            let acked = self.ack_cnt_pkts as u64;
            if acked > acks_per_increment {
                // Linux subtracts in a loop while ack_cnt > delta: same result.
                let increments = (acked - 1) / acks_per_increment;
                self.ack_cnt_pkts = (acked - increments * acks_per_increment) as u32;
                self.w_est_pkts = self.w_est_pkts.saturating_add(increments as u32);
            }
            // RFC 9438 §4.3: if W_cubic < W_est, cwnd follows W_est; Linux
            // makes cwnd reach W_est within about one RTT.
            if self.w_est_pkts > cwnd {
                let max_cnt = cwnd / (self.w_est_pkts - cwnd);
                self.cnt = self.cnt.min(max_cnt);
            }
        }
        self.cnt = self.cnt.max(MIN_CNT);
    }

    /// The first curve evaluation after a reduction: place the curve.
    fn start_epoch(&mut self, now_jiffies: u64, cwnd: u32, acked: u32) -> u64 {
        self.epoch_start_jiffies = Some(now_jiffies);
        self.ack_cnt_pkts = acked;
        // RFC 9438 §4.3 starts W_est at cwnd_epoch.
        self.w_est_pkts = cwnd;
        if self.w_max_pkts <= cwnd {
            // At or past the old maximum (or none, e.g. after an RTO as RFC
            // 9438 §4.8 asks): the curve starts on its plateau, K = 0.
            self.k_bic_ticks = 0;
            self.origin_point_pkts = cwnd;
        } else {
            // RFC 9438 §4.2: K = cubic_root((W_max - cwnd_epoch) / C).
            // Linux: K = cubic_root(cube_factor x (W_max - cwnd)) in bic ticks.
            let k_cubed = self.cube_factor.saturating_mul((self.w_max_pkts - cwnd) as u64);
            self.k_bic_ticks = cubic_root(k_cubed);
            self.origin_point_pkts = self.w_max_pkts;
        }
        now_jiffies
    }
}

/// Floor of the cube root (Linux `cubic_root` approximates it, see the top).
pub fn cubic_root(a: u64) -> u64 {
    let mut x = (a as f64).cbrt() as u64;
    while x > 0 && (x as u128).pow(3) > a as u128 {
        x -= 1;
    }
    while ((x + 1) as u128).pow(3) <= a as u128 {
        x += 1;
    }
    x
}

impl CongestionControl for Cubic {
    /// Linux `cubictcp_init`.
    fn init(&mut self, tcp: &mut TcpState) {
        self.reset();
        self.hystart.restart(tcp);
        if !self.cfg.hystart && self.cfg.initial_ssthresh_pkts > 0 {
            tcp.snd_ssthresh = self.cfg.initial_ssthresh_pkts;
        }
    }

    /// Linux `cubictcp_recalc_ssthresh`: end the epoch, remember W_max, cut to beta.
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        let cwnd = tcp.snd_cwnd;
        self.epoch_start_jiffies = None;
        // RFC 9438 §4.7 fast convergence: if cwnd < W_max, another flow is
        // taking bandwidth; release some: W_max = cwnd (1 + beta) / 2.
        self.w_max_pkts = if cwnd < self.w_max_pkts && self.cfg.fast_convergence {
            ((cwnd as u64 * (BETA_SCALE + self.cfg.beta) as u64) / (2 * BETA_SCALE) as u64) as u32
        } else {
            cwnd
        };
        // RFC 9438 §4.6: ssthresh = flight_size x beta_cubic. Linux uses cwnd,
        // which the RFC accepts if cwnd cannot outgrow what is in flight (Linux
        // grows cwnd only when cwnd-limited).
        let ssthresh = (cwnd as u64 * self.cfg.beta as u64 / BETA_SCALE as u64) as u32;
        ssthresh.max(MIN_SSTHRESH_PKTS)
    }

    /// Linux `cubictcp_cong_avoid`.
    fn cong_avoid(&mut self, tcp: &mut TcpState, _ack_seq: u64, acked_pkts: u32) {
        self.last_ack_time = tcp.now;
        if !tcp.is_cwnd_limited {
            return;
        }
        let mut acked = acked_pkts;
        if tcp.in_slow_start() {
            acked = tcp_slow_start(tcp, acked);
            if acked == 0 {
                return;
            }
        }
        self.update(tcp.now, tcp.snd_cwnd, acked);
        tcp_cong_avoid_ai(tcp, self.cnt, acked);
    }

    /// Linux `cubictcp_acked`: track the minimum RTT and feed HyStart.
    fn pkts_acked(&mut self, tcp: &mut TcpState, sample: &AckSample) {
        self.last_ack_time = tcp.now;
        let Some(rtt) = sample.rtt else { return };
        // Linux discards samples for the first second of an epoch ("right
        // after fast recovery"), when queues may still be draining.
        if let Some(epoch) = self.epoch_start_jiffies {
            if self.jiffies(tcp.now).saturating_sub(epoch) < self.cfg.hz as u64 {
                return;
            }
        }
        let delay_us = rtt.as_micros().max(1);
        if self.delay_min_us == 0 || delay_us < self.delay_min_us {
            self.delay_min_us = delay_us;
        }
        if self.cfg.hystart && self.hystart.exit().is_none() && tcp.in_slow_start() {
            self.hystart.on_rtt_sample(tcp, delay_us, self.delay_min_us);
        }
    }

    /// Linux `cubictcp_state`: an RTO forgets W_max, delay_min and HyStart.
    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        if new_state == CaState::Loss {
            self.reset();
            self.hystart.restart(tcp);
        }
    }

    /// Linux `cubictcp_cwnd_event`: after idle, shift the epoch by the idle
    /// time so cwnd resumes the curve where it left it (RFC 9438 §5.8 asks
    /// not to count application-limited time in t).
    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        if event != CwndEvent::TxStart {
            return;
        }
        let Some(epoch) = self.epoch_start_jiffies else {
            return;
        };
        // Linux measures idle from `tp->lsndtime`, the last data send. The
        // sender's `next_send_time` (`tcp_wstamp_ns`) is that departure time
        // for an unpaced flow; if the sender never set it, the last ACK is the
        // closest later time we know (shifting up to one RTT less than Linux).
        let last_send = if tcp.next_send_time > SimTime::ZERO {
            tcp.next_send_time.min(tcp.now)
        } else {
            self.last_ack_time
        };
        let now_jiffies = self.jiffies(tcp.now);
        let idle_jiffies = now_jiffies.saturating_sub(self.jiffies(last_send));
        if idle_jiffies > 0 {
            self.epoch_start_jiffies = Some((epoch + idle_jiffies).min(now_jiffies));
        }
    }
}

#[cfg(test)]
#[path = "cubic_tests.rs"]
mod tests;
