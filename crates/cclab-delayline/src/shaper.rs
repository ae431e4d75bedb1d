//! A token bucket like sch_tbf.c's (tbf_dequeue): tokens are kept as time, at most `burst`
//! worth of it; a packet of L bytes costs L x 8 / rate seconds and may leave when the bucket
//! holds that much. No peak rate (the engine's tbf has none). Or a Mahimahi trace.

use cclab_aqm::delivery_trace::DeliveryTrace;
use cclab_cc::SimTime;

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

/// A Mahimahi trace in place of the bucket (cclab_aqm::delivery_trace, as the simulator
/// serves its queue), its time zero at `start_ns` (the run's start, CLOCK_REALTIME).
pub struct TraceShaper {
    trace: DeliveryTrace,
    start_ns: i64,
    /// The departure booked for the packet now at the head.
    booked_ns: Option<i64>,
    /// The last booked departure: a packet queued behind it became the head then.
    last_departure_ns: i64,
}

impl TraceShaper {
    pub fn new(trace: DeliveryTrace, start_ns: i64) -> Self {
        TraceShaper { trace, start_ns, booked_ns: None, last_departure_ns: i64::MIN }
    }

    /// Like `TokenBucket::try_send`: a head packet that arrived at `arrival_ns` is booked on
    /// the trace's opportunities from the instant it became the head (its arrival, or the
    /// departure of the packet before it, not the later instant this loop got to it: several
    /// opportunities in one millisecond must serve back-to-back packets) and may leave once
    /// they pass.
    pub fn try_send(&mut self, len_bytes: u64, now_ns: i64, arrival_ns: i64) -> Result<(), i64> {
        let departure = *self.booked_ns.get_or_insert_with(|| {
            let head_since = arrival_ns.max(self.last_departure_ns).min(now_ns);
            let since_start = SimTime((head_since - self.start_ns).max(0) as u64);
            let departure = self.start_ns + self.trace.book_frame(since_start, len_bytes as u32).as_nanos() as i64;
            self.last_departure_ns = departure;
            departure
        });
        if departure <= now_ns {
            self.booked_ns = None;
            Ok(())
        } else {
            Err(departure - now_ns)
        }
    }
}

/// What paces the bottleneck's releases.
pub enum Shaper {
    Bucket(TokenBucket),
    Trace(TraceShaper),
}

impl Shaper {
    pub fn try_send(&mut self, len_bytes: u64, now_ns: i64, arrival_ns: i64) -> Result<(), i64> {
        match self {
            Shaper::Bucket(bucket) => bucket.try_send(len_bytes, now_ns),
            Shaper::Trace(trace) => trace.try_send(len_bytes, now_ns, arrival_ns),
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
    fn a_trace_shaper_releases_each_packet_at_its_opportunity_after_the_start() {
        let start = 5_000_000_000;
        let mut shaper = TraceShaper::new(DeliveryTrace::new(&[1, 2, 4]), start);
        // Head at the start: its opportunity is 1 ms later.
        assert_eq!(shaper.try_send(FRAME, start, start), Err(1_000_000));
        assert_eq!(shaper.try_send(FRAME, start + 1_000_000, start), Ok(()));
        // The next head, asked about at 1 ms, goes at 2 ms; the one after at 4 ms.
        assert_eq!(shaper.try_send(FRAME, start + 1_000_000, start), Err(1_000_000));
        assert_eq!(shaper.try_send(FRAME, start + 2_000_000, start), Ok(()));
        assert_eq!(shaper.try_send(FRAME, start + 2_000_000, start), Err(2_000_000));
    }

    #[test]
    fn back_to_back_packets_use_every_opportunity_of_a_millisecond_though_the_loop_is_late() {
        let start = 0;
        // Three opportunities at 1 ms.
        let mut shaper = TraceShaper::new(DeliveryTrace::new(&[1, 1, 1, 5]), start);
        let late = 1_000_000 + 7_000; // the loop wakes 7 us after the opportunity
        assert_eq!(shaper.try_send(FRAME, late, 0), Ok(()));
        assert_eq!(shaper.try_send(FRAME, late, 0), Ok(()));
        assert_eq!(shaper.try_send(FRAME, late, 0), Ok(()));
        // A packet arriving after that millisecond waits for the 5 ms one.
        assert_eq!(shaper.try_send(FRAME, 2_000_000, 2_000_000), Err(3_000_000));
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
