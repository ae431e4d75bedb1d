//! The dumbbell's links: constant-delay FIFO pipes and the tbf-like bottleneck.

use cclab_cc::{Bandwidth, SimDuration, SimTime};
use std::collections::VecDeque;

/// A link with a constant propagation delay: arrivals leave in the order
/// they entered, so the pipe is a FIFO and only its head needs an event.
pub struct Pipe<T> {
    in_flight: VecDeque<(SimTime, T)>,
}

impl<T> Default for Pipe<T> {
    fn default() -> Self {
        Pipe { in_flight: VecDeque::new() }
    }
}

impl<T> Pipe<T> {
    /// Adds an item arriving at `arrival`; returns true if it became the head
    /// (the caller then schedules the pipe's head event).
    pub fn push(&mut self, arrival: SimTime, item: T) -> bool {
        debug_assert!(self.in_flight.back().is_none_or(|(t, _)| *t <= arrival), "pipe must stay FIFO");
        self.in_flight.push_back((arrival, item));
        self.in_flight.len() == 1
    }

    pub fn pop(&mut self) -> Option<(SimTime, T)> {
        self.in_flight.pop_front()
    }

    pub fn head_time(&self) -> Option<SimTime> {
        self.in_flight.front().map(|(t, _)| *t)
    }

    pub fn len(&self) -> usize {
        self.in_flight.len()
    }

    pub fn is_empty(&self) -> bool {
        self.in_flight.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.in_flight.iter().map(|(_, item)| item)
    }
}

/// How the bottleneck queue is limited, like `bfifo limit` / `tbf limit` (bytes)
/// or `pfifo limit` (packets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    Bytes(u64),
    Packets(u64),
}

/// `tbf burst` as the kernel engine sets it: max(10 MTU-sized frames, 250 us at
/// the rate) (shared/kernel-testbed-notes.md: smaller bursts cannot reach the rate).
pub const TBF_MIN_BURST_FRAMES: u64 = 10;
pub const TBF_BURST_TIME: SimDuration = SimDuration::from_micros(250);

/// The bottleneck: a drop-tail queue drained by a token bucket, as tc tbf
/// does on the router's egress. Departure times are computed on arrival
/// (the queue is FIFO and the rate constant), so the queue costs no events.
pub struct Bottleneck {
    rate: Bandwidth,
    limit: QueueLimit,
    /// Token bucket depth, as transmit time at the rate.
    burst_ns: u64,
    /// Tokens left after the last departure, as transmit time.
    credit_ns: u64,
    last_departure: SimTime,
    /// Packets not yet dequeued: (departure time, frame bytes).
    queued: VecDeque<(SimTime, u32)>,
    backlog_bytes: u64,
    /// Counters since the start of the run.
    pub drops: u64,
    pub dequeued_bytes: u64,
    pub max_backlog_bytes: u64,
}

impl Bottleneck {
    pub fn new(rate: Bandwidth, limit: QueueLimit, mtu_frame_bytes: u64) -> Self {
        let burst_bytes = (TBF_MIN_BURST_FRAMES * mtu_frame_bytes)
            .max(rate.bits_per_sec / 8 * TBF_BURST_TIME.as_nanos() / 1_000_000_000);
        let burst_ns = rate.transmit_time(burst_bytes).as_nanos();
        Bottleneck {
            rate,
            limit,
            burst_ns,
            credit_ns: burst_ns,
            last_departure: SimTime::ZERO,
            queued: VecDeque::new(),
            backlog_bytes: 0,
            drops: 0,
            dequeued_bytes: 0,
            max_backlog_bytes: 0,
        }
    }

    /// Removes packets whose departure time has come.
    fn dequeue_until(&mut self, now: SimTime) {
        while let Some(&(departure, bytes)) = self.queued.front() {
            if departure > now {
                break;
            }
            self.queued.pop_front();
            self.backlog_bytes -= bytes as u64;
            self.dequeued_bytes += bytes as u64;
        }
    }

    /// Backlog at `now`, in frame bytes.
    pub fn backlog_bytes(&mut self, now: SimTime) -> u64 {
        self.dequeue_until(now);
        self.backlog_bytes
    }

    pub fn backlog_packets(&mut self, now: SimTime) -> usize {
        self.dequeue_until(now);
        self.queued.len()
    }

