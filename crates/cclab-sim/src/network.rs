//! The dumbbell's links: constant-delay FIFO pipes and the tbf-like bottleneck
//! pulling from a `cclab_aqm` queue discipline.

use cclab_aqm::delivery_trace::{self, DeliveryTrace};
use crate::FRAME_OVERHEAD_BYTES;
use cclab_aqm::{AnyQdisc, DropReason, Dropped, Ecn, Packet, Qdisc, QueueLimit};
use crate::stall::BottleneckStalls;
use cclab_cc::rng::SimRng;
use cclab_cc::{Bandwidth, SimDuration, SimTime};
use std::collections::VecDeque;

/// A data segment on the wire (what the links and the bottleneck queue carry).
#[derive(Clone, Copy, Debug)]
pub struct DataPacket {
    pub flow: u32,
    pub payload_bytes: u32,
    pub seq: u64,
    /// The IP header's ECN field: ECT(0) from an ECN sender, CE once an AQM marked it.
    pub ecn: Ecn,
    /// The TCP header's CWR flag.
    pub cwr: bool,
    /// The TCP header's PSH flag (the sender's `Transmission::psh`).
    pub psh: bool,
    /// The timestamp option's TSecr: the TSval of the last ACK the sender took.
    pub tsecr: SimTime,
    /// The timestamp option's TSval: when the sender sent it.
    pub tsval: SimTime,
}

impl DataPacket {
    pub fn frame_bytes(&self) -> u32 {
        self.payload_bytes + FRAME_OVERHEAD_BYTES
    }
}

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
        // A link keeps its order: after its delay shrinks (a scheduled RTT change), a packet
        // still arrives after the one sent before it.
        let arrival = self.in_flight.back().map_or(arrival, |(t, _)| arrival.max(*t));
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

/// `tbf burst` as the kernel engine sets it: max(10 MTU-sized frames, 250 us at
/// the rate) (docs/KERNEL_TESTBED.md: smaller bursts cannot reach the rate).
pub const TBF_MIN_BURST_FRAMES: u64 = 10;
pub const TBF_BURST_TIME: SimDuration = SimDuration::from_micros(250);

/// The bucket's depth at `rate`, as transmit time.
fn tbf_burst_ns(rate: Bandwidth, mtu_frame_bytes: u64) -> u64 {
    let burst_bytes = (TBF_MIN_BURST_FRAMES * mtu_frame_bytes).max(rate.bits_per_sec / 8 * TBF_BURST_TIME.as_nanos() / 1_000_000_000);
    rate.transmit_time(burst_bytes).as_nanos()
}

/// The bottleneck: a tbf-like token bucket on the router's egress pulling
/// from a queue discipline, as `tc qdisc add ... tbf` with a child qdisc does.
///
/// Like tbf_dequeue, the shaper takes the qdisc's head packet as soon as the
/// previous one has left (the qdisc decides then: CoDel's drops and marks act
/// at that instant) and holds it until the bucket has its tokens; it leaves at
/// that departure time, which no later arrival can change. So a departure is
/// known when the packet is dequeued; events are needed only when the link
/// frees with packets waiting (`next_dequeue`).
///
/// The scenario's buffer is the hard limit: an arrival that would exceed it is
/// tail-dropped before `Qdisc::enqueue`. The held packet counts in the backlog
/// (tbf's peeked skb stays in its child's qlen).
///
/// A FIFO's head never changes once queued and its dequeue reads no clock, so
/// for it the shaper books each packet at arrival with the departure it would
/// get when dequeued at max(arrival, previous departure): the same result,
/// without an event or a queue round trip per packet.
pub struct Bottleneck {
    rate: Bandwidth,
    /// The rate from each instant it took effect (one entry unless a schedule changed it),
    /// for the capacity the link offered over an interval.
    rate_history: Vec<(SimTime, Bandwidth)>,
    /// A Mahimahi trace serving the queue instead of the token bucket.
    trace: Option<DeliveryTrace>,
    mtu_frame_bytes: u64,
    limit: QueueLimit,
    /// Token bucket depth, as transmit time at the rate.
    burst_ns: u64,
    /// Tokens left after the last departure, as transmit time.
    credit_ns: u64,
    last_departure: SimTime,
    qdisc: AnyQdisc<DataPacket>,
    rng: SimRng,
    /// Late dequeues (stall.rs); none unless `set_stalls`.
    stalls: BottleneckStalls,
    /// Packets dequeued and waiting for their tokens: (departure, frame bytes).
    /// At most one unless `eager`.
    held: VecDeque<(SimTime, u32)>,
    held_bytes: u64,
    /// Dequeue at arrival (FIFO: see above).
    eager: bool,
    /// Packets that left the qdisc since the caller last drained them, with their departure.
    pub departed: Vec<(SimTime, DataPacket)>,
    /// Packets discarded since the caller last drained them (buffer, qdisc limit, AQM).
    pub dropped: Vec<Dropped<DataPacket>>,
    /// Counters since the start of the run.
    pub overflow_drops: u64,
    pub aqm_drops: u64,
    pub dequeued_bytes: u64,
    pub max_backlog_bytes: u64,
    /// The largest backlog since the measurement window began (`start_window`).
    pub window_max_backlog_bytes: u64,
    pub sojourn: SojournHistogram,
    /// DualPI2 only: each queue's sojourns, packets and the CE marks it set.
    pub dual_queue: Option<DualQueueCounters>,
}

