//! Seeded stalls of the bottleneck's dequeue: the heavy tail of the kernel engine's service noise.
//!
//! On the kernel engine tbf sends a waiting packet from its watchdog timer or from the next
//! arrival's softirq, both on the router's CPU. Now and then that CPU is busy elsewhere and a
//! dequeue comes late by hundreds of microseconds to milliseconds. Tokens keep accruing
//! meanwhile, so the late packet and those behind it then leave back to back; only a stall
//! longer than the bucket holds (404 us at 300 Mbit/s, 2.4 ms at 50 Mbit/s) costs the link
//! time. Measured in router captures (`bench/router_capture.py`'s "service stalls", six runs
//! of 8 s of one CUBIC flow at 100 and 300 Mbit/s, tcpdump running): gaps between departures
//! of a backlogged queue longer than a frame's transmit time by more than 200 us came after
//! 1.44e-4 of the departures (1.27e-4 at 300 Mbit/s, 1.92e-4 at 100), and their excess over
//! the frame time is Pareto-tailed: the maximum-likelihood exponent over all 109 is 1.70
//! (1.53 and 2.15 at each rate), the longest 5.9 ms. That lost 0.03-0.2% of the link's time
//! at 300 Mbit/s, as the kernel's steady-state goodput shows without a capture running
//! (docs/history/FIDELITY-investigations.md, "The bottleneck stalls"). Shorter lateness is the ACK jitter's
//! (`jitter.rs`).

use cclab_cc::rng::SimRng;
use cclab_cc::SimDuration;

/// The shortest stall drawn: shorter lateness is left to the ACK path's jitter.
pub const STALL_MIN: SimDuration = SimDuration::from_micros(200);
/// The tail's exponent (maximum likelihood over the measured stalls, above).
pub const STALL_PARETO_EXPONENT: f64 = 1.70;
/// No stall is drawn longer than the longest measured (5.9 ms): an unbounded Pareto tail
/// would now and then stop the link for longer than anything seen.
pub const STALL_MAX: SimDuration = SimDuration::from_micros(6_000);

pub struct BottleneckStalls {
    rng: SimRng,
    per_packet: f64,
    /// Departures left before the next stall (a geometric draw, so one draw per stall).
    until_next: u64,
}

impl BottleneckStalls {
    /// Stalls after `per_packet` of the departures that waited; 0: none, and nothing drawn.
    pub fn new(mut rng: SimRng, per_packet: f64) -> Self {
        let until_next = Self::gap(&mut rng, per_packet);
        BottleneckStalls { rng, per_packet, until_next }
    }

    pub fn none() -> Self {
        Self::new(SimRng::new(0), 0.0)
    }

    /// Departures before the next stall: geometric with success probability `p`.
    fn gap(rng: &mut SimRng, p: f64) -> u64 {
        if p <= 0.0 {
            return u64::MAX;
        }
        if p >= 1.0 {
            return 0;
        }
        let u = 1.0 - rng.next_f64(); // in (0, 1]
        (u.ln() / (1.0 - p).ln()).floor().min(u64::MAX as f64 / 2.0) as u64
    }

    /// How late the dequeue of this departure comes: zero but for one in about 1/per_packet.
    pub fn draw(&mut self) -> SimDuration {
        if self.until_next > 0 {
            self.until_next -= 1;
            return SimDuration::ZERO;
        }
        self.until_next = Self::gap(&mut self.rng, self.per_packet);
        // Inverse CDF of the Pareto: x_min * u^(-1/alpha), u in (0, 1].
        let u = 1.0 - self.rng.next_f64();
        let ns = STALL_MIN.as_nanos() as f64 * u.powf(-1.0 / STALL_PARETO_EXPONENT);
        SimDuration((ns.round() as u64).min(STALL_MAX.as_nanos()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_stalls_draw_nothing() {
        let mut s = BottleneckStalls::new(SimRng::new(3), 0.0);
        assert!((0..100_000).all(|_| s.draw() == SimDuration::ZERO));
        let mut s = BottleneckStalls::none();
        assert!((0..100_000).all(|_| s.draw() == SimDuration::ZERO));
    }

    #[test]
    fn stalls_come_at_the_configured_rate_with_a_pareto_tail() {
        let mut s = BottleneckStalls::new(SimRng::new(5), 1e-3);
        let stalls: Vec<u64> = (0..4_000_000).map(|_| s.draw().as_nanos()).filter(|&ns| ns > 0).collect();
        let rate = stalls.len() as f64 / 4e6;
        assert!((rate - 1e-3).abs() < 0.05e-3, "rate {rate}");
        assert!(stalls.iter().all(|&ns| (STALL_MIN.as_nanos()..=STALL_MAX.as_nanos()).contains(&ns)));
        // P(X > 2 x_min) = 2^-alpha for a Pareto tail.
        let above = stalls.iter().filter(|&&ns| ns > 2 * STALL_MIN.as_nanos()).count() as f64 / stalls.len() as f64;
        assert!((above - 2f64.powf(-STALL_PARETO_EXPONENT)).abs() < 0.02, "P(>2 x_min) = {above}");
        // The maximum-likelihood exponent of the uncapped draws comes back.
        let uncapped: Vec<f64> = stalls.iter().filter(|&&ns| ns < STALL_MAX.as_nanos()).map(|&ns| ns as f64).collect();
        let log_sum: f64 = uncapped.iter().map(|x| (x / STALL_MIN.as_nanos() as f64).ln()).sum();
        assert!(uncapped.len() as f64 / log_sum > 1.55 && (uncapped.len() as f64 / log_sum) < 1.9);
    }

    #[test]
    fn the_same_seed_stalls_the_same_departures() {
        let mut a = BottleneckStalls::new(SimRng::new(9), 1e-2);
        let mut b = BottleneckStalls::new(SimRng::new(9), 1e-2);
        assert!((0..100_000).all(|_| a.draw() == b.draw()));
    }
}
