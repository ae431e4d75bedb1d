//! A small test bench for queue disciplines: constant-rate sources feed a
//! qdisc, a link of fixed rate dequeues from it whenever it is free (as the
//! simulator's shaper does), and every delivered, dropped and marked packet
//! is recorded per source. Time advances event by event, in nanoseconds.

use crate::{DropReason, Ecn, Packet, PacketMeta, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;

/// A constant-bit-rate source (unresponsive: it ignores drops and marks).
#[derive(Clone, Copy, Debug)]
pub struct Source {
    pub flow_hash: u32,
    pub src_host_hash: u32,
    pub dst_host_hash: u32,
    pub len_bytes: u32,
    pub rate_bps: u64,
    pub ecn: Ecn,
    pub start_ns: u64,
    pub stop_ns: u64,
}

impl Source {
    /// A flow `id` from host `host` to one shared destination, 1514-byte frames.
    pub fn cbr(id: u32, rate_bps: u64) -> Self {
        Source {
            flow_hash: 0x9E37_79B9u32.wrapping_mul(id + 1),
            src_host_hash: 0x85EB_CA6Bu32.wrapping_mul(id + 1),
            dst_host_hash: 0xC2B2_AE35,
            len_bytes: 1514,
            rate_bps,
            ecn: Ecn::NotEct,
            start_ns: 0,
            stop_ns: u64::MAX,
        }
    }

    pub fn host(mut self, host: u32) -> Self {
        self.src_host_hash = 0x85EB_CA6Bu32.wrapping_mul(host + 1);
        self
    }

    pub fn dst(mut self, host: u32) -> Self {
        self.dst_host_hash = 0x27D4_EB2Fu32.wrapping_mul(host + 1);
        self
    }

    pub fn len(mut self, len_bytes: u32) -> Self {
        self.len_bytes = len_bytes;
        self
    }

    pub fn ecn(mut self, ecn: Ecn) -> Self {
        self.ecn = ecn;
        self
    }

    fn interval_ns(&self) -> u64 {
        self.len_bytes as u64 * 8 * 1_000_000_000 / self.rate_bps
    }
}

/// One delivered packet: when it left the link's queue and how long it waited.
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    pub at_ns: u64,
    pub sojourn_ns: u64,
    pub len_bytes: u32,
    pub ce: bool,
}

#[derive(Clone, Debug, Default)]
pub struct FlowReport {
    pub sent: u64,
    pub delivered: Vec<Delivery>,
    /// Times of AQM drops and of overflow drops.
    pub aqm_drops_ns: Vec<u64>,
    pub overflow_drops_ns: Vec<u64>,
}

impl FlowReport {
    /// Bytes delivered in [from_ns, to_ns).
    pub fn bytes_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        self.delivered.iter().filter(|d| d.at_ns >= from_ns && d.at_ns < to_ns).map(|d| d.len_bytes as u64).sum()
    }

    /// Sojourn percentile (0..=100) of packets delivered at or after `from_ns`, in ns.
    pub fn sojourn_percentile_ns(&self, from_ns: u64, pct: f64) -> u64 {
        percentile(self.delivered.iter().filter(|d| d.at_ns >= from_ns).map(|d| d.sojourn_ns).collect(), pct)
    }

    pub fn marks(&self) -> u64 {
        self.delivered.iter().filter(|d| d.ce).count() as u64
    }
}

pub fn percentile(mut v: Vec<u64>, pct: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let idx = ((pct / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[idx]
}

#[derive(Debug)]
pub struct Report {
    pub flows: Vec<FlowReport>,
    pub stats: QdiscStats,
}

impl Report {
    /// Mean sojourn of packets delivered at or after `from_ns`, in ns.
    pub fn sojourn_mean_ns(&self, from_ns: u64) -> f64 {
        let v: Vec<u64> = self
            .flows
            .iter()
            .flat_map(|f| f.delivered.iter())
            .filter(|d| d.at_ns >= from_ns)
            .map(|d| d.sojourn_ns)
            .collect();
        v.iter().sum::<u64>() as f64 / v.len().max(1) as f64
    }

    /// Sojourn percentile over every flow's packets delivered at or after `from_ns`.
    pub fn sojourn_percentile_ns(&self, from_ns: u64, pct: f64) -> u64 {
        percentile(
            self.flows
                .iter()
                .flat_map(|f| f.delivered.iter())
                .filter(|d| d.at_ns >= from_ns)
                .map(|d| d.sojourn_ns)
                .collect(),
            pct,
        )
    }
}

/// Runs `sources` into `q` for `duration_ns`, draining at `link_bps`.
pub fn drive<Q: Qdisc<u32>>(q: &mut Q, sources: &[Source], link_bps: u64, duration_ns: u64, seed: u64) -> Report {
    let mut rng = SimRng::new(seed);
    let mut flows = vec![FlowReport::default(); sources.len()];
    let mut next_arrival: Vec<u64> = sources.iter().map(|s| s.start_ns).collect();
    let mut tx_done: Option<u64> = None; // the link is sending until then
    let mut dropped = Vec::new();

    let tx_ns = |len: u32| len as u64 * 8 * 1_000_000_000 / link_bps;

    loop {
        let (src, arrival) = next_arrival
            .iter()
            .enumerate()
            .filter(|&(i, &t)| t < sources[i].stop_ns)
            .map(|(i, &t)| (i, t))
            .min_by_key(|&(_, t)| t)
            .unwrap_or((usize::MAX, u64::MAX));
        let now;
        match tx_done {
            // The link frees before (or as) the next packet arrives: it pulls the next one.
            Some(done) if done <= arrival => {
                now = done;
                tx_done = None;
            }
            _ => {
                if arrival >= duration_ns {
                    break;
                }
                now = arrival;
                let s = &sources[src];
                let meta = PacketMeta {
                    len_bytes: s.len_bytes,
                    flow_hash: s.flow_hash,
                    src_host_hash: s.src_host_hash,
                    dst_host_hash: s.dst_host_hash,
                    ecn: s.ecn,
                    enqueue_time: SimTime::ZERO,
                };
                flows[src].sent += 1;
                q.enqueue(SimTime(now), Packet { meta, inner: src as u32 }, &mut rng, &mut dropped);
                next_arrival[src] += s.interval_ns();
            }
        }
        if tx_done.is_none() {
            if let Some(p) = q.dequeue(SimTime(now), &mut rng, &mut dropped) {
                flows[p.inner as usize].delivered.push(Delivery {
                    at_ns: now,
                    sojourn_ns: now - p.meta.enqueue_time.as_nanos(),
                    len_bytes: p.meta.len_bytes,
                    ce: p.meta.ecn == Ecn::Ce,
                });
                tx_done = Some(now + tx_ns(p.meta.len_bytes));
            }
        }
        for d in dropped.drain(..) {
            let f = &mut flows[d.packet.inner as usize];
            match d.reason {
                DropReason::Aqm => f.aqm_drops_ns.push(now),
                DropReason::Overflow => f.overflow_drops_ns.push(now),
            }
        }
    }
    Report { flows, stats: q.stats() }
}
