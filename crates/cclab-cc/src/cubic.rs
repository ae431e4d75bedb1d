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
mod tests {
    use super::*;
    use crate::hystart::HystartExit;
    use crate::{SimDuration, INFINITE_SSTHRESH};

    /// RFC 9438 §4.1.1 constants, for expected values computed from the RFC's formulas.
    const RFC_C: f64 = 0.4;
    const RFC_BETA: f64 = 0.7;

    fn secs(s: f64) -> SimTime {
        SimTime((s * 1e9) as u64)
    }

    fn tcp_with(cwnd: u32, ssthresh: u32) -> TcpState {
        let mut tcp = TcpState::new(1448);
        tcp.snd_cwnd = cwnd;
        tcp.snd_ssthresh = ssthresh;
        tcp.is_cwnd_limited = true;
        tcp
    }

    fn sample(rtt: SimDuration) -> AckSample {
        AckSample { pkts_acked: 1, rtt: Some(rtt), in_flight: 0 }
    }

    /// A CUBIC that has seen `rtt` as its minimum RTT and then a loss at
    /// `w_max` packets; `tcp` ends with cwnd = ssthresh, as after recovery.
    fn after_loss_at(w_max: u32, rtt: SimDuration, config: CubicConfig) -> (Cubic, TcpState) {
        let mut cc = Cubic::new(config);
        let mut tcp = tcp_with(w_max, INFINITE_SSTHRESH);
        cc.init(&mut tcp);
        cc.pkts_acked(&mut tcp, &sample(rtt));
        let ssthresh = cc.ssthresh(&tcp);
        tcp.snd_cwnd = ssthresh;
        tcp.snd_ssthresh = ssthresh;
        (cc, tcp)
    }

    /// One window acked per RTT, ACKs evenly spaced, one packet each, every
    /// ACK an RTT sample of `rtt`. Returns (seconds since start, cwnd) at the
    /// start of each round.
    fn ack_clock(
        cc: &mut Cubic,
        tcp: &mut TcpState,
        rtt: SimDuration,
        duration_s: f64,
    ) -> Vec<(f64, u32)> {
        let start = tcp.now;
        let mut rounds = Vec::new();
        while (tcp.now - start).as_secs_f64() < duration_s {
            rounds.push(((tcp.now - start).as_secs_f64(), tcp.snd_cwnd));
            let acks = tcp.snd_cwnd as u64;
            for _ in 0..acks {
                tcp.now += SimDuration(rtt.as_nanos() / acks);
                tcp.snd_una += 1;
                tcp.snd_nxt = tcp.snd_una + tcp.snd_cwnd as u64;
                cc.pkts_acked(tcp, &sample(rtt));
                let ack_seq = tcp.snd_una;
                cc.cong_avoid(tcp, ack_seq, 1);
            }
        }
        rounds
    }

    /// RFC 9438 §4.2: W_cubic(t) = C (t - K)^3 + W_max, K = cbrt(W_max (1 - beta) / C).
    fn rfc_w_cubic(w_max: f64, t_s: f64) -> f64 {
        let k = (w_max * (1.0 - RFC_BETA) / RFC_C).cbrt();
        RFC_C * (t_s - k).powi(3) + w_max
    }

    #[test]
    fn k_is_the_cube_root_of_w_max_times_one_minus_beta_over_c() {
        // Tolerance 3 ms: Linux's C = 410/1024 (not 0.4) shifts K by 0.03%
        // (1.4 ms at 4.2 s), beta = 717/1024 and integer cwnd_epoch change
        // W_max - cwnd_epoch by < 0.1%, and K is floored to 1/1024 s (< 1 ms).
        for (w_max, tolerance_s) in [(100u32, 0.003), (1000, 0.006)] {
            let (mut cc, mut tcp) =
                after_loss_at(w_max, SimDuration::from_millis(100), CubicConfig::default());
            tcp.now = secs(10.0);
            cc.cong_avoid(&mut tcp, 0, 1);
            let k_s = cc.k_bic_ticks as f64 / 1024.0;
            let rfc_k_s = (w_max as f64 * (1.0 - RFC_BETA) / RFC_C).cbrt();
            assert!(
                (k_s - rfc_k_s).abs() < tolerance_s,
                "W_max {w_max}: K {k_s} s, RFC {rfc_k_s} s"
            );
            assert_eq!(cc.origin_point_pkts, w_max);
        }
    }

