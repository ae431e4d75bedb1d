//! PROBE_BW: DOWN (pacing gain 0.91 in v3, 0.75 in v2) until the queue is
//! drained, CRUISE at 1.0 with headroom below inflight_hi, REFILL at 1.0 for
//! one round with the lower bounds reset, then UP at 1.25 until the bw
//! plateaus (v3) or inflight reaches 1.25 x BDP (v2), inflight_hi is reached
//! after a risky probe, or loss/ECN is too high. The wait from DOWN to the
//! next REFILL is randomized: 2-3 s of wall clock, or fewer rounds when a Reno
//! flow at this BDP would probe sooner (v3 `bbr_update_cycle_phase`,
//! `bbr_check_time_to_probe_bw`, `bbr_check_time_to_cruise`,
//! `bbr_pick_probe_wait`, `bbr_is_reno_coexistence_probe_time`,
//! `bbr_start_bw_probe_{refill,up,down,cruise}`).

use super::{Bbr3, Mode, Version, UNSET};
use crate::bbr::{us, BBR_SCALE, BBR_UNIT};
use crate::{CaState, RateSample, TcpState};

/// `enum bbr_pacing_gain_phase`; the value indexes `Params::pacing_gain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Up = 0,
    Down = 1,
    Cruise = 2,
    Refill = 3,
}

/// `enum bbr_ack_phase`: what the arriving ACKs say about our probing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckPhase {
    Init,
    Refilling,
    ProbeStarting,
    ProbeFeedback,
    ProbeStopping,
}

impl Bbr3 {
    /// `bbr_has_elapsed_in_phase`: strictly more than `interval_us` since the phase began.
    fn has_elapsed_in_phase(&self, tcp: &TcpState, interval_us: u64) -> bool {
        us(tcp.now) > us(self.cycle_mstamp) + interval_us
    }

    /// `bbr_reset_full_bw`.
    pub(super) fn reset_full_bw(&mut self) {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.full_bw_now = false;
    }

    /// `bbr_set_cycle_idx`.
    fn set_cycle_idx(&mut self, phase: Phase) {
        self.cycle_idx = phase;
        self.try_fast_path = false;
    }

    /// `bbr_pick_probe_wait`: 0-1 extra rounds, and 2 s + up to 1 s.
    fn pick_probe_wait(&mut self) {
        self.rounds_since_probe = self.rng.below(self.p.bw_probe_rand_rounds);
        self.probe_wait_us = self.p.bw_probe_base_us + self.rng.below(self.p.bw_probe_rand_us) as u64;
    }

    /// `bbr_is_reno_coexistence_probe_time`: a Reno flow with our BDP would
    /// probe every BDP rounds; never wait more than 63.
    fn is_reno_coexistence_probe_time(&self, tcp: &TcpState) -> bool {
        let rounds = self.p.bw_probe_max_rounds.min(self.target_inflight(tcp));
        self.rounds_since_probe >= rounds
    }

    /// `bbr_start_bw_probe_refill`.
    pub(super) fn start_bw_probe_refill(&mut self, tcp: &TcpState, bw_probe_up_rounds: u32) {
        self.reset_lower_bounds();
        self.bw_probe_up_rounds = bw_probe_up_rounds;
        self.bw_probe_up_acks = 0;
        self.stopped_risky_probe = false;
        self.got_ok_bw_probe_sample = false;
        self.ack_phase = AckPhase::Refilling;
        self.next_rtt_delivered = tcp.delivered;
        self.set_cycle_idx(Phase::Refill);
    }

    /// `bbr_start_bw_probe_up`.
    fn start_bw_probe_up(&mut self, tcp: &TcpState, sample_bw: u64) {
        self.ack_phase = AckPhase::ProbeStarting;
        self.next_rtt_delivered = tcp.delivered;
        self.cycle_mstamp = tcp.now;
        if self.p.version == Version::V3 {
            self.reset_full_bw();
            self.full_bw = sample_bw;
        }
        self.set_cycle_idx(Phase::Up);
        self.raise_inflight_hi_slope(tcp);
    }

