//! The userspace bottleneck: where the kernel lacks the AQM qdisc, the router's data
//! direction goes to an NFQUEUE queue and this module plays tbf with that AQM as its child
//! (tbf_dequeue over qdisc_peek_dequeued): a token bucket at the bottleneck rate pulls
//! packets from a `cclab_aqm::AnyQdisc` built from the resolved `bottleneck.aqm`, so every
//! AQM the simulator has runs here unchanged. Dropped packets get NF_DROP; packets the AQM
//! marked get their IP ECN field set to CE (ipv4.rs) and NF_ACCEPT with the new bytes.
//!
//! The scenario's buffer is the hard limit, applied before `enqueue` as a tail drop (as the
//! simulator's caller does); the qdisc applies its own tc limit itself.

use crate::ipv4::{self, ETH_HEADER_BYTES};
use crate::nfq::{QueuedPacket, NF_ACCEPT, NF_DROP};
use crate::shaper::{Shaper, TokenBucket, TraceShaper};
use cclab_aqm::delivery_trace::DeliveryTrace;
use cclab_aqm::{AnyQdisc, AqmConfig, DropReason, Dropped, Ecn, Packet, PacketMeta, Qdisc, QueueLimit};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;
use std::collections::HashMap;

/// The settings the engine passes on the command line.
pub struct BottleneckConfig {
    pub queue: u16,
    pub rate_bps: u64,
    pub burst_bytes: u64,
    pub limit: QueueLimit,
    pub aqm: AqmConfig,
    pub seed: u64,
    pub series_interval_ns: i64,
    /// `psched_mtu(dev)`: the device's MTU with its Ethernet header.
    pub psched_mtu_bytes: u32,
}

/// A packet held in user space: its NFQUEUE id and bytes (the whole packet, to rewrite ECN).
pub struct Held {
    id: u32,
    arrival_ns: i64,
    flow: usize,
    bytes: Vec<u8>,
}

/// What to tell the kernel about one packet.
pub struct Verdict {
    pub id: u32,
    pub verdict: u32,
    /// The rewritten packet (CE-marked), else None.
    pub payload: Option<Vec<u8>>,
}

#[derive(Default, Clone, serde::Serialize)]
pub struct FlowCounters {
    pub saddr: String,
    pub daddr: String,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    pub enqueued: u64,
    pub sent: u64,
    pub bytes_sent: u64,
    pub overflow_drops: u64,
    pub aqm_drops: u64,
    pub ce_marks: u64,
}

/// Queue occupancy and cumulative counters, sampled every `series_interval_ns`.
#[derive(Default, serde::Serialize)]
pub struct Series {
    pub time_realtime_ns: Vec<i64>,
    pub backlog_bytes: Vec<u64>,
    pub backlog_packets: Vec<u64>,
    pub drops: Vec<u64>,
    pub ce_marks: Vec<u64>,
    pub bytes_sent: Vec<u64>,
}

/// One queue of a dual-queue AQM (DualPI2): what it released, as the simulator's
/// `DualQueueCounters` counts it (crates/cclab-sim/src/network.rs).
#[derive(Default)]
struct QueueCounters {
    sojourn_ns: Vec<i64>,
    ce_marks: u64,
}

impl QueueCounters {
    fn report(&self) -> serde_json::Value {
        let mut soj = self.sojourn_ns.clone();
        soj.sort_unstable();
        serde_json::json!({"packets": soj.len(), "ce_marks": self.ce_marks, "sojourn_ns": summary(&soj)})
    }
}

/// A flow's 5-tuple: source and destination address, protocol, source and destination port.
type FlowKey = ([u8; 4], [u8; 4], u8, u16, u16);

pub struct Bottleneck {
    pub cfg_queue: u16,
    aqm_name: &'static str,
    rate_bps: u64,
    burst_bytes: u64,
    limit: QueueLimit,
    qdisc: AnyQdisc<Held>,
    shaper: Shaper,
    /// tbf's peeked packet (qdisc_peek_dequeued): dequeued from the AQM, waiting for tokens.
    peeked: Option<Packet<Held>>,
    /// When the shaper said the peeked packet may leave (for the release lateness).
    due_ns: Option<i64>,
    rng: SimRng,
    epoch_ns: i64,
    last_qdisc_ns: i64,
    dropped: Vec<Dropped<Held>>,
    flow_of: HashMap<FlowKey, usize>,
    pub flows: Vec<FlowCounters>,
    sojourn_ns: Vec<i64>,
    /// DualPI2's L4S and classic queues (index 1 and 0), counted only under it.
    dual_queues: Option<[QueueCounters; 2]>,
    lateness_ns: Vec<i64>,
    packets_in: u64,
    unparsed: u64,
    overflow_drops: u64,
    aqm_drops: u64,
    ce_marks: u64,
    bytes_sent: u64,
    series: Series,
    series_interval_ns: i64,
    next_sample_ns: i64,
}

