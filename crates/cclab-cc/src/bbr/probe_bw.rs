//! PROBE_BW: cycle the pacing gain through eight phases — probe up, drain
//! down, cruise six — to find and share bandwidth (Linux
//! `bbr_reset_probe_bw_mode`, `bbr_is_next_cycle_phase`, `bbr_advance_cycle_phase`).

use super::{us_delta, Bbr, Mode, BBR_UNIT};
use crate::{RateSample, TcpState};

/// `CYCLE_LEN`: phases in the pacing-gain cycle.
pub(super) const CYCLE_LEN: usize = 8;
/// `bbr_pacing_gain[1]`: 3/4, drains the queue the up phase built. Phase 0's
/// up-gain is `BbrConfig::probe_bw_gain` (Linux 5/4); phases 2..7 cruise at 1.
pub(super) const DOWN_GAIN: u32 = BBR_UNIT * 3 / 4;
/// `bbr_cwnd_gain`: cwnd of 2 BDP tolerates delayed and stretched ACKs.
pub(super) const CWND_GAIN: u32 = BBR_UNIT * 2;
/// `bbr_cycle_rand`: the start phase is drawn from 7 of the 8 phases.
pub(super) const CYCLE_RAND: u32 = 7;

impl Bbr {
    /// `bbr_pacing_gain[idx]` with the configured up-gain.
    pub(super) fn cycle_pacing_gain(&self, idx: usize) -> u32 {
        match idx {
            0 => self.probe_bw_up_gain,
            1 => DOWN_GAIN,
            _ => BBR_UNIT,
        }
    }