/// Per-queue counters of a dual-queue AQM (DualPI2): the L4S queue and the classic one.
#[derive(Clone, Debug, Default)]
pub struct DualQueueCounters {
    pub l4s_sojourn: SojournHistogram,
    pub classic_sojourn: SojournHistogram,
    pub l4s_ce_marks: u64,
    pub classic_ce_marks: u64,
}

impl Bottleneck {
    pub fn new(rate: Bandwidth, limit: QueueLimit, mtu_frame_bytes: u64, qdisc: AnyQdisc<DataPacket>, rng: SimRng) -> Self {
        let burst_ns = tbf_burst_ns(rate, mtu_frame_bytes);
        let dual_queue = matches!(qdisc, AnyQdisc::DualPi2(_)).then(DualQueueCounters::default);
        Bottleneck {
            rate,
            rate_history: vec![(SimTime::ZERO, rate)],
            trace: None,
            mtu_frame_bytes,
            limit,
            burst_ns,
            credit_ns: burst_ns,
            last_departure: SimTime::ZERO,
            eager: matches!(qdisc, AnyQdisc::Fifo(_)),
            qdisc,
            rng,
            stalls: BottleneckStalls::none(),
            held: VecDeque::new(),
            held_bytes: 0,
            departed: Vec::new(),
            dropped: Vec::new(),
            overflow_drops: 0,
            aqm_drops: 0,
            dequeued_bytes: 0,
            max_backlog_bytes: 0,
            window_max_backlog_bytes: 0,
            sojourn: SojournHistogram::default(),
            dual_queue,
        }
    }

    /// Dequeues stall as `stalls` draws (token bucket only: a delivery trace has its own timing).
    pub fn set_stalls(&mut self, stalls: BottleneckStalls) {
        self.stalls = stalls;
    }

    /// Serves the queue from a delivery trace from now on (instead of the token bucket).
    pub fn use_trace(&mut self, trace: DeliveryTrace) {
        self.trace = Some(trace);
        self.eager = false;
    }

    /// Books every packet when it is dequeued rather than at arrival, so that a later rate
    /// change applies to the packets still queued (a FIFO books at arrival otherwise).
    pub fn book_at_dequeue(&mut self) {
        self.eager = false;
    }

    /// `tc qdisc change ... tbf rate`: packets dequeued from now on leave at `rate`; the one
    /// on the wire finishes at the old rate. tbf_change refills the bucket, whose depth
    /// follows the rate as the kernel engine sets it.
    pub fn set_rate(&mut self, now: SimTime, rate: Bandwidth) {
        debug_assert!(!self.eager, "a changing rate needs book_at_dequeue");
        self.advance(now);
        self.burst_ns = tbf_burst_ns(rate, self.mtu_frame_bytes);
        self.credit_ns = self.burst_ns;
        self.rate = rate;
        self.rate_history.push((now, rate));
    }

    /// The bits the link could have carried from `from` to `to` (the denominator of its
    /// utilization): rate x time, piecewise over rate changes, or the trace's opportunities
    /// as the frames of 1500-byte packets they carry, whatever the MTU.
    pub fn offered_bits(&self, from: SimTime, to: SimTime) -> f64 {
        if let Some(trace) = &self.trace {
            let opportunities = trace.opportunities_until(to) - trace.opportunities_until(from);
            let frame_bytes = (delivery_trace::OPPORTUNITY_BYTES + delivery_trace::ETHERNET_HEADER_BYTES) as u64;
            return (opportunities * frame_bytes * 8) as f64;
        }
        if let [(_, rate)] = self.rate_history[..] {
            return rate.bits_per_sec as f64 * to.saturating_since(from).as_secs_f64();
        }
        let mut bits = 0.0;
        for (i, &(since, rate)) in self.rate_history.iter().enumerate() {
            let until = self.rate_history.get(i + 1).map_or(SimTime::MAX, |&(t, _)| t);
            let (a, b) = (since.max(from), until.min(to));
            if b > a {
                bits += rate.bits_per_sec as f64 * b.saturating_since(a).as_secs_f64();
            }
        }
        bits
    }

    /// Every packet the bottleneck discarded: buffer and qdisc overflow, and AQM.
    pub fn drops(&self) -> u64 {
        self.overflow_drops + self.aqm_drops
    }

