//! A Mahimahi delivery trace as the bottleneck's service (Netravali et al., "Mahimahi:
//! Accurate Record-and-Replay for HTTP", USENIX ATC 2015; mahimahi's `LinkQueue`).
//!
//! Each line of a trace is a millisecond at which the link may deliver one MTU-sized
//! packet (an opportunity of `OPPORTUNITY_BYTES`). Several lines with the same
//! millisecond are several opportunities. When the trace ends it repeats, shifted by its
//! last timestamp. As in `LinkQueue::use_a_delivery_opportunity`, an opportunity's bytes go
//! to the packets queued at that instant: a packet larger than what is left is sent in
//! part and finishes at a later opportunity, bytes left over pass to the next queued
//! packet at the same instant, and an opportunity that finds the queue empty is lost.
//!
//! The simulator's bottleneck and the kernel engine's userspace bottleneck both serve
//! their queue with it, so a trace replays the same way on both engines.

use cclab_cc::SimTime;

/// What one delivery opportunity carries: a 1500-byte IP packet (the and the
/// cellular traces' convention; mahimahi itself counts 1504 with its TUN header).
pub const OPPORTUNITY_BYTES: u32 = 1500;
/// A frame's Ethernet header, which the trace does not count (its packets are IP packets).
pub const ETHERNET_HEADER_BYTES: u32 = 14;
const NANOS_PER_MS: u64 = 1_000_000;

#[derive(Clone, Debug)]
pub struct DeliveryTrace {
    /// Opportunity times within one period, in ns, in order.
    times_ns: Vec<u64>,
    period_ns: u64,
    /// Index (counting across periods) of the first opportunity not yet used.
    next: u64,
    /// Bytes left in the last used opportunity, and its time.
    leftover_bytes: u32,
    leftover_at: SimTime,
}

impl DeliveryTrace {
    /// What `new` needs of a trace: non-empty, in time order, its last entry (the period)
    /// after 0 ms.
    pub fn check(times_ms: &[u64]) -> Result<(), String> {
        if times_ms.is_empty() || times_ms.windows(2).any(|w| w[1] < w[0]) || times_ms.last() == Some(&0) {
            return Err("a delivery trace must be non-empty, in time order, and end after 0 ms".into());
        }
        Ok(())
    }

    /// `times_ms` as `check` accepts it.
    pub fn new(times_ms: &[u64]) -> Self {
        DeliveryTrace {
            times_ns: times_ms.iter().map(|ms| ms * NANOS_PER_MS).collect(),
            period_ns: times_ms.last().copied().unwrap_or(1) * NANOS_PER_MS,
            next: 0,
            leftover_bytes: 0,
            leftover_at: SimTime::ZERO,
        }
    }

    /// The trace's mean rate in bit/s (the rate a token bucket would need to match it).
    pub fn mean_rate_bps(times_ms: &[u64]) -> u64 {
        let period_ms = times_ms.last().copied().unwrap_or(1).max(1);
        times_ms.len() as u64 * OPPORTUNITY_BYTES as u64 * 8 * 1000 / period_ms
    }

    fn time_of(&self, k: u64) -> SimTime {
        let n = self.times_ns.len() as u64;
        SimTime(self.times_ns[(k % n) as usize] + (k / n) * self.period_ns)
    }

    /// The index of the first opportunity at or after `t`.
    fn first_at_or_after(&self, t: SimTime) -> u64 {
        let n = self.times_ns.len() as u64;
        let cycle = t.as_nanos() / self.period_ns;
        let within = t.as_nanos() % self.period_ns;
        cycle * n + self.times_ns.partition_point(|&o| o < within) as u64
    }

    /// Opportunities at or before `t` (the link's capacity so far, in packets).
    pub fn opportunities_until(&self, t: SimTime) -> u64 {
        self.first_at_or_after(SimTime(t.as_nanos() + 1))
    }

