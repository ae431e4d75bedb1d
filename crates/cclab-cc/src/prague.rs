//! TCP Prague as the L4STeam tree runs it (L4STeam/linux `net/ipv4/tcp_prague.c`,
//! MODULE_VERSION 0.7; draft-briscoe-iccrg-prague-congestion-control): the scalable
//! congestion control of L4S (RFC 9330, RFC 9331).
//!
//! - It sends ECT(1) and needs Accurate ECN feedback (RFC 9768): the exact count of
//!   CE-marked packets per ACK (`RateSample::ece_delta`). Without ECN it is Reno.
//! - The window is fractional (`frac_cwnd`, packets x 2^20); `snd_cwnd` follows it by one
//!   packet per ACK, and each step down also lowers ssthresh (`prague_update_cwnd`).
//! - alpha, the EWMA (g = 1/16) of the fraction of CE-marked packets, moves once per round
//!   (and, once RTT-independent, at most once per 25 ms); it starts at 0 and the first
//!   CE halves the window instead (`prague_alpha_mode` 0).
//! - Entering CWR (an ACK with CE, at most once per round and per 25 ms) takes
//!   alpha / 2 of the window (`prague_enter_cwr`); a loss halves it (`prague_enter_loss`).
//! - The additive increase counts only the packets that were not CE-marked, 1 packet per
//!   RTT scaled to 1500-byte packets and, 4 rounds after slow start on paths under 25 ms,
//!   by (srtt / 25 ms)^2: the same rate of growth whatever the RTT (`prague_ai_ack_increase`).
//! - It paces at cwnd x MTU / srtt (2x while cwnd < ssthresh / 2) in bursts of about 244 us
//!   (`prague_update_pacing_rate`, `prague_tso_segs`).
//!
//! Left out, by name: the rate-based mode (`cwnd_mode` 1) that replaces the window once it
//! is at most 4 x 1500 bytes after the first CE, and the MTU adaptation that shrinks the
//! MSS when the virtual window is under 2 packets; both matter only for windows of a few
//! packets. `hsrtt` is kept for the undo's rate-to-window conversion.

use crate::reno::{tcp_slow_start, Reno};
use crate::{CaState, CcTelemetry, CongestionControl, CwndEvent, RateSample, SimTime, TcpState};

/// `PRAGUE_ALPHA_BITS`: alpha is a fraction x 2^24.
const ALPHA_BITS: u32 = 24;
const MAX_ALPHA: u64 = 1 << ALPHA_BITS;
/// `PRAGUE_SHIFT_G`: g = 1/16.
const SHIFT_G: u32 = 4;
/// `CWND_UNIT`: frac_cwnd is packets x 2^20.
const CWND_UNIT: u32 = 20;
const ONE_CWND: u64 = 1 << CWND_UNIT;
/// `MIN_CWND_RTT`: snd_cwnd never goes below 2 packets.
const MIN_CWND_PKTS: u32 = 2;
/// `MINIMUM_RATE`: 100 kbit/s, in bytes per second.
const MINIMUM_RATE_BYTES_PER_SEC: u64 = 12_500;
/// `prague_rtt_transition`: rounds after slow start before RTT independence.
const RTT_TRANSITION_ROUNDS: u32 = 4;
/// `prague_rtt_target`: 25 ms, in microseconds.
const RTT_TARGET_US: u64 = 25_000;
/// `MAX_SCALED_RTT`: above 100 ms the increase is not scaled.
const MAX_SCALED_RTT_US: u64 = 100_000;
/// `MTU_SYS`: the increase is normalised to 1500-byte packets.
const MTU_SYS_BYTES: u64 = 1500;
/// `HSRTT_SHIFT`: hsrtt is an EWMA of srtt with gain 1/128.
const HSRTT_SHIFT: u32 = 7;
/// `RTT2SEC_SHIFT`: rate x (8 x us) >> 23 is about rate x seconds.
const RTT2SEC_SHIFT: u32 = 23;
/// `prague_burst_shift`: a burst is 1/2^12 s (~244 us) at the pacing rate.
const BURST_SHIFT: u32 = 12;
/// `tcp_mss_to_mtu`: TCP (20 + 12 of timestamps) and IPv4 (20) headers.
const HEADER_BYTES: u64 = 52;

#[derive(Clone, Debug)]
pub struct Prague {
    cwr_stamp: SimTime,
    alpha_stamp: SimTime,
    /// alpha x 2^24 x 16 (`upscaled_alpha`: the residual of each EWMA step carries over).
    upscaled_alpha: u64,
    /// The per-RTT increase in packets x 2^20.
    ai_ack_increase: u64,
    /// srtt in 8 x us, x 128 (`hsrtt_us`).
    hsrtt: u64,
    frac_cwnd: u64,
    rate_bytes_per_sec: u64,
    loss_rate_bytes_per_sec: u64,
    loss_cwnd: u32,
    max_tso_burst: u32,
    old_delivered: u64,
    old_delivered_ce: u64,
    next_seq: u64,
    round: u32,
    saw_ce: bool,
    in_loss: bool,
    /// `prague_reno`: ECN was not negotiated.
    fallback_to_reno: bool,
}