    /// A frame of `frame_bytes` arrives at `now`. Returns its departure time,
    /// or `None` if the queue is full (tail drop).
    pub fn enqueue(&mut self, now: SimTime, frame_bytes: u32) -> Option<SimTime> {
        self.dequeue_until(now);
        let full = match self.limit {
            QueueLimit::Bytes(limit) => self.backlog_bytes + frame_bytes as u64 > limit,
            QueueLimit::Packets(limit) => self.queued.len() as u64 >= limit,
        };
        if full {
            self.drops += 1;
            return None;
        }
        // Token bucket: tokens refill at the rate up to the burst; a frame
        // leaves once the bucket holds its size.
        let start = now.max(self.last_departure);
        let credit = (self.credit_ns + (start - self.last_departure).as_nanos()).min(self.burst_ns);
        let cost = self.rate.transmit_time(frame_bytes as u64).as_nanos();
        let departure = if credit >= cost {
            self.credit_ns = credit - cost;
            start
        } else {
            self.credit_ns = 0;
            start + SimDuration(cost - credit)
        };
        self.last_departure = departure;
        if departure <= now {
            // Left at once: never part of the backlog.
            self.dequeued_bytes += frame_bytes as u64;
        } else {
            self.queued.push_back((departure, frame_bytes));
            self.backlog_bytes += frame_bytes as u64;
            self.max_backlog_bytes = self.max_backlog_bytes.max(self.backlog_bytes);
        }
        Some(departure)
    }

    pub fn rate(&self) -> Bandwidth {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: u32 = 1514;

    #[test]
    fn a_backlogged_queue_drains_at_the_line_rate() {
        let rate = Bandwidth::from_mbps(100);
        let mut b = Bottleneck::new(rate, QueueLimit::Bytes(1_000_000), FRAME as u64);
        let mut last = SimTime::ZERO;
        for _ in 0..500 {
            last = b.enqueue(SimTime::ZERO, FRAME).unwrap();
        }
        // The burst leaves at once; the rest at the rate.
        let burst_frames = b.burst_ns / rate.transmit_time(FRAME as u64).as_nanos();
        let expected = rate.transmit_time(FRAME as u64).as_nanos() * (500 - burst_frames);
        let diff = last.as_nanos() as i64 - expected as i64;
        assert!(diff.abs() <= rate.transmit_time(FRAME as u64).as_nanos() as i64, "last departure {last:?}, expected ~{expected}");
    }

    #[test]
    fn a_full_byte_limited_queue_drops_the_arrival() {
        let rate = Bandwidth::from_mbps(10);
        let mut b = Bottleneck::new(rate, QueueLimit::Bytes(3 * FRAME as u64), FRAME as u64);
        // Exhaust the burst first so frames actually queue.
        let mut accepted = 0;
        for _ in 0..100 {
            if b.enqueue(SimTime::ZERO, FRAME).is_some() {
                accepted += 1;
            }
        }
        assert!(b.backlog_bytes(SimTime::ZERO) <= 3 * FRAME as u64);
        assert_eq!(b.drops, 100 - accepted);
        assert_eq!(b.max_backlog_bytes, 3 * FRAME as u64);
    }

    #[test]
    fn a_packet_limited_queue_holds_at_most_its_limit() {
        let mut b = Bottleneck::new(Bandwidth::from_mbps(10), QueueLimit::Packets(5), FRAME as u64);
        for _ in 0..50 {
            b.enqueue(SimTime::ZERO, FRAME);
        }
        assert_eq!(b.backlog_packets(SimTime::ZERO), 5);
    }

    #[test]
    fn after_idle_the_bucket_refills_to_the_burst_only() {
        let rate = Bandwidth::from_mbps(100);
        let mut b = Bottleneck::new(rate, QueueLimit::Bytes(10_000_000), FRAME as u64);
        let later = SimTime::ZERO + SimDuration::from_secs(10);
        let mut instant = 0;
        for _ in 0..100 {
            if b.enqueue(later, FRAME) == Some(later) {
                instant += 1;
            }
        }
        assert_eq!(instant as u64, b.burst_ns / rate.transmit_time(FRAME as u64).as_nanos());
    }
}
