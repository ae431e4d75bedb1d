//! FQ-CoDel (RFC 8290) as net/sched/sch_fq_codel.c runs it: packets hashed
//! into `flows` queues, each managed by its own CoDel state; a deficit round
//! robin with a byte `quantum` serves new flows (just became active) ahead of
//! old ones; when the qdisc is over its packet or memory limit it drops from
//! the head of the fattest queue, up to half of that queue's bytes and at most
//! `drop_batch` packets at a time (fq_codel_drop).

use crate::codel::{reciprocal_scale, CodelParams, CodelQueue, CodelVars};
use crate::PSCHED_MTU_BYTES;
use crate::{DropReason, Dropped, Packet, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;
use serde::Deserialize;
use std::collections::VecDeque;

/// `{"kind": "fq_codel", ...}` in the resolved config; defaults are fq_codel_init's.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FqCodelConfig {
    pub target_ns: u64,
    pub interval_ns: u64,
    pub limit_packets: u64,
    pub flows: u32,
    pub quantum_bytes: u32,
    pub ecn: bool,
    pub ce_threshold_ns: Option<u64>,
    pub memory_limit_bytes: u64,
    pub drop_batch: u32,
}

impl Default for FqCodelConfig {
    fn default() -> Self {
        // fq_codel_init: limit 10*1024, 1024 flows, memory_limit 32 MB, drop_batch 64,
        // quantum psched_mtu(dev), ECN on; codel_params_init: 5 ms / 100 ms.
        FqCodelConfig {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            limit_packets: 10 * 1024,
            flows: 1024,
            quantum_bytes: PSCHED_MTU_BYTES,
            ecn: true,
            ce_threshold_ns: None,
            memory_limit_bytes: 32 << 20,
            drop_batch: 64,
        }
    }
}

/// `struct fq_codel_flow`: one queue, its DRR deficit and its CoDel state.
struct FlowQueue<P> {
    queue: VecDeque<Packet<P>>,
    /// `q->backlogs[idx]`.
    backlog_bytes: u64,
    deficit: i64,
    vars: CodelVars,
    /// On the new or old list (`!list_empty(&flow->flowchain)`).
    listed: bool,
}

pub struct FqCodel<P> {
    params: CodelParams,
    flows: Vec<FlowQueue<P>>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    quantum_bytes: i64,
    limit_packets: u64,
    memory_limit_bytes: u64,
    drop_batch: u32,
    qlen: usize,
    backlog_bytes: u64,
    /// Linux counts `skb->truesize`; the simulator has no skb overhead, so this
    /// counts frame bytes (a lower bound: the limit binds later than in Linux).
    memory_usage_bytes: u64,
    stats: QdiscStats,
    /// New flows seen (`new_flow_count`).
    pub new_flow_count: u64,
}

/// One flow queue as CoDel sees it, with the qdisc-wide counters it updates
/// (fq_codel's `dequeue_func` and `drop_func`).
struct FlowView<'a, P> {
    flow: &'a mut FlowQueue<P>,
    qlen: &'a mut usize,
    backlog_bytes: &'a mut u64,
    memory_usage_bytes: &'a mut u64,
    dropped: &'a mut Vec<Dropped<P>>,
}

impl<P> CodelQueue<P> for FlowView<'_, P> {
    fn dequeue_head(&mut self) -> Option<Packet<P>> {
        let pkt = self.flow.queue.pop_front()?;
        let len = pkt.meta.len_bytes as u64;
        self.flow.backlog_bytes -= len;
        *self.memory_usage_bytes -= len;
        *self.qlen -= 1;
        *self.backlog_bytes -= len;
        Some(pkt)
    }
    /// codel_dequeue gets `&sch->qstats.backlog`: the whole qdisc's backlog.
    fn backlog_bytes(&self) -> u64 {
        *self.backlog_bytes
    }
    fn drop_packet(&mut self, packet: Packet<P>) {
        self.dropped.push(Dropped { packet, reason: DropReason::Aqm });
    }
}

impl<P> FqCodel<P> {
    pub fn new(cfg: &FqCodelConfig, psched_mtu_bytes: u32) -> Self {
        let flows = cfg.flows.clamp(1, 65536);
        FqCodel {
            params: CodelParams::new(cfg.target_ns, cfg.interval_ns, cfg.ce_threshold_ns, cfg.ecn, psched_mtu_bytes),
            flows: (0..flows)
                .map(|_| FlowQueue { queue: VecDeque::new(), backlog_bytes: 0, deficit: 0, vars: CodelVars::default(), listed: false })
                .collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            // fq_codel_change: quantum at least 256; drop_batch at least 1.
            quantum_bytes: cfg.quantum_bytes.max(256) as i64,
            limit_packets: cfg.limit_packets,
            memory_limit_bytes: cfg.memory_limit_bytes.min(1 << 31),
            drop_batch: cfg.drop_batch.max(1),
            qlen: 0,
            backlog_bytes: 0,
            memory_usage_bytes: 0,
            stats: QdiscStats::default(),
            new_flow_count: 0,
        }
    }

