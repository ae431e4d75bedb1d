//! Tail-drop FIFO: `bfifo` (byte limit) and `pfifo` (packet limit),
//! net/sched/sch_fifo.c.

use crate::{DropReason, Dropped, Packet, QdiscStats, Qdisc, QueueLimit};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;
use std::collections::VecDeque;

pub struct Fifo<P> {
    limit: QueueLimit,
    queue: VecDeque<Packet<P>>,
    backlog_bytes: u64,
    stats: QdiscStats,
}

impl<P> Fifo<P> {
    pub fn new(limit: QueueLimit) -> Self {
        Fifo { limit, queue: VecDeque::new(), backlog_bytes: 0, stats: QdiscStats::default() }
    }
}

impl<P> Qdisc<P> for Fifo<P> {
    fn enqueue(&mut self, now: SimTime, mut pkt: Packet<P>, _rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        // bfifo_enqueue / pfifo_enqueue: admit while the new total stays within the limit.
        let full = match self.limit {
            QueueLimit::Bytes(limit) => self.backlog_bytes + pkt.meta.len_bytes as u64 > limit,
            QueueLimit::Packets(limit) => self.queue.len() as u64 >= limit,
        };
        if full {
            self.stats.overflow_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
            return;
        }
        pkt.meta.enqueue_time = now;
        self.backlog_bytes += pkt.meta.len_bytes as u64;
        self.queue.push_back(pkt);
    }

    fn dequeue(&mut self, _now: SimTime, _rng: &mut SimRng, _dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        let pkt = self.queue.pop_front()?;
        self.backlog_bytes -= pkt.meta.len_bytes as u64;
        Some(pkt)
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    fn backlog_packets(&self) -> usize {
        self.queue.len()
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ecn, PacketMeta};

    fn pkt(id: u32, len: u32) -> Packet<u32> {
        Packet {
            meta: PacketMeta { len_bytes: len, flow_hash: 0, src_host_hash: 0, dst_host_hash: 0, ecn: Ecn::NotEct, enqueue_time: SimTime::ZERO, l4s_queue: false },
            inner: id,
        }
    }

    #[test]
    fn a_byte_limited_fifo_drops_the_arrival_that_would_pass_the_limit() {
        let mut q = Fifo::new(QueueLimit::Bytes(3000));
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for i in 0..3 {
            q.enqueue(SimTime(i), pkt(i as u32, 1514), &mut rng, &mut dropped);
        }
        // Two 1514-byte frames would exceed 3000 bytes: only the first is queued.
        assert_eq!(q.backlog_packets(), 1);
        assert_eq!(dropped.len(), 2);
        assert_eq!(q.stats().overflow_drops, 2);
    }

    #[test]
    fn a_fifo_sends_in_arrival_order_and_stamps_enqueue_time() {
        let mut q = Fifo::new(QueueLimit::Packets(10));
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for i in 0..5u64 {
            q.enqueue(SimTime(i * 10), pkt(i as u32, 100), &mut rng, &mut dropped);
        }
        for i in 0..5u64 {
            let p = q.dequeue(SimTime(100), &mut rng, &mut dropped).unwrap();
            assert_eq!(p.inner, i as u32);
            assert_eq!(p.meta.enqueue_time, SimTime(i * 10));
        }
        assert!(q.dequeue(SimTime(100), &mut rng, &mut dropped).is_none());
        assert_eq!(q.backlog_bytes(), 0);
    }
}