impl Default for Prague {
    fn default() -> Self {
        Prague {
            cwr_stamp: SimTime::ZERO,
            alpha_stamp: SimTime::ZERO,
            upscaled_alpha: 0,
            ai_ack_increase: ONE_CWND,
            hsrtt: 8 << HSRTT_SHIFT,
            frac_cwnd: 0,
            rate_bytes_per_sec: MINIMUM_RATE_BYTES_PER_SEC,
            loss_rate_bytes_per_sec: 0,
            loss_cwnd: 0,
            max_tso_burst: 1,
            old_delivered: 0,
            old_delivered_ce: 0,
            next_seq: 0,
            round: 0,
            saw_ce: false,
            in_loss: false,
            fallback_to_reno: false,
        }
    }
}

/// `tp->srtt_us`: the smoothed RTT in units of 1/8 us.
fn srtt_us8(tcp: &TcpState) -> u64 {
    tcp.srtt.as_nanos() * 8 / 1000
}

fn mtu_bytes(tcp: &TcpState) -> u64 {
    tcp.mss_bytes as u64 + HEADER_BYTES
}

fn div_round_closest(a: u128, b: u128) -> u128 {
    (a + b / 2) / b
}

impl Prague {
    /// alpha as a fraction in [0, 1].
    pub fn alpha(&self) -> f64 {
        (self.upscaled_alpha >> SHIFT_G) as f64 / MAX_ALPHA as f64
    }

    /// `prague_is_rtt_indep`.
    fn rtt_independent(&self, tcp: &TcpState) -> bool {
        !tcp.in_slow_start() && self.round >= RTT_TRANSITION_ROUNDS
    }

    /// `prague_frac_cwnd_to_snd_cwnd`: the window rounded up, at least 2 packets.
    fn snd_cwnd_of_frac(&self, tcp: &TcpState) -> u32 {
        (((self.frac_cwnd + ONE_CWND - 1) >> CWND_UNIT) as u32).max(MIN_CWND_PKTS).min(tcp.snd_cwnd_clamp)
    }

    /// `prague_frac_cwnd_to_pacing_rate`: frac_cwnd x MTU / srtt.
    fn pacing_rate_of_frac(&self, tcp: &TcpState) -> u64 {
        let mut per_packet = 8_000_000 * mtu_bytes(tcp);
        let srtt = srtt_us8(tcp);
        if srtt > 0 {
            per_packet /= srtt;
        }
        ((per_packet as u128 * self.frac_cwnd as u128) >> CWND_UNIT).max(MINIMUM_RATE_BYTES_PER_SEC as u128) as u64
    }

    /// `prague_pacing_rate_to_frac_cwnd`: rate x hsrtt / MTU.
    fn frac_of_pacing_rate(&self, tcp: &TcpState) -> u64 {
        let rtt = match self.hsrtt >> HSRTT_SHIFT {
            0 => srtt_us8(tcp),
            r => r,
        };
        let bytes = (self.rate_bytes_per_sec as u128 * rtt as u128) >> (RTT2SEC_SHIFT - CWND_UNIT);
        bytes.div_ceil(mtu_bytes(tcp) as u128) as u64
    }

    /// `prague_ai_ack_increase`: one packet per RTT, or (srtt / 25 ms)^2 of one once RTT-independent.
    fn update_ai_ack_increase(&mut self, tcp: &TcpState) {
        let rtt = srtt_us8(tcp);
        let target = RTT_TARGET_US << 3;
        self.ai_ack_increase = if self.round < RTT_TRANSITION_ROUNDS || rtt == 0 || rtt > MAX_SCALED_RTT_US << 3 || rtt >= target {
            ONE_CWND
        } else {
            div_round_closest(((rtt as u128) << CWND_UNIT) * rtt as u128, target as u128 * target as u128) as u64
        };
    }

    /// `prague_new_round`.
    fn new_round(&mut self, tcp: &TcpState) {
        self.next_seq = tcp.snd_nxt;
        self.old_delivered_ce = tcp.delivered_ce;
        self.old_delivered = tcp.delivered;
        if !tcp.in_slow_start() {
            self.round = self.round.wrapping_add(1);
            if self.round == 0 {
                self.round = RTT_TRANSITION_ROUNDS;
            }
        }
        self.update_ai_ack_increase(tcp);
    }