    /// `bbr_start_bw_probe_down`: start a cycle and its wall clock.
    pub(super) fn start_bw_probe_down(&mut self, tcp: &TcpState) {
        self.reset_congestion_signals();
        self.bw_probe_up_cnt = UNSET; // inflight_hi stops growing
        self.pick_probe_wait();
        self.cycle_mstamp = tcp.now;
        self.ack_phase = AckPhase::ProbeStopping;
        self.next_rtt_delivered = tcp.delivered;
        self.set_cycle_idx(Phase::Down);
    }

    /// `bbr_start_bw_probe_cruise`.
    pub(super) fn start_bw_probe_cruise(&mut self) {
        if self.inflight_lo != UNSET {
            self.inflight_lo = self.inflight_lo.min(self.inflight_hi);
        }
        self.set_cycle_idx(Phase::Cruise);
    }

    /// `bbr_check_time_to_probe_bw`: reprobe quickly once ECN marks cease
    /// (v3), or when the wall-clock wait or the Reno round count is up.
    fn check_time_to_probe_bw(&mut self, tcp: &TcpState) -> bool {
        if self.p.ecn_reprobe_gain > 0 && self.ecn_eligible && self.ecn_in_cycle && !self.loss_in_cycle && tcp.ca_state == CaState::Open {
            // n such that 2^n ~ inflight_hi x reprobe gain.
            let target = (self.inflight_hi as u64 * self.p.ecn_reprobe_gain as u64) >> BBR_SCALE;
            let n = if target == 0 { 0 } else { 63 - target.leading_zeros() };
            self.start_bw_probe_refill(tcp, n);
            return true;
        }
        if self.has_elapsed_in_phase(tcp, self.probe_wait_us) || self.is_reno_coexistence_probe_time(tcp) {
            self.start_bw_probe_refill(tcp, 0);
            return true;
        }
        false
    }

    /// `bbr_check_time_to_cruise`: inflight is below both the headroom and the BDP.
    fn check_time_to_cruise(&self, tcp: &TcpState, inflight: u32, bw: u64) -> bool {
        if inflight > self.inflight_with_headroom() {
            return false;
        }
        inflight <= self.inflight(tcp, bw, BBR_UNIT)
    }

