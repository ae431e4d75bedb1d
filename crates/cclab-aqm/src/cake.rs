//! CAKE (Høiland-Jørgensen, Täht, Morton, "Piece of CAKE", 2018) as
//! net/sched/sch_cake.c runs it with no `bandwidth`: unlimited, the caller's
//! link shapes (`cake_dequeue`'s `!q->rate_ns` path).
//!
//! What is here, as in Linux:
//! - 1024 flow queues per tin with the 8-way set-associative hash (`cake_hash`),
//!   and per-host tables for the dual/triple isolation modes;
//! - DRR++ over new (sparse), old (bulk) and decaying flow lists, with the
//!   flow quantum divided by the host's bulk-flow count (`quantum_div`), so in
//!   triple-isolate each host gets an equal share whatever its flow count;
//! - COBALT per flow (see cobalt.rs), target 5 ms and interval 100 ms from rtt;
//! - overflow: while the memory in use exceeds the limit, drop from the head
//!   of the flow with the largest backlog (`cake_drop`), raising its BLUE.
//!
//! Simplified, and why it does not change what we measure:
//! - One tin. The default diffserv3 maps DSCP 0 (all our traffic) to its
//!   Best Effort tin; the other tins stay empty, and in unlimited mode the
//!   DRR between tins then always lands on Best Effort.
//! - Memory is counted in packet bytes, not skb truesize (Linux counts the
//!   kernel buffer, about 2x the wire size for small packets), so the default
//!   limit is reached later than in the kernel.
//! - The fattest flow is found by a scan instead of the max-heap; ties go to
//!   the lowest index, where the heap might choose another equal flow.
//! - No ACK filter, GSO splitting, NAT lookup, overhead/ATM compensation,
//!   or wash (all off by default).
//! - The set-associative hash follows the current kernel (the skb hash is used
//!   only in flow modes); the flow and host hashes come from the caller.

use crate::cobalt::{inv_sqrt_cache, CobaltParams, CobaltVars};
use crate::{DropReason, Dropped, Packet, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;
use serde::Deserialize;
use std::collections::VecDeque;

/// `tc qdisc ... cake` flow isolation modes (`CAKE_FLOW_*` in pkt_sched.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlowMode {
    Flowblind,
    Srchost,
    Dsthost,
    Hosts,
    Flows,
    DualSrchost,
    DualDsthost,
    TripleIsolate,
}

const FLOW_SRC_IP: u8 = 1;
const FLOW_DST_IP: u8 = 2;
const FLOW_HOSTS: u8 = 3;
const FLOW_FLOWS: u8 = 4;
const FLOW_DUAL_SRC: u8 = 5;
const FLOW_DUAL_DST: u8 = 6;

impl FlowMode {
    fn bits(self) -> u8 {
        match self {
            FlowMode::Flowblind => 0,
            FlowMode::Srchost => 1,
            FlowMode::Dsthost => 2,
            FlowMode::Hosts => 3,
            FlowMode::Flows => 4,
            FlowMode::DualSrchost => 5,
            FlowMode::DualDsthost => 6,
            FlowMode::TripleIsolate => 7,
        }
    }
}

/// `{"kind": "cake", ...}`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CakeConfig {
    /// `rtt`: CoDel's interval.
    pub rtt_ns: u64,
    /// `target` (tc sets rtt / 20).
    pub target_ns: u64,
    pub flow_mode: FlowMode,
    /// `memory`; null takes cake's default.
    pub memory_limit_bytes: Option<u64>,
    /// Linux CAKE always marks ECT packets; false drops them instead (not a tc option).
    pub ecn: bool,
}