    /// Books a frame of `frame_bytes` (an IP packet plus its Ethernet header) that is at the
    /// head of the queue from `start` on and returns when its last byte is delivered.
    pub fn book_frame(&mut self, start: SimTime, frame_bytes: u32) -> SimTime {
        self.book(start, frame_bytes.saturating_sub(ETHERNET_HEADER_BYTES))
    }

    /// `book_frame` for an IP packet of `ip_bytes`.
    pub fn book(&mut self, start: SimTime, ip_bytes: u32) -> SimTime {
        let mut remaining = ip_bytes;
        if self.leftover_bytes > 0 && self.leftover_at == start {
            let used = remaining.min(self.leftover_bytes);
            self.leftover_bytes -= used;
            remaining -= used;
            if remaining == 0 {
                return start;
            }
        }
        let mut k = self.next.max(self.first_at_or_after(start));
        loop {
            let t = self.time_of(k);
            k += 1;
            if remaining <= OPPORTUNITY_BYTES {
                self.leftover_bytes = OPPORTUNITY_BYTES - remaining;
                self.leftover_at = t;
                self.next = k;
                return t;
            }
            remaining -= OPPORTUNITY_BYTES;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t: u64) -> SimTime {
        SimTime(t * NANOS_PER_MS)
    }

    #[test]
    fn a_full_packet_leaves_at_the_first_opportunity_at_or_after_it_is_queued() {
        let mut trace = DeliveryTrace::new(&[5, 10, 20]);
        assert_eq!(trace.book(ms(0), 1500), ms(5));
        assert_eq!(trace.book(ms(5), 1500), ms(10));
        // Queued at 12 ms: the 10 ms opportunity is past.
        assert_eq!(trace.book(ms(12), 1500), ms(20));
    }

    #[test]
    fn the_trace_repeats_shifted_by_its_last_timestamp() {
        let mut trace = DeliveryTrace::new(&[5, 10, 20]);
        let departures: Vec<u64> = (0..7).map(|_| trace.book(SimTime::ZERO, 1500).as_nanos() / NANOS_PER_MS).collect();
        assert_eq!(departures, [5, 10, 20, 25, 30, 40, 45]);
        assert_eq!(trace.opportunities_until(ms(40)), 6);
        assert_eq!(trace.opportunities_until(ms(39)), 5);
    }

    #[test]
    fn small_packets_share_an_opportunity_and_a_large_one_spans_two() {
        let mut trace = DeliveryTrace::new(&[1, 2, 3, 4]);
        // Two 700-byte packets fit in the 1 ms opportunity's 1500 bytes...
        assert_eq!(trace.book(SimTime::ZERO, 700), ms(1));
        assert_eq!(trace.book(ms(1), 700), ms(1));
        // ...and the third takes the 100 bytes left there and 600 of the next one.
        assert_eq!(trace.book(ms(1), 700), ms(2));
        // Leftover bytes are only for packets already waiting at that instant.
        assert_eq!(trace.book(ms(3), 100), ms(3));
    }

    #[test]
    fn an_opportunity_that_finds_the_queue_empty_is_lost() {
        let mut trace = DeliveryTrace::new(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        trace.book(SimTime::ZERO, 1500);
        // Nothing queued from 1 ms to 6.5 ms: opportunities 2..6 are gone.
        assert_eq!(trace.book(SimTime(6_500_000), 1500), ms(7));
    }

    #[test]
    fn a_full_frame_fills_one_opportunity_and_a_malformed_trace_is_refused() {
        let mut trace = DeliveryTrace::new(&[1, 2]);
        assert_eq!(trace.book_frame(SimTime::ZERO, 1514), ms(1));
        assert_eq!(trace.book_frame(ms(1), 1514), ms(2));
        assert!(DeliveryTrace::check(&[1, 2]).is_ok());
        for bad in [&[][..], &[2, 1], &[0, 0]] {
            assert!(DeliveryTrace::check(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_mean_rate_counts_opportunities_over_the_period() {
        // One 1500-byte packet per ms: 12 Mbit/s.
        let every_ms: Vec<u64> = (1..=1000).collect();
        assert_eq!(DeliveryTrace::mean_rate_bps(&every_ms), 12_000_000);
    }
}