    /// `prague_should_update_ewma`: a round has passed and, once RTT-independent, 25 ms too.
    fn should_update_alpha(&self, tcp: &TcpState) -> bool {
        tcp.snd_una >= self.next_seq
            && (!self.rtt_independent(tcp) || tcp.now.saturating_since(self.alpha_stamp).as_micros() >= RTT_TARGET_US)
    }

    /// `prague_update_alpha`: no alpha before the first CE; then the EWMA of the round's
    /// marked fraction, kept x 16 so each step's remainder carries over.
    fn update_alpha(&mut self, tcp: &TcpState) {
        if self.saw_ce {
            let mut ecn_segs = tcp.delivered_ce - self.old_delivered_ce;
            if ecn_segs > 0 {
                let acked = (tcp.delivered - self.old_delivered).max(1);
                ecn_segs = (ecn_segs << ALPHA_BITS) / acked;
            }
            let alpha = self.upscaled_alpha - (self.upscaled_alpha >> SHIFT_G) + ecn_segs;
            self.alpha_stamp = tcp.now;
            self.upscaled_alpha = alpha.min(MAX_ALPHA << SHIFT_G);
        }
        self.hsrtt = self.hsrtt + srtt_us8(tcp) - (self.hsrtt >> HSRTT_SHIFT);
        self.new_round(tcp);
    }

    /// `prague_update_cwnd`: the first CE halves; unmarked packets grow the window (Reno's
    /// slow start, then the scaled additive increase); snd_cwnd steps one packet toward it.
    fn update_cwnd(&mut self, tcp: &mut TcpState, rs: &RateSample) {
        let mut acked = rs.acked_sacked as i64;
        if rs.ece_delta > 0 {
            if !self.saw_ce {
                self.frac_cwnd = (self.frac_cwnd + 1) >> 1;
            }
            self.saw_ce = true;
            acked -= rs.ece_delta as i64;
        }
        if acked > 0 && !self.in_loss && tcp.is_cwnd_limited {
            let mut acked = acked as u64;
            if tcp.in_slow_start() {
                acked = tcp_slow_start(tcp, acked as u32) as u64;
                self.frac_cwnd = (tcp.snd_cwnd as u64) << CWND_UNIT;
                if acked == 0 {
                    self.update_ai_ack_increase(tcp);
                    return;
                }
            }
            let mut increase = acked as u128 * self.ai_ack_increase as u128;
            if self.frac_cwnd > 0 {
                increase = div_round_closest(increase << CWND_UNIT, self.frac_cwnd as u128);
            }
            let increase = (increase * MTU_SYS_BYTES as u128 / mtu_bytes(tcp) as u128) as u64;
            self.frac_cwnd += acked.max(increase);
            self.rate_bytes_per_sec = (self.rate_bytes_per_sec + acked).max(self.pacing_rate_of_frac(tcp));
        }
        let target = self.snd_cwnd_of_frac(tcp);
        if tcp.snd_cwnd > target {
            tcp.snd_cwnd -= 1;
            tcp.snd_ssthresh = tcp.snd_cwnd;
            self.update_ai_ack_increase(tcp);
        } else if tcp.snd_cwnd < target {
            tcp.snd_cwnd += 1;
            self.update_ai_ack_increase(tcp);
        }
    }

    /// `prague_update_pacing_rate`.
    fn update_pacing_rate(&mut self, tcp: &mut TcpState) {
        let mtu = mtu_bytes(tcp);
        let max_inflight = (self.frac_cwnd >> CWND_UNIT).max(tcp.packets_in_flight as u64);
        let mut per_packet = 8_000_000 * mtu;
        let srtt = srtt_us8(tcp);
        if srtt > 0 {
            per_packet /= srtt;
        }
        let mut rate = (per_packet * max_inflight).max(MINIMUM_RATE_BYTES_PER_SEC);
        self.rate_bytes_per_sec = rate;
        if tcp.snd_cwnd < tcp.snd_ssthresh / 2 {
            rate <<= 1;
        }
        self.max_tso_burst = (((rate / mtu) >> BURST_SHIFT) as u32).max(1);
        // The CC's rate is in bytes of packets on the wire; TCP paces payload bytes.
        tcp.pacing_rate_bytes_per_sec = rate * tcp.mss_bytes as u64 / mtu;
    }

    /// `prague_enter_loss`: halve, and hold the increase until the state is Open again.
    fn enter_loss(&mut self, tcp: &TcpState) {
        self.loss_cwnd = tcp.snd_cwnd;
        self.loss_rate_bytes_per_sec = self.rate_bytes_per_sec;
        self.frac_cwnd -= self.frac_cwnd >> 1;
        self.rate_bytes_per_sec = self.pacing_rate_of_frac(tcp);
        self.in_loss = true;
    }

