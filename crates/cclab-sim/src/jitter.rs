//! Seeded timing noise on the ACK path: the simulator's stand-in for the kernel engine's.
//!
//! The kernel engine delays each ACK in its userspace delay line, which releases a packet
//! a little after it is due (a wake-up's latency). Measured over the 39 kernel runs of
//! `cclab validate --set rtt` on the reference machine, each run's lateness had a median
//! mean of 7.6 us, p50 6.0 us and p99 40 us: close to an exponential (p50 = 0.69 mean,
//! p99 = 4.6 mean). Each ACK here is late by an exponential draw with the configured mean;
//! the pipe keeps ACKs in order, as the delay line's FIFO queues do. The default mean adds
//! the sender host's turnaround (ACK in to data out, 23.1 us over its minimum in router
//! captures; python/cclab/spec/scenario.py). Sender timer slack and the tbf watchdog's
//! usual latency are not modelled apart: this one noise stands for them all. The watchdog's
//! rare long stalls (0.2-6 ms) are `stall.rs`'s.

use cclab_cc::rng::SimRng;
use cclab_cc::SimDuration;

pub struct AckJitter {
    rng: SimRng,
    mean_ns: f64,
}

impl AckJitter {
    pub fn new(rng: SimRng, mean_ns: u64) -> Self {
        AckJitter { rng, mean_ns: mean_ns as f64 }
    }

    /// How late this ACK is; zero without drawing when the mean is zero, so `jitter_ns = 0`
    /// replays exactly what the simulator did before it had jitter.
    pub fn draw(&mut self) -> SimDuration {
        if self.mean_ns == 0.0 {
            return SimDuration::ZERO;
        }
        // Inverse CDF of the exponential; 1 - u is in (0, 1], so the log is finite.
        SimDuration((-self.mean_ns * (1.0 - self.rng.next_f64()).ln()).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_mean_draws_nothing() {
        let mut j = AckJitter::new(SimRng::new(3), 0);
        assert!((0..1000).all(|_| j.draw() == SimDuration::ZERO));
    }

    #[test]
    fn draws_are_exponential_with_the_configured_mean() {
        let mut j = AckJitter::new(SimRng::new(3), 10_000);
        let mut d: Vec<u64> = (0..200_000).map(|_| j.draw().as_nanos()).collect();
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64;
        d.sort_unstable();
        let p50 = d[d.len() / 2] as f64;
        assert!((mean - 10_000.0).abs() < 150.0, "mean {mean}");
        // Median of an exponential: mean x ln 2.
        assert!((p50 - 6_931.0).abs() < 150.0, "p50 {p50}");
    }

    #[test]
    fn the_same_seed_draws_the_same_noise() {
        let (mut a, mut b) = (AckJitter::new(SimRng::new(9), 7_600), AckJitter::new(SimRng::new(9), 7_600));
        assert!((0..1000).all(|_| a.draw() == b.draw()));
    }
}