    #[test]
    fn the_window_curve_matches_c_times_t_minus_k_cubed_plus_w_max() {
        let (mut cc, mut tcp) =
            after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
        tcp.now = secs(10.0);
        cc.cong_avoid(&mut tcp, 0, 1);
        let rfc_k_s = (100.0 * (1.0 - RFC_BETA) / RFC_C).cbrt();
        // Tolerance 1.1 packets: Linux truncates C(t-K)^3 to whole packets
        // (< 1), its C differs from 0.4 by 0.1% of |W - W_max| <= 30 (0.03),
        // and K's < 3 ms error moves W by at most 21 pkt/s x 3 ms (0.06).
        for t_s in [0.0, 1.0, 2.0, 3.0, rfc_k_s, rfc_k_s + 1.0, rfc_k_s + 2.0, rfc_k_s + 3.0] {
            let got = cc.w_cubic_pkts((t_s * 1024.0).round() as u64) as f64;
            let want = rfc_w_cubic(100.0, t_s);
            assert!((got - want).abs() < 1.1, "t = {t_s} s: W {got}, RFC {want}");
        }
    }

    #[test]
    fn the_curve_is_read_one_minimum_rtt_ahead_of_the_epoch_clock() {
        // delay_min 1 s: at the epoch's first ACK the target is W(1 s) = 86.7,
        // not W(0) = 70, so cwnd grows 1 packet per 70 / 16.7 = 4 acked
        // (Linux's target is truncated toward W_max, 86 or 87: cnt 4 either way).
        let (mut cc, mut tcp) =
            after_loss_at(100, SimDuration::from_secs(1), CubicConfig::default());
        tcp.now = secs(10.0);
        cc.cong_avoid(&mut tcp, 0, 1);
        let want = 70.0 / (rfc_w_cubic(100.0, 1.0) - 70.0);
        assert_eq!(cc.cnt, want as u32);
    }

    #[test]
    fn cwnd_follows_the_cubic_curve_through_an_epoch() {
        let rtt = SimDuration::from_millis(100);
        let (mut cc, mut tcp) = after_loss_at(100, rtt, CubicConfig::default());
        tcp.now = secs(10.0);
        let rounds = ack_clock(&mut cc, &mut tcp, rtt, 6.0);
        // Linux aims each ACK at W(t + RTT) and closes the gap over one RTT,
        // so cwnd at a round start lies between W(t) and W(t + RTT), give or
        // take whole packets: below K the truncated C(t-K)^3 rounds the target
        // up toward W_max (< +1); cwnd is an integer and cnt = cwnd / (target
        // - cwnd) is floored (< -2 below).
        for &(t_s, cwnd) in &rounds {
            let low = rfc_w_cubic(100.0, t_s) - 2.0;
            let high = rfc_w_cubic(100.0, t_s + 0.1) + 1.0;
            assert!(
                low <= cwnd as f64 && cwnd as f64 <= high,
                "t {t_s:.1} s: cwnd {cwnd} not in [{low:.1}, {high:.1}]"
            );
        }
        assert!(rounds.last().unwrap().1 > 100, "past K the convex region probes beyond W_max");
    }

    #[test]
    fn fast_convergence_lowers_w_max_when_cwnd_fell_short_of_the_last_one() {
        let mut cc = Cubic::new(CubicConfig::default());
        let mut tcp = tcp_with(100, INFINITE_SSTHRESH);
        cc.init(&mut tcp);
        cc.ssthresh(&tcp);
        assert_eq!(cc.w_max_pkts, 100);
        tcp.snd_cwnd = 80;
        cc.ssthresh(&tcp);
        // RFC 9438 §4.7: W_max = cwnd (1 + beta) / 2 = 68; Linux's 717/1024 gives 68.008, floored.
        let rfc = 80.0 * (1.0 + RFC_BETA) / 2.0;
        assert!((cc.w_max_pkts as f64 - rfc).abs() < 1.0, "W_max {} vs {rfc}", cc.w_max_pkts);
        // A window above the old W_max sets it outright.
        tcp.snd_cwnd = 120;
        cc.ssthresh(&tcp);
        assert_eq!(cc.w_max_pkts, 120);
    }

    #[test]
    fn without_fast_convergence_w_max_is_the_cwnd_at_loss() {
        let mut cc = Cubic::new(CubicConfig { fast_convergence: false, ..CubicConfig::default() });
        let mut tcp = tcp_with(100, INFINITE_SSTHRESH);
        cc.init(&mut tcp);
        cc.ssthresh(&tcp);
        tcp.snd_cwnd = 80;
        cc.ssthresh(&tcp);
        assert_eq!(cc.w_max_pkts, 80);
    }

    #[test]
    fn ssthresh_is_seven_tenths_of_cwnd_and_at_least_two() {
        let mut cc = Cubic::new(CubicConfig::default());
        assert_eq!(cc.ssthresh(&tcp_with(100, 0)), 70);
        assert_eq!(cc.ssthresh(&tcp_with(2, 0)), 2);
        // Linux's 717/1024 exceeds 0.7 by 0.00019, so floor(cwnd x 717/1024)
        // stays within one packet of 0.7 cwnd up to 5000 packets.
        for cwnd in 2..5000u32 {
            let got = cc.ssthresh(&tcp_with(cwnd, 0)) as f64;
            let rfc = (cwnd as f64 * RFC_BETA).max(2.0);
            assert!((got - rfc).abs() < 1.0, "cwnd {cwnd}: ssthresh {got}, 0.7 cwnd {rfc}");
        }
    }

