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
//!
//! Under the noise lies a floor: no RTT on the kernel engine is as short as the configured
//! one. The hosts' and the router's processing, which the delay line does not take out, adds
//! [`KERNEL_PATH_FLOOR_NS`] to every round trip, so with the noise on every ACK pays it too.
//! It matters beside the timestamp option's millisecond RTTs (tcp/rtt.rs `tsopt_rtt`): on
//! the kernel a retransmission's RTT floored to the millisecond is below every RTT the path
//! has, and BBR's min_rtt filter takes it; without the floor the simulator's configured
//! whole-millisecond RTT would tie it instead.

use cclab_cc::rng::SimRng;
use cclab_cc::SimDuration;

/// The kernel engine's lowest RTT over the configured one: the median over the 170 BBR
/// flows of `cclab validate --set rtt` (reference machine, Linux 6.18) of each flow's
/// lowest `min_rtt` that was not a whole millisecond (IQR 34-48 us).
pub const KERNEL_PATH_FLOOR_NS: u64 = 40_000;

/// Seeded lateness: a floor and an exponential over it. The ACKs' noise, and the reader's
/// wake-up after idle (tcp/receiver.rs).
pub struct AckJitter {
    rng: SimRng,
    mean_ns: f64,
    floor_ns: u64,
}

impl AckJitter {
    /// Exponential lateness of `mean_ns` over a constant `floor_ns`.
    pub fn new(rng: SimRng, mean_ns: u64, floor_ns: u64) -> Self {
        AckJitter { rng, mean_ns: mean_ns as f64, floor_ns }
    }

    /// The kernel engine's noise: `mean_ns` over [`KERNEL_PATH_FLOOR_NS`], or none at all
    /// when the mean is zero.
    pub fn kernel_like(rng: SimRng, mean_ns: u64) -> Self {
        AckJitter::new(rng, mean_ns, if mean_ns == 0 { 0 } else { KERNEL_PATH_FLOOR_NS })
    }

    /// How late this ACK is; the floor alone, without drawing, when the mean is zero, so
    /// `kernel_like` with `jitter_ns = 0` is the simulator without jitter.
    pub fn draw(&mut self) -> SimDuration {
        if self.mean_ns == 0.0 {
            return SimDuration(self.floor_ns);
        }
        // Inverse CDF of the exponential; 1 - u is in (0, 1], so the log is finite.
        SimDuration(self.floor_ns + (-self.mean_ns * (1.0 - self.rng.next_f64()).ln()).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_mean_draws_nothing() {
        let mut j = AckJitter::new(SimRng::new(3), 0, 0);
        assert!((0..1000).all(|_| j.draw() == SimDuration::ZERO));
    }

    #[test]
    fn draws_are_exponential_with_the_configured_mean() {
        let mut j = AckJitter::new(SimRng::new(3), 10_000, 0);
        let mut d: Vec<u64> = (0..200_000).map(|_| j.draw().as_nanos()).collect();
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64;
        d.sort_unstable();
        let p50 = d[d.len() / 2] as f64;
        assert!((mean - 10_000.0).abs() < 150.0, "mean {mean}");
        // Median of an exponential: mean x ln 2.
        assert!((p50 - 6_931.0).abs() < 150.0, "p50 {p50}");
    }

    #[test]
    fn the_kernel_like_noise_never_undercuts_the_path_floor_and_none_means_none() {
        let mut j = AckJitter::kernel_like(SimRng::new(5), 30_700);
        let d: Vec<u64> = (0..10_000).map(|_| j.draw().as_nanos()).collect();
        assert!(d.iter().all(|&x| x >= KERNEL_PATH_FLOOR_NS));
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64;
        assert!((mean - (KERNEL_PATH_FLOOR_NS as f64 + 30_700.0)).abs() < 1_000.0, "mean {mean}");
        let mut none = AckJitter::kernel_like(SimRng::new(5), 0);
        assert!((0..100).all(|_| none.draw() == SimDuration::ZERO));
    }

    #[test]
    fn the_same_seed_draws_the_same_noise() {
        let (mut a, mut b) = (AckJitter::kernel_like(SimRng::new(9), 7_600), AckJitter::kernel_like(SimRng::new(9), 7_600));
        assert!((0..1000).all(|_| a.draw() == b.draw()));
    }
}