/// 32-bit FNV-1a with a final avalanche (murmur3's fmix32): flows spread over fq_codel's
/// buckets like skb_get_hash's flow hash does; the exact function does not matter.
fn hash32(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

impl Bottleneck {
    pub fn new(cfg: BottleneckConfig, now_ns: i64) -> Self {
        Bottleneck {
            cfg_queue: cfg.queue,
            aqm_name: cfg.aqm.name(),
            rate_bps: cfg.rate_bps,
            burst_bytes: cfg.burst_bytes,
            limit: cfg.limit,
            qdisc: cfg.aqm.build(cfg.limit, cfg.rate_bps, cfg.psched_mtu_bytes),
            shaper: Shaper::Bucket(TokenBucket::new(cfg.rate_bps, cfg.burst_bytes, now_ns)),
            peeked: None,
            due_ns: None,
            rng: SimRng::new(cfg.seed),
            epoch_ns: now_ns,
            last_qdisc_ns: now_ns,
            dropped: Vec::new(),
            flow_of: HashMap::new(),
            flows: Vec::new(),
            sojourn_ns: Vec::new(),
            dual_queues: (cfg.aqm.name() == "dualpi2").then(Default::default),
            lateness_ns: Vec::new(),
            packets_in: 0,
            unparsed: 0,
            overflow_drops: 0,
            aqm_drops: 0,
            ce_marks: 0,
            bytes_sent: 0,
            series: Series::default(),
            series_interval_ns: cfg.series_interval_ns,
            next_sample_ns: now_ns,
        }
    }

    /// The qdisc's clock: ns since this bottleneck started, never going back (arrival
    /// stamps come from the kernel and may be older than the last dequeue).
    fn sim_time(&mut self, t_ns: i64) -> SimTime {
        self.last_qdisc_ns = self.last_qdisc_ns.max(t_ns);
        SimTime((self.last_qdisc_ns - self.epoch_ns) as u64)
    }

    fn backlog_bytes(&self) -> u64 {
        self.qdisc.backlog_bytes() + self.peeked.as_ref().map_or(0, |p| p.meta.len_bytes as u64)
    }

    fn backlog_packets(&self) -> u64 {
        self.qdisc.backlog_packets() as u64 + self.peeked.is_some() as u64
    }

    fn flow_index(&mut self, h: &ipv4::Header) -> usize {
        let key = (h.saddr, h.daddr, h.proto, h.sport, h.dport);
        if let Some(&i) = self.flow_of.get(&key) {
            return i;
        }
        let dotted = |a: [u8; 4]| format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
        self.flows.push(FlowCounters {
            saddr: dotted(h.saddr),
            daddr: dotted(h.daddr),
            proto: h.proto,
            sport: h.sport,
            dport: h.dport,
            ..Default::default()
        });
        self.flow_of.insert(key, self.flows.len() - 1);
        self.flows.len() - 1
    }

    /// A packet arrived in the bottleneck's queue at `arrival_ns` (kernel receive stamp).
    pub fn arrive(&mut self, p: QueuedPacket, arrival_ns: i64, out: &mut Vec<Verdict>) {
        let bytes = p.payload.unwrap_or_default();
        let Some(h) = ipv4::parse(&bytes) else {
            // Not IPv4 (nothing of the kind is routed here): pass it rather than guess.
            self.unparsed += 1;
            out.push(Verdict { id: p.id, verdict: NF_ACCEPT, payload: None });
            return;
        };
        self.packets_in += 1;
        let flow = self.flow_index(&h);
        self.flows[flow].enqueued += 1;
        let len_bytes = h.ip_len as u32 + ETH_HEADER_BYTES;
        let mut tuple = Vec::with_capacity(13);
        tuple.extend_from_slice(&h.saddr);
        tuple.extend_from_slice(&h.daddr);
        tuple.push(h.proto);
        tuple.extend_from_slice(&h.sport.to_be_bytes());
        tuple.extend_from_slice(&h.dport.to_be_bytes());
        let meta = PacketMeta {
            len_bytes,
            flow_hash: hash32(&tuple),
            src_host_hash: hash32(&h.saddr),
            dst_host_hash: hash32(&h.daddr),
            ecn: h.ecn,
            enqueue_time: SimTime::ZERO,
            l4s_queue: false,
        };
        let pkt = Packet { meta, inner: Held { id: p.id, arrival_ns, flow, bytes } };
        // The scenario's buffer: a tail drop before the qdisc, like the simulator's caller.
        let full = match self.limit {
            QueueLimit::Bytes(limit) => self.backlog_bytes() + len_bytes as u64 > limit,
            QueueLimit::Packets(limit) => self.backlog_packets() >= limit,
        };
        if full {
            self.dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
        } else {
            let now = self.sim_time(arrival_ns);
            self.qdisc.enqueue(now, pkt, &mut self.rng, &mut self.dropped);
        }
        self.flush_drops(out);
    }

    fn flush_drops(&mut self, out: &mut Vec<Verdict>) {
        for d in self.dropped.drain(..) {
            let f = &mut self.flows[d.packet.inner.flow];
            match d.reason {
                DropReason::Overflow => {
                    self.overflow_drops += 1;
                    f.overflow_drops += 1;
                }
                DropReason::Aqm => {
                    self.aqm_drops += 1;
                    f.aqm_drops += 1;
                }
            }
            out.push(Verdict { id: d.packet.inner.id, verdict: NF_DROP, payload: None });
        }
    }

    /// `tc qdisc change ... tbf rate`: a new rate and bucket depth from `now_ns`, the bucket
    /// full (tbf_change); a packet already waiting for tokens is asked again at the new rate.
    pub fn set_rate(&mut self, rate_bps: u64, burst_bytes: u64, now_ns: i64) {
        self.rate_bps = rate_bps;
        self.burst_bytes = burst_bytes;
        self.shaper = Shaper::Bucket(TokenBucket::new(rate_bps, burst_bytes, now_ns));
    }

    /// Serves the queue from a delivery trace whose time zero is `start_ns` from now on.
    pub fn start_trace(&mut self, trace: DeliveryTrace, start_ns: i64) {
        self.shaper = Shaper::Trace(TraceShaper::new(trace, start_ns));
    }

    /// Releases every packet the shaper allows at `now_ns`; returns when it next can.
    pub fn service(&mut self, now_ns: i64, out: &mut Vec<Verdict>) -> Option<i64> {
        loop {
            if self.peeked.is_none() {
                let now = self.sim_time(now_ns);
                self.peeked = self.qdisc.dequeue(now, &mut self.rng, &mut self.dropped);
                self.flush_drops(out);
            }
            let head = self.peeked.as_ref()?;
            let (len, arrival_ns) = (head.meta.len_bytes as u64, head.inner.arrival_ns);
            if let Err(wait_ns) = self.shaper.try_send(len, now_ns, arrival_ns) {
                self.due_ns = Some(now_ns + wait_ns);
                return Some(now_ns + wait_ns);
            }
            if let Some(due) = self.due_ns.take() {
                self.lateness_ns.push(now_ns - due);
            }
            let pkt = self.peeked.take().unwrap();
            self.release(pkt, now_ns, out);
        }
    }

    fn release(&mut self, pkt: Packet<Held>, now_ns: i64, out: &mut Vec<Verdict>) {
        let Held { id, arrival_ns, flow, mut bytes } = pkt.inner;
        self.sojourn_ns.push(now_ns - arrival_ns);
        self.bytes_sent += pkt.meta.len_bytes as u64;
        let f = &mut self.flows[flow];
        f.sent += 1;
        f.bytes_sent += pkt.meta.len_bytes as u64;
        // The AQM marked it (Ecn::Ce on an ECT packet): write CE into the IP header.
        let marked = pkt.meta.ecn == Ecn::Ce && ipv4::set_ce(&mut bytes);
        if marked {
            self.ce_marks += 1;
            f.ce_marks += 1;
        }
        if let Some(queues) = self.dual_queues.as_mut() {
            let queue = &mut queues[pkt.meta.l4s_queue as usize];
            queue.sojourn_ns.push(now_ns - arrival_ns);
            queue.ce_marks += marked as u64;
        }
        out.push(Verdict { id, verdict: NF_ACCEPT, payload: marked.then_some(bytes) });
    }

    /// When the next series sample is due.
    pub fn next_sample_ns(&self) -> i64 {
        self.next_sample_ns
    }

    pub fn sample_if_due(&mut self, now_ns: i64) {
        if now_ns < self.next_sample_ns {
            return;
        }
        let s = &mut self.series;
        s.time_realtime_ns.push(now_ns);
        s.backlog_bytes.push(self.qdisc.backlog_bytes() + self.peeked.as_ref().map_or(0, |p| p.meta.len_bytes as u64));
        s.backlog_packets.push(self.qdisc.backlog_packets() as u64 + self.peeked.is_some() as u64);
        s.drops.push(self.overflow_drops + self.aqm_drops);
        s.ce_marks.push(self.ce_marks);
        s.bytes_sent.push(self.bytes_sent);
        self.next_sample_ns += self.series_interval_ns;
        if self.next_sample_ns <= now_ns {
            // Fell behind (a long sleep while idle): skip the missed ticks.
            let missed = (now_ns - self.next_sample_ns) / self.series_interval_ns + 1;
            self.next_sample_ns += missed * self.series_interval_ns;
        }
    }

    pub fn report(&self, cpu_s: f64) -> serde_json::Value {
        let mut soj = self.sojourn_ns.clone();
        soj.sort_unstable();
        let mut late = self.lateness_ns.clone();
        late.sort_unstable();
        let q = self.qdisc.stats();
        let (limit_bytes, limit_packets) = match self.limit {
            QueueLimit::Bytes(b) => (Some(b), None),
            QueueLimit::Packets(p) => (None, Some(p)),
        };
        serde_json::json!({
            "queue": self.cfg_queue,
            "aqm": self.aqm_name,
            "rate_bps": self.rate_bps,
            "burst_bytes": self.burst_bytes,
            "limit_bytes": limit_bytes,
            "limit_packets": limit_packets,
            "packets_in": self.packets_in,
            "packets_sent": self.sojourn_ns.len(),
            "bytes_sent": self.bytes_sent,
            "unparsed_accepted": self.unparsed,
            "overflow_drops": self.overflow_drops,
            "aqm_drops": self.aqm_drops,
            "ce_marks": self.ce_marks,
            "qdisc_stats": {"overflow_drops": q.overflow_drops, "aqm_drops": q.aqm_drops, "ce_marks": q.ce_marks},
            "backlog_packets_at_end": self.backlog_packets(),
            "sojourn_ns": summary(&soj),
            "release_lateness_ns": summary(&late),
            "cpu_s": cpu_s,
            "flows": self.flows,
            "series": self.series,
            "dual_queues": self.dual_queues.as_ref().map(|[classic, l4s]| serde_json::json!({"l4s": l4s.report(), "classic": classic.report()})),
        })
    }
}

fn summary(sorted: &[i64]) -> serde_json::Value {
    let pct = |q: f64| if sorted.is_empty() { 0 } else { sorted[((sorted.len() - 1) as f64 * q).round() as usize] };
    let mean = if sorted.is_empty() { 0.0 } else { sorted.iter().sum::<i64>() as f64 / sorted.len() as f64 };
    serde_json::json!({
        "count": sorted.len(), "mean": mean, "p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99),
        "max": sorted.last().copied().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(id: u16, tos: u8, payload: usize) -> Vec<u8> {
        let total = (20 + 32 + payload) as u16;
        let mut p = vec![0x45, tos, (total >> 8) as u8, total as u8, (id >> 8) as u8, id as u8, 0x40, 0, 64, 6, 0, 0];
        p.extend_from_slice(&[10, 200, 1, 2, 10, 200, 0, 2, 0x9c, 0x41, 0x14, 0x51]);
        p.resize(total as usize, 0);
        let c = ipv4::header_checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn queued(id: u32, bytes: Vec<u8>) -> QueuedPacket {
        QueuedPacket { queue: 7, id, rx_realtime_ns: None, payload: Some(bytes) }
    }

    fn fifo(rate_bps: u64, limit: QueueLimit) -> Bottleneck {
        let cfg = BottleneckConfig {
            queue: 7, rate_bps, burst_bytes: 2 * 1514, limit, aqm: AqmConfig::Fifo, seed: 1, series_interval_ns: 1_000_000,
            psched_mtu_bytes: cclab_aqm::PSCHED_MTU_BYTES,
        };
        Bottleneck::new(cfg, 0)
    }

    #[test]
    fn the_buffer_tail_drops_arrivals_beyond_it_and_counts_them_per_flow() {
        let mut b = fifo(10_000_000, QueueLimit::Bytes(3 * 1514));
        let mut out = Vec::new();
        for i in 0..5 {
            b.arrive(queued(i, segment(i as u16, 0x02, 1448)), 0, &mut out);
        }
        let drops: Vec<u32> = out.iter().filter(|v| v.verdict == NF_DROP).map(|v| v.id).collect();
        assert_eq!(drops, vec![3, 4]);
        assert_eq!(b.flows[0].overflow_drops, 2);
        assert_eq!(b.flows[0].enqueued, 5);
    }

    #[test]
    fn packets_leave_at_the_rate_after_the_burst_with_their_sojourn_measured() {
        let rate = 12_112_000; // one 1514-byte frame per ms
        let mut b = fifo(rate, QueueLimit::Packets(100));
        let mut out = Vec::new();
        for i in 0..10 {
            b.arrive(queued(i, segment(i as u16, 0x00, 1448)), 0, &mut out);
        }
        let mut now = 0;
        let mut sent_at = Vec::new();
        while sent_at.len() < 10 {
            let mut v = Vec::new();
            let next = b.service(now, &mut v);
            sent_at.extend(v.iter().map(|_| now));
            match next {
                Some(t) => now = t,
                None => break,
            }
        }
        // Two frames of burst at t = 0, then one per ms.
        assert_eq!(&sent_at[..3], &[0, 0, 1_000_000]);
        assert_eq!(sent_at[9], 8_000_000);
        assert_eq!(*b.sojourn_ns.last().unwrap(), 8_000_000);
        assert_eq!(b.flows[0].bytes_sent, 10 * 1514);
    }

    #[test]
    fn under_dualpi2_each_queue_counts_its_own_packets_sojourns_and_marks() {
        let aqm = AqmConfig::DualPi2(cclab_aqm::dualpi2::DualPi2Config::default());
        let cfg = BottleneckConfig { queue: 7, rate_bps: 100_000_000, burst_bytes: 2 * 1514, limit: QueueLimit::Packets(10), aqm, seed: 1, series_interval_ns: 1_000_000, psched_mtu_bytes: cclab_aqm::PSCHED_MTU_BYTES };
        let mut b = Bottleneck::new(cfg, 0);
        let mut out = Vec::new();
        // An ECT(1) packet (L4S) released 2 ms after arriving, and a not-ECT one (classic) 5 ms after.
        for (id, tos, release_ns, l4s) in [(1, 0x01, 2_000_000, true), (2, 0x00, 5_000_000, false)] {
            b.arrive(queued(id, segment(id as u16, tos, 100)), 0, &mut out);
            let mut pkt = b.qdisc.dequeue(SimTime(0), &mut b.rng, &mut b.dropped).unwrap();
            assert_eq!(pkt.meta.l4s_queue, l4s);
            pkt.meta.ecn = if l4s { Ecn::Ce } else { pkt.meta.ecn }; // the step marks the L4S one
            b.release(pkt, release_ns, &mut out);
        }
        let report = b.report(0.0)["dual_queues"].clone();
        assert_eq!((report["l4s"]["packets"].as_u64(), report["l4s"]["ce_marks"].as_u64()), (Some(1), Some(1)));
        assert_eq!((report["classic"]["packets"].as_u64(), report["classic"]["ce_marks"].as_u64()), (Some(1), Some(0)));
        assert_eq!(report["l4s"]["sojourn_ns"]["p50"].as_i64(), Some(2_000_000));
        assert_eq!(report["classic"]["sojourn_ns"]["p50"].as_i64(), Some(5_000_000));
        assert!(fifo(100_000_000, QueueLimit::Packets(10)).report(0.0)["dual_queues"].is_null());
    }

    #[test]
    fn a_packet_the_aqm_set_to_ce_leaves_with_ce_in_its_header_and_a_valid_checksum() {
        let mut b = fifo(100_000_000, QueueLimit::Packets(10));
        let mut out = Vec::new();
        b.arrive(queued(1, segment(1, 0x02, 100)), 0, &mut out);
        // Stand in for an AQM's mark: the qdisc sets meta.ecn = Ce at dequeue.
        let mut pkt = b.qdisc.dequeue(SimTime(0), &mut b.rng, &mut b.dropped).unwrap();
        pkt.meta.ecn = Ecn::Ce;
        b.release(pkt, 5, &mut out);
        let v = out.pop().unwrap();
        let bytes = v.payload.expect("a marked packet carries its new bytes");
        assert_eq!((v.id, v.verdict), (1, NF_ACCEPT));
        assert_eq!(bytes[1] & 0b11, 0b11);
        assert_eq!(u16::from_be_bytes([bytes[10], bytes[11]]), ipv4::header_checksum(&bytes[..20]));
        assert_eq!((b.ce_marks, b.flows[0].ce_marks), (1, 1));
    }
}
