//! A token bucket like sch_tbf.c's (tbf_dequeue): tokens are kept as time, at most `burst`
//! worth of it; a packet of L bytes costs L x 8 / rate seconds and may leave when the bucket
//! holds that much. No peak rate (the engine's tbf has none).

pub struct TokenBucket {
    rate_bps: u64,
    /// q->buffer: the bucket depth as time at the rate (tbf's `burst`).
    buffer_ns: i64,
    /// q->tokens at `t_c_ns`.
    tokens_ns: i64,
    /// q->t_c: when tokens were last brought up to date.
    t_c_ns: i64,
}

impl TokenBucket {
    /// A full bucket at `now_ns` (tbf_change fills it: q->tokens = q->buffer).
    pub fn new(rate_bps: u64, burst_bytes: u64, now_ns: i64) -> Self {
        assert!(rate_bps > 0, "the shaper needs a rate");
        let buffer_ns = Self::cost_ns_at(rate_bps, burst_bytes);
        TokenBucket { rate_bps, buffer_ns, tokens_ns: buffer_ns, t_c_ns: now_ns }
    }

    fn cost_ns_at(rate_bps: u64, len_bytes: u64) -> i64 {
        (len_bytes as u128 * 8 * 1_000_000_000 / rate_bps as u128) as i64
    }

    /// psched_l2t_ns: the time `len_bytes` take at the rate.
    pub fn cost_ns(&self, len_bytes: u64) -> i64 {
        Self::cost_ns_at(self.rate_bps, len_bytes)
    }

    fn tokens_at(&self, now_ns: i64) -> i64 {
        (self.tokens_ns + (now_ns - self.t_c_ns).max(0)).min(self.buffer_ns)
    }

    /// Takes the tokens for a packet of `len_bytes` if the bucket holds them at `now_ns`;
    /// otherwise returns how long until it will (tbf's qdisc_watchdog_schedule_ns).
    pub fn try_send(&mut self, len_bytes: u64, now_ns: i64) -> Result<(), i64> {
        let toks = self.tokens_at(now_ns) - self.cost_ns(len_bytes);
        if toks >= 0 {
            self.tokens_ns = toks;
            self.t_c_ns = now_ns.max(self.t_c_ns);
            Ok(())
        } else {
            Err(-toks)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: u64 = 1514;

    /// Sends as fast as the bucket allows, stepping the clock to each release time.
    fn drain(tb: &mut TokenBucket, packets: usize, start_ns: i64) -> Vec<i64> {
        let mut now = start_ns;
        let mut sent = Vec::new();
        while sent.len() < packets {
            match tb.try_send(FRAME, now) {
                Ok(()) => sent.push(now),
                Err(wait) => now += wait,
            }
        }
        sent
    }

    #[test]
    fn a_saturated_bucket_sends_at_the_rate_in_the_long_run() {
        let rate = 100_000_000;
        let mut tb = TokenBucket::new(rate, 10 * FRAME, 0);
        let sent = drain(&mut tb, 10_010, 0);
        // After the initial burst, 10,000 frames take exactly 10,000 frame times.
        let span = sent[10_009] - sent[9];
        let expected = 10_000 * tb.cost_ns(FRAME);
        assert!((span - expected).abs() <= 10_000, "span {span} expected {expected}");
    }

    #[test]
    fn a_full_bucket_releases_a_burst_of_its_depth_back_to_back() {
        let mut tb = TokenBucket::new(50_000_000, 10 * FRAME, 1_000);
        let sent = drain(&mut tb, 12, 1_000);
        assert!(sent[..10].iter().all(|&t| t == 1_000), "{sent:?}");
        assert!(sent[10] > 1_000);
    }

    #[test]
    fn an_idle_bucket_never_holds_more_than_its_depth() {
        let mut tb = TokenBucket::new(10_000_000, 3 * FRAME, 0);
        // Idle for a long time: still only 3 frames go at once.
        let sent = drain(&mut tb, 4, 10_000_000_000);
        assert_eq!(sent[..3], [10_000_000_000; 3]);
        assert_eq!(sent[3] - sent[2], tb.cost_ns(FRAME));
    }
}