    #[test]
    fn the_reno_friendly_region_takes_over_when_the_cubic_curve_is_below_renos_estimate() {
        // Small W_max, short RTT: Reno gains ~0.53 packet every 10 ms, while
        // the cubic curve needs K = 2.47 s just to climb back to W_max = 20.
        let rtt = SimDuration::from_millis(10);
        let (mut friendly, mut tcp) = after_loss_at(20, rtt, CubicConfig::default());
        let (mut pure, mut tcp_pure) = after_loss_at(
            20,
            rtt,
            CubicConfig { tcp_friendliness: false, ..CubicConfig::default() },
        );
        assert_eq!(tcp.snd_cwnd, 14);
        let rounds = ack_clock(&mut friendly, &mut tcp, rtt, 1.0);
        ack_clock(&mut pure, &mut tcp_pure, rtt, 1.0);

        // RFC 9438 §4.3: W_est grows alpha_cubic = 3(1 - beta)/(1 + beta)
        // per RTT from cwnd_epoch = 14, and cwnd follows it. Bounds:
        // above, Linux's alpha of 8/15 adds 0.4 packet over 100 RTTs and W_est
        // moves in whole packets (+1); below, also whole packets (-1), cwnd
        // trails W_est by one RTT of growth (-0.53), and Linux re-evaluates at
        // most every HZ/32 = 28 ms while cwnd is unchanged, holding back up to
        // 2.8 RTTs of W_est growth (-1.5).
        let alpha = 3.0 * (1.0 - RFC_BETA) / (1.0 + RFC_BETA);
        let w_est = 14.0 + alpha * rounds.len() as f64;
        let cwnd = tcp.snd_cwnd as f64;
        assert!(w_est - 3.0 <= cwnd && cwnd <= w_est + 1.4, "cwnd {cwnd} vs W_est {w_est:.1}");
        // Without the Reno-friendly region cwnd stays on the cubic curve, below W_max.
        let w_cubic = rfc_w_cubic(20.0, 1.0 + 0.01);
        assert!(tcp_pure.snd_cwnd < 20 && (tcp_pure.snd_cwnd as f64 - w_cubic).abs() < 2.0);
    }

    #[test]
    fn cwnd_grows_at_most_one_packet_per_two_acked() {
        let rtt = SimDuration::from_millis(100);
        let (mut cc, mut tcp) = after_loss_at(1000, rtt, CubicConfig::default());
        tcp.snd_cwnd = 100;
        tcp.snd_ssthresh = 100;
        tcp.now = secs(10.0);
        cc.cong_avoid(&mut tcp, 0, 1);
        // 30 s later the curve is thousands of packets above cwnd.
        tcp.now = secs(40.0);
        let before = tcp.snd_cwnd;
        for _ in 0..20 {
            cc.cong_avoid(&mut tcp, 0, 1);
        }
        assert_eq!(tcp.snd_cwnd, before + 10);
    }

    #[test]
    fn before_any_loss_congestion_avoidance_adds_at_least_one_packet_per_20_acked() {
        let mut cc = Cubic::new(CubicConfig::default());
        let mut tcp = tcp_with(100, 50);
        cc.init(&mut tcp);
        tcp.now = secs(1.0);
        for _ in 0..20 {
            cc.cong_avoid(&mut tcp, 0, 1);
        }
        assert_eq!(tcp.snd_cwnd, 101);
    }

    #[test]
    fn an_rto_forgets_w_max_so_the_next_curve_starts_flat_at_cwnd() {
        let (mut cc, mut tcp) =
            after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
        cc.set_state(&mut tcp, CaState::Loss);
        assert_eq!((cc.w_max_pkts, cc.delay_min_us), (0, 0));
        // RFC 9438 §4.8: after a timeout K = 0 and W_max = cwnd at the start of avoidance.
        tcp.snd_cwnd = 30;
        tcp.snd_ssthresh = 20;
        tcp.now = secs(5.0);
        cc.cong_avoid(&mut tcp, 0, 1);
        assert_eq!((cc.k_bic_ticks, cc.origin_point_pkts), (0, 30));
    }