    /// fq_codel_hash: `reciprocal_scale(skb_get_hash(skb), flows_cnt)`.
    pub fn classify(&self, flow_hash: u32) -> usize {
        reciprocal_scale(flow_hash, self.flows.len() as u32) as usize
    }

    /// Bytes queued in flow queue `idx`.
    pub fn flow_backlog_bytes(&self, idx: usize) -> u64 {
        self.flows[idx].backlog_bytes
    }

    /// fq_codel_drop: drop from the head of the fattest queue until half its
    /// bytes are gone or `max_packets` were dropped; returns that queue.
    fn drop_from_fattest(&mut self, max_packets: u32, dropped: &mut Vec<Dropped<P>>) -> usize {
        let (mut idx, mut max_backlog) = (0, 0);
        for (i, f) in self.flows.iter().enumerate() {
            if f.backlog_bytes > max_backlog {
                max_backlog = f.backlog_bytes;
                idx = i;
            }
        }
        let threshold = max_backlog >> 1;
        let flow = &mut self.flows[idx];
        let (mut len, mut i) = (0u64, 0u32);
        loop {
            let Some(pkt) = flow.queue.pop_front() else { break };
            len += pkt.meta.len_bytes as u64;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
            i += 1;
            if i >= max_packets || len >= threshold {
                break;
            }
        }
        // Tell CoDel to raise its signal too.
        flow.vars.count = flow.vars.count.wrapping_add(i);
        flow.backlog_bytes -= len;
        self.memory_usage_bytes -= len;
        self.backlog_bytes -= len;
        self.qlen -= i as usize;
        self.stats.overflow_drops += i as u64;
        idx
    }
}

impl<P> Qdisc<P> for FqCodel<P> {
    fn enqueue(&mut self, now: SimTime, mut pkt: Packet<P>, _rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        let idx = self.classify(pkt.meta.flow_hash);
        pkt.meta.enqueue_time = now;
        let len = pkt.meta.len_bytes as u64;
        let flow = &mut self.flows[idx];
        flow.queue.push_back(pkt);
        flow.backlog_bytes += len;
        self.backlog_bytes += len;
        if !flow.listed {
            // A newly active queue joins the new list with a full quantum.
            flow.listed = true;
            flow.deficit = self.quantum_bytes;
            self.new_flows.push_back(idx as u32);
            self.new_flow_count += 1;
        }
        self.memory_usage_bytes += len;
        self.qlen += 1;
        let memory_limited = self.memory_usage_bytes > self.memory_limit_bytes;
        if self.qlen as u64 <= self.limit_packets && !memory_limited {
            return;
        }
        self.drop_from_fattest(self.drop_batch, dropped);
    }