/// sch_cake.c
const CAKE_QUEUES: usize = 1024;
const CAKE_SET_WAYS: usize = 8;
/// `cake_init`: sch->limit = 10240 packets, times psched_mtu(dev), bounds the memory.
const DEFAULT_LIMIT_PACKETS: u64 = 10240;
/// `cake_set_rate` with no rate: a literal 1514 there, whatever the device's MTU.
const FLOW_QUANTUM_BYTES: u32 = 1514;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Set {
    None,
    Sparse,
    /// Counted as sparse, but already in the bulk rotation.
    SparseWait,
    Bulk,
    Decaying,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chain {
    New,
    Old,
    Decaying,
}

struct Flow<P> {
    queue: VecDeque<Packet<P>>,
    deficit: i32,
    cvars: CobaltVars,
    srchost: u16,
    dsthost: u16,
    set: Set,
    chain: Option<Chain>,
}

#[derive(Clone, Copy, Default)]
struct Host {
    srchost_tag: u32,
    dsthost_tag: u32,
    srchost_bulk_flow_count: u16,
    dsthost_bulk_flow_count: u16,
}

pub struct Cake<P> {
    flow_mode: u8,
    flows: Vec<Flow<P>>,
    backlogs: Vec<u32>,
    tags: Vec<u32>,
    hosts: Vec<Host>,
    /// `quantum_div[i] = 65535 / i` (`cake_init`).
    quantum_div: Vec<u32>,
    cparams: CobaltParams,
    sparse_flow_count: u32,
    bulk_flow_count: u32,
    decaying_flow_count: u32,
    unresponsive_flow_count: u32,
    new_flows: VecDeque<u16>,
    old_flows: VecDeque<u16>,
    decaying_flows: VecDeque<u16>,
    buffer_used: u64,
    buffer_limit: u64,
    qlen: usize,
    backlog_bytes: u64,
    stats: QdiscStats,
}

impl<P> Cake<P> {
    /// `psched_mtu_bytes`: `psched_mtu(dev)`, which bounds the default memory limit.
    pub fn new(c: &CakeConfig, psched_mtu_bytes: u32) -> Self {
        // cake_set_rate(rate = 0): no serialisation time, so target and interval
        // are the configured ones (interval at least twice the target).
        let target_ns = c.target_ns.max(1);
        let cparams = CobaltParams {
            target_ns,
            interval_ns: c.rtt_ns.max(2 * target_ns),
            mtu_time_ns: 0,
            p_inc: 1 << 24,
            p_dec: 1 << 20,
            ecn: c.ecn,
            inv_sqrt: inv_sqrt_cache(),
        };
        // cake_reconfigure: unlimited rate -> ~0, capped by limit * mtu unless `memory` is set.
        let config_limit = c.memory_limit_bytes.unwrap_or(0);
        let buffer_limit = if config_limit > 0 { config_limit } else { u32::MAX as u64 };
        let buffer_limit = buffer_limit.min((DEFAULT_LIMIT_PACKETS * psched_mtu_bytes as u64).max(config_limit));
        Cake {
            flow_mode: c.flow_mode.bits(),
            flows: (0..CAKE_QUEUES)
                .map(|_| Flow {
                    queue: VecDeque::new(),
                    deficit: 0,
                    cvars: CobaltVars::default(),
                    srchost: 0,
                    dsthost: 0,
                    set: Set::None,
                    chain: None,
                })
                .collect(),
            backlogs: vec![0; CAKE_QUEUES],
            tags: vec![0; CAKE_QUEUES],
            hosts: vec![Host::default(); CAKE_QUEUES],
            quantum_div: (0..=CAKE_QUEUES as u32).map(|i| 65535u32.checked_div(i).unwrap_or(0)).collect(),
            cparams,
            sparse_flow_count: 0,
            bulk_flow_count: 0,
            decaying_flow_count: 0,
            unresponsive_flow_count: 0,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            decaying_flows: VecDeque::new(),
            buffer_used: 0,
            buffer_limit,
            qlen: 0,
            backlog_bytes: 0,
            stats: QdiscStats::default(),
        }
    }

    fn dual_src(&self) -> bool {
        self.flow_mode & FLOW_DUAL_SRC == FLOW_DUAL_SRC
    }

    fn dual_dst(&self) -> bool {
        self.flow_mode & FLOW_DUAL_DST == FLOW_DUAL_DST
    }

    /// `cake_hash`: the queue for this packet, reserving a way of its set and
    /// the host slots its flow counts against.
    fn hash(&mut self, meta: &crate::PacketMeta) -> usize {
        let mode = self.flow_mode;
        if mode == 0 {
            return 0;
        }
        let (srchost_hash, dsthost_hash) =
            if mode & FLOW_HOSTS != 0 { (meta.src_host_hash, meta.dst_host_hash) } else { (0, 0) };
        let mut flow_hash = if mode & FLOW_FLOWS != 0 { meta.flow_hash } else { 0 };
        if mode & FLOW_FLOWS == 0 {
            if mode & FLOW_SRC_IP != 0 {
                flow_hash ^= srchost_hash;
            }
            if mode & FLOW_DST_IP != 0 {
                flow_hash ^= dsthost_hash;
            }
        }
        let reduced = flow_hash as usize % CAKE_QUEUES;
        // Fast path: the direct slot already belongs to this flow.
        if self.tags[reduced] == flow_hash && self.flows[reduced].set != Set::None {
            return reduced;
        }
        let inner = reduced % CAKE_SET_WAYS;
        let outer = reduced - inner;
        let (dsrc, ddst) = (self.dual_src(), self.dual_dst());
        let mut k = inner;
        let mut slot = None;
        // A way of the set already reserved for this flow?
        for _ in 0..CAKE_SET_WAYS {
            if self.tags[outer + k] == flow_hash {
                let empty = self.flows[outer + k].set == Set::None;
                slot = Some((outer + k, empty));
                break;
            }
            k = (k + 1) % CAKE_SET_WAYS;
        }
        // Else an empty way.
        if slot.is_none() {
            for _ in 0..CAKE_SET_WAYS {
                if self.flows[outer + k].set == Set::None {
                    slot = Some((outer + k, true));
                    break;
                }
                k = (k + 1) % CAKE_SET_WAYS;
            }
        }
        let (idx, allocate) = match slot {
            Some(s) => s,
            None => {
                // All ways busy: share the original queue, releasing its hosts.
                let idx = outer + k;
                if self.flows[idx].set == Set::Bulk {
                    self.dec_host_bulk(idx);
                }
                (idx, true)
            }
        };
        self.tags[idx] = flow_hash;
        if allocate && dsrc {
            let h = self.host_slot(
                srchost_hash,
                |h| h.srchost_tag,
                |h| h.srchost_bulk_flow_count,
                |h, t| h.srchost_tag = t,
            );
            if self.flows[idx].set == Set::Bulk {
                self.hosts[h].srchost_bulk_flow_count += 1;
            }
            self.flows[idx].srchost = h as u16;
        }
        if allocate && ddst {
            let h = self.host_slot(
                dsthost_hash,
                |h| h.dsthost_tag,
                |h| h.dsthost_bulk_flow_count,
                |h, t| h.dsthost_tag = t,
            );
            if self.flows[idx].set == Set::Bulk {
                self.hosts[h].dsthost_bulk_flow_count += 1;
            }
            self.flows[idx].dsthost = h as u16;
        }
        idx
    }

    /// The host slot for `hash`: the way tagged with it, else one with no bulk
    /// flows (else the original way), newly tagged.
    fn host_slot(
        &mut self,
        hash: u32,
        tag: impl Fn(&Host) -> u32,
        bulk: impl Fn(&Host) -> u16,
        set_tag: impl Fn(&mut Host, u32),
    ) -> usize {
        let idx = hash as usize % CAKE_QUEUES;
        let inner = idx % CAKE_SET_WAYS;
        let outer = idx - inner;
        let mut k = inner;
        for _ in 0..CAKE_SET_WAYS {
            if tag(&self.hosts[outer + k]) == hash {
                return outer + k;
            }
            k = (k + 1) % CAKE_SET_WAYS;
        }
        for _ in 0..CAKE_SET_WAYS {
            if bulk(&self.hosts[outer + k]) == 0 {
                break;
            }
            k = (k + 1) % CAKE_SET_WAYS;
        }
        set_tag(&mut self.hosts[outer + k], hash);
        outer + k
    }

    fn inc_host_bulk(&mut self, idx: usize) {
        let (s, d) = (self.flows[idx].srchost as usize, self.flows[idx].dsthost as usize);
        if self.dual_src() {
            self.hosts[s].srchost_bulk_flow_count += 1;
        }
        if self.dual_dst() {
            self.hosts[d].dsthost_bulk_flow_count += 1;
        }
    }

    fn dec_host_bulk(&mut self, idx: usize) {
        let (s, d) = (self.flows[idx].srchost as usize, self.flows[idx].dsthost as usize);
        if self.dual_src() {
            self.hosts[s].srchost_bulk_flow_count -= 1;
        }
        if self.dual_dst() {
            self.hosts[d].dsthost_bulk_flow_count -= 1;
        }
    }

    /// The number of bulk flows of this flow's busiest host (1 at least).
    fn host_load(&self, idx: usize) -> usize {
        let f = &self.flows[idx];
        let mut load = 1u16;
        if self.dual_src() {
            load = load.max(self.hosts[f.srchost as usize].srchost_bulk_flow_count);
        }
        if self.dual_dst() {
            load = load.max(self.hosts[f.dsthost as usize].dsthost_bulk_flow_count);
        }
        load as usize
    }

    fn chain(&mut self, c: Chain) -> &mut VecDeque<u16> {
        match c {
            Chain::New => &mut self.new_flows,
            Chain::Old => &mut self.old_flows,
            Chain::Decaying => &mut self.decaying_flows,
        }
    }

    fn unlink(&mut self, idx: usize) {
        if let Some(c) = self.flows[idx].chain.take() {
            let list = self.chain(c);
            let pos = list.iter().position(|&i| i as usize == idx).expect("flow on its chain");
            list.remove(pos);
        }
    }

    /// `list_move_tail`.
    fn move_tail(&mut self, idx: usize, c: Chain) {
        self.unlink(idx);
        self.chain(c).push_back(idx as u16);
        self.flows[idx].chain = Some(c);
    }

    fn dequeue_one(&mut self, idx: usize) -> Option<Packet<P>> {
        let pkt = self.flows[idx].queue.pop_front()?;
        let len = pkt.meta.len_bytes;
        self.backlogs[idx] -= len;
        self.backlog_bytes -= len as u64;
        self.buffer_used -= len as u64;
        self.qlen -= 1;
        Some(pkt)
    }

    /// `cake_drop`: drop the head of the flow with the largest backlog.
    fn drop_fattest(&mut self, now_ns: i64, dropped: &mut Vec<Dropped<P>>) {
        let idx = (0..CAKE_QUEUES).fold(0, |best, i| if self.backlogs[i] > self.backlogs[best] { i } else { best });
        let Some(pkt) = self.dequeue_one(idx) else {
            return;
        };
        if self.flows[idx].cvars.queue_full(&self.cparams, now_ns) {
            self.unresponsive_flow_count += 1;
        }
        self.stats.overflow_drops += 1;
        dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
    }
}

impl<P> Qdisc<P> for Cake<P> {
    /// `cake_enqueue`.
    fn enqueue(&mut self, now: SimTime, mut pkt: Packet<P>, _rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        let idx = self.hash(&pkt.meta);
        let len = pkt.meta.len_bytes;
        pkt.meta.enqueue_time = now;
        self.flows[idx].queue.push_back(pkt);
        self.qlen += 1;
        self.buffer_used += len as u64;
        self.backlogs[idx] += len;
        self.backlog_bytes += len as u64;

        match self.flows[idx].set {
            Set::None | Set::Decaying => {
                if self.flows[idx].set == Set::Decaying {
                    self.decaying_flow_count -= 1;
                }
                self.move_tail(idx, Chain::New);
                self.flows[idx].set = Set::Sparse;
                self.sparse_flow_count += 1;
                // A new flow starts with its host-scaled quantum.
                let load = self.host_load(idx);
                self.flows[idx].deficit = ((FLOW_QUANTUM_BYTES * self.quantum_div[load]) >> 16) as i32;
            }
            Set::SparseWait => {
                // Empty, counted sparse, but already in the bulk rotation.
                self.flows[idx].set = Set::Bulk;
                self.sparse_flow_count -= 1;
                self.bulk_flow_count += 1;
                self.inc_host_bulk(idx);
            }
            Set::Sparse | Set::Bulk => {}
        }
        while self.buffer_used > self.buffer_limit {
            self.drop_fattest(now.as_nanos() as i64, dropped);
        }
    }

    /// `cake_dequeue`, unlimited mode.
    fn dequeue(&mut self, now: SimTime, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        let now_ns = now.as_nanos() as i64;
        let mut first_flow = true;
        'begin: loop {
            if self.qlen == 0 || self.sparse_flow_count + self.bulk_flow_count == 0 {
                return None;
            }
            loop {
                // Decaying flows are visited first once per call, then new, then old.
                let chain = if first_flow && !self.decaying_flows.is_empty() {
                    Chain::Decaying
                } else if !self.new_flows.is_empty() {
                    Chain::New
                } else if !self.old_flows.is_empty() {
                    Chain::Old
                } else if !self.decaying_flows.is_empty() {
                    Chain::Decaying
                } else {
                    return None;
                };
                let idx = self.chain(chain)[0] as usize;
                first_flow = false;

                // DRR++: a flow out of deficit goes to the back of the bulk
                // rotation with a fresh quantum scaled by its host's load.
                if self.flows[idx].deficit <= 0 {
                    if self.flows[idx].set == Set::Sparse {
                        if !self.flows[idx].queue.is_empty() {
                            self.sparse_flow_count -= 1;
                            self.bulk_flow_count += 1;
                            self.flows[idx].set = Set::Bulk;
                            self.inc_host_bulk(idx);
                        } else {
                            self.flows[idx].set = Set::SparseWait;
                        }
                    }
                    let load = self.host_load(idx);
                    // The random low bits dither away the rounding (sch_cake.c).
                    let dither = (rng.next_u64() >> 32) as u32 >> 16;
                    self.flows[idx].deficit += ((FLOW_QUANTUM_BYTES * self.quantum_div[load] + dither) >> 16) as i32;
                    self.move_tail(idx, Chain::Old);
                    continue;
                }

                // Retrieve a packet via the AQM.
                loop {
                    let Some(mut pkt) = self.dequeue_one(idx) else {
                        // The queue was empty.
                        if self.flows[idx].cvars.queue_empty(&self.cparams, now_ns) {
                            self.unresponsive_flow_count -= 1;
                        }
                        let cv = self.flows[idx].cvars;
                        let set = self.flows[idx].set;
                        if cv.p_drop != 0 || cv.count != 0 || now_ns < cv.drop_next_ns {
                            // Keep it in the rotation until COBALT has decayed to rest.
                            self.move_tail(idx, Chain::Decaying);
                            match set {
                                Set::Bulk => {
                                    self.bulk_flow_count -= 1;
                                    self.dec_host_bulk(idx);
                                    self.decaying_flow_count += 1;
                                }
                                Set::Sparse | Set::SparseWait => {
                                    self.sparse_flow_count -= 1;
                                    self.decaying_flow_count += 1;
                                }
                                _ => {}
                            }
                            self.flows[idx].set = Set::Decaying;
                        } else {
                            self.unlink(idx);
                            match set {
                                Set::Sparse | Set::SparseWait => self.sparse_flow_count -= 1,
                                Set::Bulk => {
                                    self.bulk_flow_count -= 1;
                                    self.dec_host_bulk(idx);
                                }
                                _ => self.decaying_flow_count -= 1,
                            }
                            self.flows[idx].set = Set::None;
                        }
                        continue 'begin;
                    };
                    let drop = self.flows[idx].cvars.should_drop(
                        &self.cparams,
                        now_ns,
                        &mut pkt.meta,
                        0, // bulk flows count only with ingress shaping
                        &mut self.stats,
                        rng,
                    );
                    // The last packet of a queue is delivered even when COBALT would drop it.
                    if !drop || self.flows[idx].queue.is_empty() {
                        self.flows[idx].deficit -= pkt.meta.len_bytes as i32;
                        return Some(pkt);
                    }
                    self.stats.aqm_drops += 1;
                    dropped.push(Dropped { packet: pkt, reason: DropReason::Aqm });
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
#[path = "cake_tests.rs"]
mod tests;