    /// Packets the qdisc set to CE.
    /// Bytes in the L4S queue of a dual-queue AQM; `None` for a single queue.
    pub fn l4s_backlog_bytes(&self) -> Option<u64> {
        match &self.qdisc {
            AnyQdisc::DualPi2(q) => Some(q.l_backlog_bytes()),
            _ => None,
        }
    }

    pub fn ce_marks(&self) -> u64 {
        self.qdisc.stats().ce_marks
    }

    /// Runs the link up to `now`: each time the held packet leaves, the next
    /// one is dequeued at that instant. Call before looking at the queue.
    pub fn advance(&mut self, now: SimTime) {
        if self.eager {
            // Every packet is already booked; only the backlog shrinks.
            while let Some(&(departure, bytes)) = self.held.front() {
                if departure > now {
                    return;
                }
                self.held.pop_front();
                self.held_bytes -= bytes as u64;
                self.dequeued_bytes += bytes as u64;
            }
            return;
        }
        loop {
            let free_at = match self.held.front() {
                Some(&(departure, bytes)) if departure <= now => {
                    self.held.pop_front();
                    self.held_bytes -= bytes as u64;
                    self.dequeued_bytes += bytes as u64;
                    departure
                }
                Some(_) => return,
                None => now,
            };
            if !self.held.is_empty() || !self.start_next(free_at) {
                return;
            }
        }
    }

    /// When the link frees with packets waiting: the time of the next dequeue.
    pub fn next_dequeue(&self) -> Option<SimTime> {
        match self.held.back() {
            Some(&(departure, _)) if self.qdisc.backlog_packets() > 0 => Some(departure),
            _ => None,
        }
    }

    /// Dequeues the qdisc's next packet at `t` (the link is free) and books its
    /// departure on the token bucket. False when the qdisc had nothing to send.
    fn start_next(&mut self, t: SimTime) -> bool {
        let before = self.dropped.len();
        let pkt = self.qdisc.dequeue(t, &mut self.rng, &mut self.dropped);
        self.count_drops(before);
        let Some(pkt) = pkt else { return false };
        self.book_departure(t, pkt);
        true
    }

    /// Books the departure of `pkt`, dequeued at `t`, on the token bucket.
    #[inline]
    fn book_departure(&mut self, t: SimTime, pkt: Packet<DataPacket>) {
        let sojourn = t.saturating_since(pkt.meta.enqueue_time);
        self.sojourn.record(sojourn);
        if let Some(dq) = &mut self.dual_queue {
            // CE now on a packet that was not sent CE: this queue marked it.
            let marked = (pkt.meta.ecn == Ecn::Ce && pkt.inner.ecn != Ecn::Ce) as u64;
            if pkt.meta.l4s_queue {
                dq.l4s_sojourn.record(sojourn);
                dq.l4s_ce_marks += marked;
            } else {
                dq.classic_sojourn.record(sojourn);
                dq.classic_ce_marks += marked;
            }
        }
        // Token bucket: tokens refill at the rate up to the burst; a frame
        // leaves once the bucket holds its size.
        let frame_bytes = pkt.meta.len_bytes;
        let start = t.max(self.last_departure);
        let departure = if let Some(trace) = &mut self.trace {
            trace.book_frame(start, frame_bytes)
        } else {
            let credit = (self.credit_ns + (start - self.last_departure).as_nanos()).min(self.burst_ns);
            let cost = self.rate.transmit_time(frame_bytes as u64).as_nanos();
            let (departure, credit_left) = if credit >= cost { (start, credit - cost) } else { (start + SimDuration(cost - credit), 0) };
            // A packet that had to wait is sent by a later dequeue, which may stall; tokens
            // accrue meanwhile, so the packets behind it catch up up to the bucket's depth.
            let stall = if departure > pkt.meta.enqueue_time { self.stalls.draw() } else { SimDuration::ZERO };
            self.credit_ns = (credit_left + stall.as_nanos()).min(self.burst_ns);
            departure + stall
        };
        self.last_departure = departure;
        self.held.push_back((departure, frame_bytes));
        self.held_bytes += frame_bytes as u64;
        let mut data = pkt.inner;
        data.ecn = pkt.meta.ecn;
        self.departed.push((departure, data));
    }

    /// Backlog at `now` (qdisc plus the packet waiting for tokens), in frame bytes.
    pub fn backlog_bytes(&mut self, now: SimTime) -> u64 {
        self.advance(now);
        self.qdisc.backlog_bytes() + self.held_bytes
    }

    pub fn backlog_packets(&mut self, now: SimTime) -> usize {
        self.advance(now);
        self.qdisc.backlog_packets() + self.held.len()
    }