    #[test]
    fn idle_time_before_a_tx_start_shifts_the_epoch() {
        let (mut cc, mut tcp) =
            after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
        tcp.now = secs(1.0);
        cc.cong_avoid(&mut tcp, 0, 1);
        assert_eq!(cc.epoch_start_jiffies, Some(250));
        // Last send at 2 s, sending again at 5 s: 3 s idle, epoch moves to 4 s.
        tcp.next_send_time = secs(2.0);
        tcp.now = secs(5.0);
        cc.cwnd_event(&mut tcp, CwndEvent::TxStart);
        assert_eq!(cc.epoch_start_jiffies, Some(1000));
        // The shift never puts the epoch in the future.
        tcp.next_send_time = secs(0.5);
        tcp.now = secs(6.0);
        cc.cwnd_event(&mut tcp, CwndEvent::TxStart);
        assert_eq!(cc.epoch_start_jiffies, Some(1500));
    }

    #[test]
    fn rtt_samples_in_the_first_second_of_an_epoch_do_not_lower_delay_min() {
        let (mut cc, mut tcp) =
            after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
        tcp.now = secs(10.0);
        cc.cong_avoid(&mut tcp, 0, 1);
        tcp.now = secs(10.9);
        cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(50)));
        assert_eq!(cc.delay_min_us, 100_000);
        tcp.now = secs(11.0);
        cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(50)));
        assert_eq!(cc.delay_min_us, 50_000);
    }

    /// Slow start from cwnd 16 with ACKs 5 ms apart (never an ACK train), the
    /// first round at `base_rtt`, later rounds at `later_rtt`. Returns the ACK
    /// number at which HyStart ended slow start, if it did within 80 ACKs.
    fn slow_start(base_rtt_us: u64, later_rtt_us: u64) -> (Cubic, TcpState, Option<u32>) {
        let mut cc = Cubic::new(CubicConfig::default());
        let mut tcp = tcp_with(16, INFINITE_SSTHRESH);
        tcp.snd_nxt = 16;
        cc.init(&mut tcp);
        for ack in 1..=80u32 {
            tcp.now += SimDuration::from_millis(5);
            tcp.snd_una += 1;
            let rtt_us = if tcp.snd_una <= 16 { base_rtt_us } else { later_rtt_us };
            cc.pkts_acked(&mut tcp, &sample(SimDuration::from_micros(rtt_us)));
            if cc.hystart.exit().is_some() {
                return (cc, tcp, Some(ack));
            }
            let ack_seq = tcp.snd_una;
            cc.cong_avoid(&mut tcp, ack_seq, 1);
            tcp.snd_nxt += 2;
        }
        (cc, tcp, None)
    }

    #[test]
    fn hystart_ends_slow_start_when_the_rtt_rises_past_the_delay_threshold() {
        // delay_min 100 ms: threshold 100 + clamp(100/8, 4, 16) = 112.5 ms.
        let (_, tcp, exit_ack) = slow_start(100_000, 113_000);
        // Round two starts at ACK 17; its 9th sample (ACK 25) is the first judged.
        assert_eq!(exit_ack, Some(25));
        // Exit sets ssthresh = cwnd (16 + 24 acked), ending slow start.
        assert_eq!(tcp.snd_ssthresh, 40);
        assert!(!tcp.in_slow_start());
    }

    #[test]
    fn hystart_keeps_slow_start_when_the_rtt_stays_below_the_delay_threshold() {
        let (cc, tcp, exit_ack) = slow_start(100_000, 112_000);
        assert_eq!(exit_ack, None);
        assert_eq!(cc.hystart.exit(), None);
        assert_eq!((tcp.snd_cwnd, tcp.snd_ssthresh), (96, INFINITE_SSTHRESH));
    }

    #[test]
    fn hystart_is_off_when_disabled() {
        // One round at 100 ms, then a round of 200 ms samples: a clear delay
        // increase that ends slow start only when HyStart is on.
        for hystart in [true, false] {
            let mut cc = Cubic::new(CubicConfig { hystart, ..CubicConfig::default() });
            let mut tcp = tcp_with(32, INFINITE_SSTHRESH);
            tcp.snd_nxt = 32;
            cc.init(&mut tcp);
            cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(100)));
            tcp.snd_una = 33;
            tcp.snd_nxt = 100;
            for _ in 0..20 {
                tcp.now += SimDuration::from_millis(5);
                cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(200)));
            }
            let exit = if hystart { Some(HystartExit::DelayIncrease) } else { None };
            assert_eq!(cc.hystart.exit(), exit);
            assert_eq!(tcp.snd_ssthresh == INFINITE_SSTHRESH, !hystart);
        }
    }

    #[test]
    fn cubic_root_is_the_exact_floor() {
        for x in [1u64, 2, 3, 10, 1000, 1 << 20, 2_642_245] {
            let cube = x * x * x;
            assert_eq!(cubic_root(cube), x);
            assert_eq!(cubic_root(cube - 1), x - 1);
            assert_eq!(cubic_root(cube + 1), x);
        }
        assert_eq!(cubic_root(0), 0);
        assert_eq!(cubic_root(u64::MAX), 2_642_245);
    }
}
