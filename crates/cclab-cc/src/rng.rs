//! A small seeded generator (xoshiro256**, seeded by SplitMix64).
//!
//! The simulator owns every generator and seeds it from the scenario seed;
//! no code reads a global or OS random source, so a run is reproducible.

#[derive(Clone, Debug)]
pub struct SimRng {
    state: [u64; 4],
}

impl SimRng {
    pub fn new(seed: u64) -> Self {
        // SplitMix64 spreads even adjacent seeds over the whole state space.
        let mut sm = seed;
        let mut next = || {
            sm = sm.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = sm;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        SimRng { state: [next(), next(), next(), next()] }
    }

    /// A generator for a sub-component, independent of this one's future draws.
    pub fn fork(&mut self, stream: u64) -> SimRng {
        SimRng::new(self.next_u64() ^ stream.wrapping_mul(0xD605_BBB5_8C8A_BBCB))
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, bound), like Linux `get_random_u32_below`.
    pub fn below(&mut self, bound: u32) -> u32 {
        ((self.next_u64() >> 32) * bound as u64 >> 32) as u32
    }

    /// True with probability `p`.
    pub fn bernoulli(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let mut a = SimRng::new(42);
        let mut b = SimRng::new(42);
        for _ in 0..1000 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut rng = SimRng::new(7);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = rng.below(7) as usize;
            seen[v] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn bernoulli_rate_is_close_to_p() {
        let mut rng = SimRng::new(3);
        let hits = (0..200_000).filter(|_| rng.bernoulli(0.01)).count();
        // 3 sigma of a binomial(200000, 0.01) is about 133.
        assert!((hits as i64 - 2000).abs() < 150, "hits = {hits}");
    }
}