    /// `bbr_update_cycle_phase`: the PROBE_BW state machine.
    pub(super) fn update_cycle_phase(&mut self, tcp: &mut TcpState, rs: &RateSample, sample_bw: u64) {
        if !self.full_bw_reached {
            return;
        }
        // DRAIN, PROBE_BW and PROBE_RTT all adapt the upper bounds.
        if self.adapt_upper_bounds(tcp, rs, sample_bw) {
            return;
        }
        if self.mode != Mode::ProbeBw {
            return;
        }
        let inflight = self.packets_in_net_at_edt(tcp, rs.prior_in_flight);
        let bw = self.max_bw();
        match self.cycle_idx {
            Phase::Cruise => {
                self.check_time_to_probe_bw(tcp);
            }
            Phase::Refill => {
                // After a round of refilling, samples start to reflect it.
                if self.round_start {
                    self.bw_probe_samples = true;
                    self.start_bw_probe_up(tcp, sample_bw);
                }
            }
            Phase::Up => {
                let mut done = false;
                if self.prev_probe_too_high && inflight >= self.inflight_hi {
                    // Back at the level that was too high last time: stop now.
                    self.stopped_risky_probe = true;
                    done = true;
                } else {
                    match self.p.version {
                        Version::V3 => {
                            if tcp.is_cwnd_limited_raw && tcp.snd_cwnd >= self.inflight_hi {
                                // inflight_hi limits growth: the bw can't plateau yet.
                                self.reset_full_bw();
                                self.full_bw = sample_bw;
                            } else if self.full_bw_now {
                                done = true; // bw plateau: the pipe looks full
                            }
                        }
                        Version::V2Alpha => {
                            // A queue is building: 1.25 x BDP after one min_rtt.
                            done = self.has_elapsed_in_phase(tcp, self.min_rtt_us)
                                && inflight >= self.inflight(tcp, bw, self.p.bw_probe_pif_gain);
                        }
                    }
                }
                if done {
                    self.prev_probe_too_high = false;
                    self.start_bw_probe_down(tcp);
                }
            }
            Phase::Down => {
                if self.check_time_to_probe_bw(tcp) {
                    return;
                }
                if self.check_time_to_cruise(tcp, inflight, bw) {
                    self.start_bw_probe_cruise();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness};
    use super::super::Params;
    use crate::SimDuration;

    #[test]
    fn the_probe_wait_is_two_to_three_seconds_and_zero_or_one_round() {
        let mut h = Harness::cruising(Params::V3);
        let mut waits = Vec::new();
        for _ in 0..200 {
            h.bbr.start_bw_probe_down(&h.tcp);
            assert!((2_000_000..3_000_000).contains(&h.bbr.probe_wait_us));
            assert!(h.bbr.rounds_since_probe < 2);
            waits.push(h.bbr.probe_wait_us);
        }
        let (lo, hi) = (waits.iter().min().unwrap(), waits.iter().max().unwrap());
        assert!(*lo < 2_200_000 && *hi > 2_800_000, "spread over the second: {lo}..{hi}");
    }

    #[test]
    fn probe_bw_cycles_down_cruise_refill_up_with_a_wall_clock_wait() {
        let mut h = Harness::cruising(Params::V3);
        // A large BDP keeps the Reno round count (min(63, BDP)) from firing first.
        h.bbr.start_bw_probe_down(&h.tcp);
        h.bbr.rounds_since_probe = 0;
        let wait = SimDuration::from_micros(h.bbr.probe_wait_us);
        let start = h.tcp.now;
        assert_eq!(h.bbr.mode_name(), "probe_bw_down");
        // In flight below the BDP and headroom: DOWN -> CRUISE.
        h.ack(Ack { in_flight: 50, ..Ack::one_packet(50) });
        assert_eq!(h.bbr.mode_name(), "probe_bw_cruise");
        // Cruise until the wait is over (each ACK 1 ms later, same round).
        let mut refill_at = None;
        for _ in 0..3_500 {
            h.ack(Ack { advance_us: 1_000, in_flight: 50, prior_delivered: Some(h.bbr.next_rtt_delivered.saturating_sub(1)), ..Ack::one_packet(50) });
            if h.bbr.mode_name() == "probe_bw_refill" {
                refill_at = Some(h.tcp.now);
                break;
            }
            assert_eq!(h.bbr.mode_name(), "probe_bw_cruise");
        }
        let refill_at = refill_at.expect("refill within 3.5 s");
        assert!(refill_at - start > wait && refill_at - start <= wait + SimDuration::from_millis(1));
        // One round of REFILL, then UP.
        let round_end = h.bbr.next_rtt_delivered;
        h.ack(Ack { prior_delivered: Some(round_end), ..Ack::one_packet(50) });
        assert_eq!(h.bbr.mode_name(), "probe_bw_up");
        assert!(h.bbr.bw_probe_samples);
        assert_eq!(h.bbr.pacing_gain, 320);
    }

    #[test]
    fn probe_up_ends_on_a_bandwidth_plateau_in_v3() {
        let mut h = Harness::cruising(Params::V3);
        h.start_probe_up();
        // Three rounds without 25% growth: full_bw_now, back to DOWN.
        for _ in 0..4 {
            let round_end = h.bbr.next_rtt_delivered;
            h.ack(Ack { prior_delivered: Some(round_end), ..Ack::one_packet(100) });
            if h.bbr.mode_name() == "probe_bw_down" {
                break;
            }
        }
        assert_eq!(h.bbr.mode_name(), "probe_bw_down");
    }
}