    /// A frame arrives at `now`. It is tail-dropped if it would pass the
    /// buffer, else handed to the qdisc; what leaves or is discarded as a
    /// result goes to `departed` and `dropped`.
    pub fn enqueue(&mut self, now: SimTime, pkt: Packet<DataPacket>) {
        let frame_bytes = pkt.meta.len_bytes;
        self.advance(now);
        let full = match self.limit {
            QueueLimit::Bytes(limit) => self.qdisc.backlog_bytes() + self.held_bytes + frame_bytes as u64 > limit,
            QueueLimit::Packets(limit) => (self.qdisc.backlog_packets() + self.held.len()) as u64 >= limit,
        };
        if full {
            self.overflow_drops += 1;
            self.dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
            return;
        }
        if self.eager {
            // The FIFO would hand this packet out at max(now, last departure);
            // its own limit is the buffer's, already checked.
            self.book_departure(now.max(self.last_departure), pkt);
            if self.last_departure <= now {
                self.advance(now); // it left at once: never part of the backlog
            }
        } else {
            let before = self.dropped.len();
            self.qdisc.enqueue(now, pkt, &mut self.rng, &mut self.dropped);
            self.count_drops(before);
            if self.held.is_empty() {
                self.advance(now);
            }
        }
        let backlog = self.qdisc.backlog_bytes() + self.held_bytes;
        self.max_backlog_bytes = self.max_backlog_bytes.max(backlog);
        self.window_max_backlog_bytes = self.window_max_backlog_bytes.max(backlog);
    }

    /// Counts the qdisc's drops pushed after index `before` of `dropped`.
    fn count_drops(&mut self, before: usize) {
        if self.dropped.len() > before {
            let aqm = self.dropped[before..].iter().filter(|d| d.reason == DropReason::Aqm).count() as u64;
            self.aqm_drops += aqm;
            self.overflow_drops += (self.dropped.len() - before) as u64 - aqm;
        }
    }

    pub fn rate(&self) -> Bandwidth {
        self.rate
    }

    /// The measurement window begins: its largest backlog starts from the backlog as it
    /// stands (read without advancing the link, so the run itself is not touched).
    pub fn start_window(&mut self) {
        self.window_max_backlog_bytes = self.qdisc.backlog_bytes() + self.held_bytes;
    }
}

/// Sojourn times (dequeue - enqueue) in a histogram, so percentiles cost
/// bounded memory: 10 us bins up to 1 s, then 1 ms bins up to 100 s (longer
/// sojourns land in the last bin). A percentile reads as its bin's midpoint.
#[derive(Clone, Debug, Default)]
pub struct SojournHistogram {
    fine: Vec<u64>,
    coarse: Vec<u64>,
    count: u64,
    sum_ns: u128,
}

const FINE_BIN_NS: u64 = 10_000;
const FINE_LIMIT_NS: u64 = 1_000_000_000;
const COARSE_BIN_NS: u64 = 1_000_000;
const COARSE_LIMIT_NS: u64 = 100_000_000_000;

impl SojournHistogram {
    #[inline]
    pub fn record(&mut self, d: SimDuration) {
        let ns = d.as_nanos();
        let (bins, idx) = if ns < FINE_LIMIT_NS {
            (&mut self.fine, (ns / FINE_BIN_NS) as usize)
        } else {
            (&mut self.coarse, ((ns.min(COARSE_LIMIT_NS - 1) - FINE_LIMIT_NS) / COARSE_BIN_NS) as usize)
        };
        if bins.len() <= idx {
            bins.resize(idx + 1, 0);
        }
        bins[idx] += 1;
        self.count += 1;
        self.sum_ns += ns as u128;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sojourns recorded since `earlier` (a clone of this histogram taken before).
    pub fn since(&self, earlier: &SojournHistogram) -> SojournHistogram {
        let minus = |now: &[u64], then: &[u64]| -> Vec<u64> {
            now.iter().enumerate().map(|(i, &n)| n - then.get(i).copied().unwrap_or(0)).collect()
        };
        SojournHistogram {
            fine: minus(&self.fine, &earlier.fine),
            coarse: minus(&self.coarse, &earlier.coarse),
            count: self.count - earlier.count,
            sum_ns: self.sum_ns - earlier.sum_ns,
        }
    }

    pub fn mean_ms(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64 / 1e6)
    }

    /// Nearest-rank percentile (`q` in [0, 1]), in ms.
    pub fn percentile_ms(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &n) in self.fine.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some((i as u64 * FINE_BIN_NS + FINE_BIN_NS / 2) as f64 / 1e6);
            }
        }
        for (i, &n) in self.coarse.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some((FINE_LIMIT_NS + i as u64 * COARSE_BIN_NS + COARSE_BIN_NS / 2) as f64 / 1e6);
            }
        }
        unreachable!("rank <= count")
    }
}

#[cfg(test)]
#[path = "network_tests.rs"]
mod tests;