    fn dequeue(&mut self, now: SimTime, _rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        loop {
            let from_new = !self.new_flows.is_empty();
            let &idx = if from_new { self.new_flows.front() } else { self.old_flows.front() }?;
            let flow = &mut self.flows[idx as usize];
            if flow.deficit <= 0 {
                // Used its quantum this round: refill and go to the back of the old list.
                flow.deficit += self.quantum_bytes;
                if from_new { self.new_flows.pop_front() } else { self.old_flows.pop_front() };
                self.old_flows.push_back(idx);
                continue;
            }
            let mut vars = flow.vars;
            let pkt = {
                let mut view = FlowView {
                    flow,
                    qlen: &mut self.qlen,
                    backlog_bytes: &mut self.backlog_bytes,
                    memory_usage_bytes: &mut self.memory_usage_bytes,
                    dropped,
                };
                vars.dequeue(now, &self.params, &mut view, &mut self.stats)
            };
            let flow = &mut self.flows[idx as usize];
            flow.vars = vars;
            match pkt {
                Some(pkt) => {
                    flow.deficit -= pkt.meta.len_bytes as i64;
                    return Some(pkt);
                }
                None => {
                    // Empty: a new flow takes one pass through the old list (so old
                    // flows are not starved); an old one leaves the lists.
                    if from_new { self.new_flows.pop_front() } else { self.old_flows.pop_front() };
                    if from_new && !self.old_flows.is_empty() {
                        self.old_flows.push_back(idx);
                    } else {
                        flow.listed = false;
                    }
                }
            }
        }
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    fn backlog_packets(&self) -> usize {
        self.qlen
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Ecn, PacketMeta};

    const FRAME: u32 = 1514;

    fn pkt(flow_hash: u32, id: u32, ecn: Ecn) -> Packet<u32> {
        Packet { meta: PacketMeta { len_bytes: FRAME, flow_hash, src_host_hash: 0, dst_host_hash: 0, ecn, enqueue_time: SimTime::ZERO, l4s_queue: false }, inner: id }
    }

    /// Hashes that land in distinct queues of a 1024-queue fq_codel.
    const BULK: u32 = 0x1000_0000;
    const SPARSE: u32 = 0x8000_0000;

    #[test]
    fn a_sparse_flow_is_served_ahead_of_a_backlogged_bulk_flow() {
        let mut q = FqCodel::new(&FqCodelConfig::default(), PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for i in 0..100 {
            q.enqueue(SimTime(0), pkt(BULK, i, Ecn::NotEct), &mut rng, &mut dropped);
        }
        // The bulk flow uses up its first quantum and moves to the old list.
        q.dequeue(SimTime(1), &mut rng, &mut dropped).unwrap();
        q.dequeue(SimTime(2), &mut rng, &mut dropped).unwrap();
        q.enqueue(SimTime(3), pkt(SPARSE, 1000, Ecn::NotEct), &mut rng, &mut dropped);
        // The sparse packet, behind 98 bulk packets in a FIFO, leaves next.
        assert_eq!(q.dequeue(SimTime(4), &mut rng, &mut dropped).unwrap().inner, 1000);
    }

    #[test]
    fn two_backlogged_flows_share_the_link_by_bytes() {
        let mut q = FqCodel::new(&FqCodelConfig::default(), PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for i in 0..200 {
            q.enqueue(SimTime(0), pkt(BULK, i, Ecn::NotEct), &mut rng, &mut dropped);
            q.enqueue(SimTime(0), pkt(SPARSE, 1000 + i, Ecn::NotEct), &mut rng, &mut dropped);
        }
        let bulk = (0..200).filter(|_| q.dequeue(SimTime(1), &mut rng, &mut dropped).unwrap().inner < 1000).count();
        assert_eq!(bulk, 100);
    }

    #[test]
    fn over_the_limit_fq_codel_drops_from_the_fattest_flow_up_to_half_its_bytes() {
        let cfg = FqCodelConfig { limit_packets: 100, ..Default::default() };
        let mut q = FqCodel::new(&cfg, PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for i in 0..10 {
            q.enqueue(SimTime(0), pkt(SPARSE, i, Ecn::NotEct), &mut rng, &mut dropped);
        }
        for i in 0..91 {
            q.enqueue(SimTime(0), pkt(BULK, 100 + i, Ecn::NotEct), &mut rng, &mut dropped);
        }
        // The 101st packet overflows: the 91-packet flow loses its oldest half (46 packets).
        assert_eq!(dropped.len(), 46);
        assert!(dropped.iter().all(|d| d.packet.inner >= 100 && d.reason == DropReason::Overflow));
        assert_eq!(dropped[0].packet.inner, 100, "head drop");
        assert_eq!(q.flow_backlog_bytes(q.classify(SPARSE)), 10 * FRAME as u64);
        assert_eq!(q.backlog_packets(), 101 - 46);
        // CoDel's count of the fat flow rises by the drops.
        assert_eq!(q.flows[q.classify(BULK)].vars.count, 46);
    }

    #[test]
    fn a_drop_batch_caps_the_packets_dropped_per_overflow() {
        let cfg = FqCodelConfig { limit_packets: 100, drop_batch: 8, ..Default::default() };
        let mut q = FqCodel::new(&cfg, PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for i in 0..101 {
            q.enqueue(SimTime(0), pkt(BULK, i, Ecn::NotEct), &mut rng, &mut dropped);
        }
        assert_eq!(dropped.len(), 8);
    }

    #[test]
    fn a_standing_queue_of_ect_packets_is_marked_not_dropped() {
        let mut q = FqCodel::new(&FqCodelConfig::default(), PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        let mut marked = 0;
        // Two arrivals per 1 ms departure for 1 s: the sojourn passes target for long.
        for ms in 0..1000u64 {
            for k in 0..2 {
                q.enqueue(SimTime(ms * 1_000_000 + k * 500_000), pkt(BULK, 0, Ecn::Ect0), &mut rng, &mut dropped);
            }
            if q.dequeue(SimTime((ms + 1) * 1_000_000), &mut rng, &mut dropped).unwrap().meta.ecn == Ecn::Ce {
                marked += 1;
            }
        }
        assert!(dropped.is_empty());
        assert!(marked > 5);
        assert_eq!(q.stats().ce_marks, marked);
    }

    #[test]
    fn not_ect_packets_are_dropped_by_the_same_standing_queue() {
        let mut q = FqCodel::new(&FqCodelConfig::default(), PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for ms in 0..1000u64 {
            for k in 0..2 {
                q.enqueue(SimTime(ms * 1_000_000 + k * 500_000), pkt(BULK, 0, Ecn::NotEct), &mut rng, &mut dropped);
            }
            q.dequeue(SimTime((ms + 1) * 1_000_000), &mut rng, &mut dropped);
        }
        assert!(!dropped.is_empty());
        assert!(dropped.iter().all(|d| d.reason == DropReason::Aqm));
        assert_eq!(q.stats().aqm_drops, dropped.len() as u64);
        assert_eq!(q.stats().ce_marks, 0);
    }
}