    /// `bbr_reset_probe_bw_mode`: enter PROBE_BW at a random phase. Linux picks
    /// `CYCLE_LEN - 1 - rand(7)`, i.e. 1..=7, then advances once, so the flow
    /// starts in any phase but the 3/4 one (0, 2, 3, ..., 7).
    pub(super) fn reset_probe_bw_mode(&mut self, tcp: &TcpState) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = CYCLE_LEN - 1 - self.rng.below(CYCLE_RAND) as usize;
        self.advance_cycle_phase(tcp);
    }

    /// `bbr_advance_cycle_phase`.
    pub(super) fn advance_cycle_phase(&mut self, tcp: &TcpState) {
        self.cycle_idx = (self.cycle_idx + 1) % CYCLE_LEN;
        self.cycle_mstamp = tcp.delivered_time;
    }

    /// `bbr_is_next_cycle_phase`: is this phase over? Each lasts about one
    /// min_rtt; the up phase also waits for in-flight to reach its target (or
    /// a loss), the down phase ends early once in-flight is back at the BDP.
    fn is_next_cycle_phase(&self, tcp: &TcpState, rs: &RateSample) -> bool {
        let is_full_length = us_delta(tcp.delivered_time, self.cycle_mstamp) > self.min_rtt_us;
        if self.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.packets_in_net_at_edt(tcp, rs.prior_in_flight);
        let bw = self.max_bw();
        if self.pacing_gain > BBR_UNIT {
            // Don't persist after losses: a shallow buffer may not hold gain x BDP.
            return is_full_length && (rs.losses > 0 || inflight >= self.inflight(tcp, bw, self.pacing_gain));
        }
        is_full_length || inflight <= self.inflight(tcp, bw, BBR_UNIT)
    }

    /// `bbr_update_cycle_phase`.
    pub(super) fn update_cycle_phase(&mut self, tcp: &TcpState, rs: &RateSample) {
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(tcp, rs) {
            self.advance_cycle_phase(tcp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness, RTT_US};
    use super::super::{BbrConfig, Mode};
    use super::*;
    use crate::rng::SimRng;
    use crate::CongestionControl;

    fn gains_over_one_cycle(h: &mut Harness) -> Vec<u32> {
        h.set_phase(0);
        (0..CYCLE_LEN)
            .map(|_| {
                let g = h.bbr.cycle_pacing_gain(h.bbr.cycle_idx);
                h.bbr.advance_cycle_phase(&h.tcp);
                g
            })
            .collect()
    }

    #[test]
    fn the_gain_cycle_is_up_three_quarters_then_six_cruising_phases() {
        let mut h = Harness::in_probe_bw(1);
        assert_eq!(gains_over_one_cycle(&mut h), vec![320, 192, 256, 256, 256, 256, 256, 256]);
        assert_eq!(h.bbr.cycle_idx, 0, "the cycle wraps back to phase 0");
    }

    #[test]
    fn probe_bw_gain_sets_phase_zero_for_the_bbr_1_1_and_1_5_variants() {
        for (gain, fixed) in [(1.1, 281), (1.5, 384)] {
            let config = BbrConfig { probe_bw_gain: gain, ..BbrConfig::default() };
            let mut h = Harness::with_config_in_probe_bw(config, 1);
            assert_eq!(gains_over_one_cycle(&mut h), vec![fixed, 192, 256, 256, 256, 256, 256, 256]);
            // And it is the gain actually used for pacing in phase 0.
            h.set_phase(0);
            h.ack(Ack { advance_us: 1_000, ..Ack::one_packet(200) });
            assert_eq!(h.bbr.pacing_gain, fixed);
            assert_eq!(h.bbr.telemetry(&h.tcp).pacing_gain, Some(fixed as f64 / 256.0));
        }
    }

    #[test]
    fn the_random_start_phase_is_never_the_three_quarter_phase() {
        let mut seen = [0u32; CYCLE_LEN];
        for seed in 0..700 {
            let h = Harness::in_probe_bw(seed);
            seen[h.bbr.cycle_idx] += 1;
        }
        assert_eq!(seen[1], 0);
        for (idx, count) in seen.iter().enumerate() {
            if idx != 1 {
                assert!(*count > 50, "phase {idx} started only {count} times in 700");
            }
        }
    }

    #[test]
    fn the_start_phase_is_reproducible_from_the_seed() {
        for seed in [3, 17, 12345] {
            let a = Harness::in_probe_bw(seed).bbr.cycle_idx;
            let b = Harness::in_probe_bw(seed).bbr.cycle_idx;
            assert_eq!(a, b);
            // Linux's formula on the seed's first draw: (7 - r) + 1 mod 8.
            let r = SimRng::new(seed).below(CYCLE_RAND) as usize;
            assert_eq!(a, (CYCLE_LEN - 1 - r + 1) % CYCLE_LEN);
        }
    }

    #[test]
    fn a_cruise_phase_lasts_strictly_longer_than_min_rtt() {
        let mut h = Harness::in_probe_bw(1);
        h.set_phase(3);
        let start = h.tcp.delivered_time;
        h.ack(Ack { advance_us: RTT_US, ..Ack::one_packet(100) });
        assert_eq!(h.tcp.delivered_time.saturating_since(start).as_micros(), RTT_US);
        assert_eq!(h.bbr.cycle_idx, 3, "exactly min_rtt is not enough");
        h.ack(Ack { advance_us: 1, ..Ack::one_packet(100) });
        assert_eq!(h.bbr.cycle_idx, 4);
        assert_eq!(h.bbr.cycle_mstamp, h.tcp.delivered_time);
    }

    #[test]
    fn the_up_phase_waits_for_in_flight_to_reach_gain_times_bdp() {
        let mut h = Harness::in_probe_bw(1);
        h.set_phase(0);
        // Target: ceil(16777 * 100000 * 320 / 256 / 2^24) = 125, + 3*2 TSO = 131,
        // rounded to 132, + 2 for phase 0 = 134. The EDT estimate adds one TSO
        // burst (2) while probing up, so prior in-flight 132 reaches it, 131 doesn't.
        h.ack(Ack { advance_us: RTT_US + 1, ..Ack::one_packet(131) });
        assert_eq!(h.bbr.cycle_idx, 0);
        h.ack(Ack { advance_us: 1_000, ..Ack::one_packet(132) });
        assert_eq!(h.bbr.cycle_idx, 1);
    }

    #[test]
    fn the_up_phase_ends_on_loss_but_only_after_min_rtt() {
        let mut h = Harness::in_probe_bw(1);
        h.set_phase(0);
        h.ack(Ack { advance_us: RTT_US, losses: 1, ..Ack::one_packet(110) });
        assert_eq!(h.bbr.cycle_idx, 0, "a loss before min_rtt has elapsed does not end the phase");
        h.ack(Ack { advance_us: 1, losses: 1, ..Ack::one_packet(110) });
        assert_eq!(h.bbr.cycle_idx, 1);
    }

    #[test]
    fn the_down_phase_ends_early_once_in_flight_is_back_to_the_bdp_target() {
        let mut h = Harness::in_probe_bw(1);
        h.set_phase(1);
        // Target at gain 1: 100 + 6 = 106 (phase 1 gets no +2); no EDT burst when gain < 1.
        h.ack(Ack { advance_us: 1_000, ..Ack::one_packet(107) });
        assert_eq!(h.bbr.cycle_idx, 1);
        h.ack(Ack { advance_us: 1_000, ..Ack::one_packet(106) });
        assert_eq!(h.bbr.cycle_idx, 2);
    }

    #[test]
    fn the_down_phase_ends_after_min_rtt_even_with_a_queue() {
        let mut h = Harness::in_probe_bw(1);
        h.set_phase(1);
        h.ack(Ack { advance_us: RTT_US + 1, ..Ack::one_packet(180) });
        assert_eq!(h.bbr.cycle_idx, 2);
    }

    #[test]
    fn pacing_follows_the_phase_gain_with_a_one_percent_margin() {
        let mut h = Harness::in_probe_bw(1);
        // bw 16777 (1 packet/ms of 1000 B): rate = bw*mss*gain>>8 * 990000 >> 24.
        for (phase, rate) in [(0, 1_237_484), (1, 742_490), (2, 989_987)] {
            h.set_phase(phase);
            h.ack(Ack { advance_us: 10, ..Ack::one_packet(150) });
            assert_eq!(h.bbr.cycle_idx, phase);
            assert_eq!(h.tcp.pacing_rate_bytes_per_sec, rate);
        }
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
    }
}
