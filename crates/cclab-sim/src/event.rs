//! The event queue: a binary heap ordered by (time, insertion sequence), so
//! events at the same instant run in the order they were scheduled and a run
//! is reproducible bit for bit.
//!
//! Packets in flight do not sit in this heap: each constant-delay link is a
//! FIFO [`crate::network::Pipe`] and only its head is scheduled, so the heap
//! stays a few entries per flow however many packets are in flight.

use cclab_cc::SimTime;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// Which per-flow timer fired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerKind {
    /// Linux `icsk_retransmit_timer`: RTO, tail-loss probe or RACK reorder timeout.
    Retransmit,
    /// Internal pacing (`tp->pacing_timer`).
    Pacing,
    /// Receiver's delayed-ACK timer.
    DelayedAck,
    /// Receiver's SACK-compression timer (`tp->compressed_ack_timer`).
    CompressedAck,
    /// The receiving application's read, when `tcp_cleanup_rbuf` will ACK after it.
    Read,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The head packet of a pipe has arrived at the far end.
    PipeHead(PipeId),
    /// The flow's SYN leaves (its scenario start time).
    FlowStart(u32),
    /// The handshake completed: the sender may send data.
    FlowEstablished(u32),
    Timer(u32, TimerKind),
    /// The bottleneck's link is free and its qdisc holds packets: dequeue the next.
    BottleneckDequeue,
    FlowSample,
    QueueSample,
    /// The warm-up ends: snapshot the counters the measurement window starts from.
    Warmup,
    /// Entry n of the bottleneck's schedule takes effect.
    LinkChange(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeId {
    /// Sender of flow n to the bottleneck.
    Access(u32),
    /// Bottleneck to the receivers (shared, FIFO).
    Egress,
    /// Receiver of flow n back to its sender (ACK path).
    Ack(u32),
}

#[derive(Debug)]
struct Scheduled {
    time: SimTime,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Scheduled>>,
    next_seq: u64,
    processed: u64,
}

impl EventQueue {
    pub fn schedule(&mut self, time: SimTime, event: Event) {
        self.heap.push(Reverse(Scheduled { time, seq: self.next_seq, event }));
        self.next_seq += 1;
    }

    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        let Reverse(s) = self.heap.pop()?;
        self.processed += 1;
        Some((s.time, s.event))
    }

    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|Reverse(s)| s.time)
    }

    pub fn processed(&self) -> u64 {
        self.processed
    }
}

/// A lazily re-armed timer: moving its deadline later costs nothing; the heap
/// entry re-schedules itself when it pops early. Only an earlier deadline
/// pushes a new heap entry.
#[derive(Clone, Copy, Debug, Default)]
pub struct LazyTimer {
    deadline: Option<SimTime>,
    /// Time of the earliest live heap entry for this timer.
    scheduled_at: Option<SimTime>,
}

impl LazyTimer {
    pub fn deadline(&self) -> Option<SimTime> {
        self.deadline
    }

    pub fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }

    pub fn arm(&mut self, at: SimTime, queue: &mut EventQueue, event: Event) {
        self.deadline = Some(at);
        if self.scheduled_at.is_none_or(|s| at < s) {
            queue.schedule(at, event);
            self.scheduled_at = Some(at);
        }
    }

    pub fn cancel(&mut self) {
        self.deadline = None;
    }

    /// Called when a heap entry for this timer pops at `now`. Returns true if
    /// the timer is due; re-schedules itself if its deadline moved later.
    pub fn on_pop(&mut self, now: SimTime, queue: &mut EventQueue, event: Event) -> bool {
        if self.scheduled_at != Some(now) {
            return false; // a stale entry superseded by an earlier one
        }
        self.scheduled_at = None;
        match self.deadline {
            Some(d) if d <= now => {
                self.deadline = None;
                true
            }
            Some(d) => {
                queue.schedule(d, event);
                self.scheduled_at = Some(d);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_at_the_same_time_pop_in_scheduling_order() {
        let mut q = EventQueue::default();
        q.schedule(SimTime(5), Event::FlowStart(2));
        q.schedule(SimTime(5), Event::FlowStart(1));
        q.schedule(SimTime(1), Event::FlowSample);
        assert_eq!(q.pop(), Some((SimTime(1), Event::FlowSample)));
        assert_eq!(q.pop(), Some((SimTime(5), Event::FlowStart(2))));
        assert_eq!(q.pop(), Some((SimTime(5), Event::FlowStart(1))));
    }

    #[test]
    fn a_lazy_timer_moved_later_fires_once_at_its_final_deadline() {
        let mut q = EventQueue::default();
        let ev = Event::Timer(0, TimerKind::Retransmit);
        let mut t = LazyTimer::default();
        t.arm(SimTime(10), &mut q, ev);
        t.arm(SimTime(30), &mut q, ev);
        let mut fired = Vec::new();
        while let Some((now, e)) = q.pop() {
            if t.on_pop(now, &mut q, e) {
                fired.push(now);
            }
        }
        assert_eq!(fired, vec![SimTime(30)]);
    }

    #[test]
    fn a_lazy_timer_moved_earlier_fires_at_the_earlier_deadline_only() {
        let mut q = EventQueue::default();
        let ev = Event::Timer(0, TimerKind::Retransmit);
        let mut t = LazyTimer::default();
        t.arm(SimTime(30), &mut q, ev);
        t.arm(SimTime(10), &mut q, ev);
        let mut fired = Vec::new();
        while let Some((now, e)) = q.pop() {
            if t.on_pop(now, &mut q, e) {
                fired.push(now);
            }
        }
        assert_eq!(fired, vec![SimTime(10)]);
    }

    #[test]
    fn a_cancelled_timer_never_fires() {
        let mut q = EventQueue::default();
        let ev = Event::Timer(0, TimerKind::Pacing);
        let mut t = LazyTimer::default();
        t.arm(SimTime(10), &mut q, ev);
        t.cancel();
        while let Some((now, e)) = q.pop() {
            assert!(!t.on_pop(now, &mut q, e));
        }
    }
}