    /// `prague_enter_cwr`: take alpha / 2 of the window, at most once per 25 ms once
    /// RTT-independent (TCP itself enters CWR at most once per round).
    fn enter_cwr(&mut self, tcp: &TcpState) {
        if self.rtt_independent(tcp) && tcp.now.saturating_since(self.cwr_stamp).as_micros() < RTT_TARGET_US {
            return;
        }
        self.cwr_stamp = tcp.now;
        let alpha = (self.upscaled_alpha >> SHIFT_G) as u128;
        // + 2^24 before >> 25: the rounding of x / 2 made unbiased.
        let reduction = ((alpha * self.frac_cwnd as u128 + MAX_ALPHA as u128) >> (ALPHA_BITS + 1)) as u64;
        self.frac_cwnd -= reduction;
        self.rate_bytes_per_sec = self.pacing_rate_of_frac(tcp);
    }

    /// `prague_cwnd_undo`. Not a trait hook yet (the simulator undoes no reduction), as BBR's.
    pub fn undo_cwnd(&mut self, tcp: &TcpState) -> u32 {
        self.in_loss = false;
        self.rate_bytes_per_sec = self.rate_bytes_per_sec.max(self.loss_rate_bytes_per_sec);
        self.frac_cwnd = self.frac_of_pacing_rate(tcp);
        self.loss_cwnd.max(tcp.snd_cwnd)
    }
}

impl CongestionControl for Prague {
    /// `prague_init`, at the end of the handshake.
    fn init(&mut self, tcp: &mut TcpState) {
        if !tcp.ecn_ok {
            self.fallback_to_reno = true;
            return;
        }
        self.alpha_stamp = tcp.now;
        self.upscaled_alpha = 0;
        self.frac_cwnd = (tcp.snd_cwnd as u64) << CWND_UNIT;
        self.max_tso_burst = 1;
        let srtt = srtt_us8(tcp);
        self.rate_bytes_per_sec = if srtt > 0 {
            (8_000_000 * mtu_bytes(tcp) / srtt * tcp.snd_cwnd.max(tcp.packets_in_flight) as u64).max(MINIMUM_RATE_BYTES_PER_SEC)
        } else {
            MINIMUM_RATE_BYTES_PER_SEC
        };
        self.update_pacing_rate(tcp);
        self.round = 0;
        self.saw_ce = tcp.delivered_ce > 0;
        self.hsrtt = if srtt > 0 { srtt << HSRTT_SHIFT } else { 8 << HSRTT_SHIFT };
        self.new_round(tcp);
    }

    /// `prague_ssthresh`: the reduction is the CC's own (enter_cwr, enter_loss).
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        if self.fallback_to_reno {
            return Reno.ssthresh(tcp);
        }
        tcp.snd_ssthresh
    }

    fn cong_avoid(&mut self, tcp: &mut TcpState, ack_seq: u64, acked_pkts: u32) {
        if self.fallback_to_reno {
            Reno.cong_avoid(tcp, ack_seq, acked_pkts);
        }
    }

    /// `prague_state`.
    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        if self.fallback_to_reno || new_state == tcp.ca_state {
            return;
        }
        match new_state {
            CaState::Recovery => self.enter_loss(tcp),
            CaState::Cwr => self.enter_cwr(tcp),
            CaState::Open => self.in_loss = false,
            _ => {}
        }
    }

    /// `prague_cwnd_event`: a timeout is a loss.
    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        if !self.fallback_to_reno && event == CwndEvent::Loss {
            self.enter_loss(tcp);
        }
    }

    /// `prague_cong_control`.
    fn cong_control(&mut self, tcp: &mut TcpState, rs: &RateSample) -> bool {
        if self.fallback_to_reno {
            return false;
        }
        self.update_cwnd(tcp, rs);
        if self.should_update_alpha(tcp) {
            self.update_alpha(tcp);
        }
        self.update_pacing_rate(tcp);
        true
    }

    /// `prague_tso_segs`: about 244 us at the pacing rate.
    fn tso_segs(&self, _tcp: &TcpState) -> Option<u32> {
        (!self.fallback_to_reno).then_some(self.max_tso_burst)
    }

    fn needs_pacing(&self) -> bool {
        !self.fallback_to_reno
    }
    fn has_cong_control(&self) -> bool {
        true
    }

    fn needs_ecn(&self) -> bool {
        !self.fallback_to_reno
    }

    /// `TCP_CONG_NEEDS_ACCECN | TCP_CONG_WANTS_ECT_1`.
    fn needs_accecn(&self) -> bool {
        !self.fallback_to_reno
    }

    fn telemetry(&self, tcp: &TcpState) -> CcTelemetry {
        CcTelemetry { ecn_alpha: (!self.fallback_to_reno).then(|| self.alpha()), ..CcTelemetry::window_based(tcp) }
    }
}

#[cfg(test)]
#[path = "prague_tests.rs"]
mod tests;
