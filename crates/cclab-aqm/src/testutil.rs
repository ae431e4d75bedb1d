//! A small test bench for queue disciplines: sources feed a qdisc, a link of
//! fixed rate dequeues from it whenever it is free (as the simulator's shaper
//! does), and every delivered, dropped and marked packet is recorded per
//! source. Time advances event by event, in nanoseconds.
//!
//! A source is either constant-rate (unresponsive) or a window-limited AIMD
//! sender, a Reno caricature: its ACK returns `rtt_ns` after the packet left
//! the queue, a drop or CE mark is seen one RTT later and halves the window
//! at most once per RTT; each ACK adds 1/cwnd. A scalable source (DCTCP in the
//! small, RFC 8257 with g = 1) instead cuts its window once per RTT by half the
//! fraction of that RTT's ACKs that carried CE; a drop still halves.

use crate::{DropReason, Ecn, Packet, PacketMeta, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Window state of an AIMD source.
#[derive(Clone, Copy, Debug)]
pub struct Aimd {
    /// Round trip without queueing.
    pub rtt_ns: u64,
    /// Reduce by half a packet per CE mark (scalable) instead of halving once per RTT.
    pub scalable: bool,
}

/// A traffic source; `rate_bps` is its line rate (a CBR source's only rate).
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
    pub aimd: Option<Aimd>,
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
            aimd: None,
        }
    }

    /// A window-limited AIMD flow with line rate `rate_bps` and base RTT `rtt_ns`.
    pub fn aimd(id: u32, rate_bps: u64, rtt_ns: u64) -> Self {
        Source { aimd: Some(Aimd { rtt_ns, scalable: false }), ..Source::cbr(id, rate_bps) }
    }

    /// A window-limited flow with a scalable response to CE, marking its packets ECT(1).
    pub fn scalable(id: u32, rate_bps: u64, rtt_ns: u64) -> Self {
        Source { aimd: Some(Aimd { rtt_ns, scalable: true }), ecn: Ecn::Ect1, ..Source::cbr(id, rate_bps) }
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

/// Per-source sending state of the bench.
struct Sender {
    next_send_ns: u64,
    cwnd: f64,
    in_flight: u64,
    recover_until_ns: u64,
    /// A scalable source's round: when it ends, its ACKs and CE marks so far.
    round_end_ns: u64,
    round_acks: u32,
    round_marks: u32,
}

/// Runs `sources` into `q` for `duration_ns`, draining at `link_bps`.
pub fn drive<Q: Qdisc<u32>>(q: &mut Q, sources: &[Source], link_bps: u64, duration_ns: u64, seed: u64) -> Report {
    let mut rng = SimRng::new(seed);
    let mut flows = vec![FlowReport::default(); sources.len()];
    let mut senders: Vec<Sender> = sources
        .iter()
        .map(|s| Sender { next_send_ns: s.start_ns, cwnd: 2.0, in_flight: 0, recover_until_ns: 0, round_end_ns: 0, round_acks: 0, round_marks: 0 })
        .collect();
    // ACKs and loss notices back at AIMD senders: (time, seq, source, congestion signal, a drop).
    let mut feedback: BinaryHeap<Reverse<(u64, u64, usize, bool, bool)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut tx_done: Option<u64> = None; // the link is sending until then
    let mut dropped = Vec::new();

    let tx_ns = |len: u32| len as u64 * 8 * 1_000_000_000 / link_bps;
    let may_send =
        |s: &Source, w: &Sender| w.next_send_ns < s.stop_ns && (s.aimd.is_none() || (w.in_flight as f64) < w.cwnd);

    loop {
        let (src, arrival) = senders
            .iter()
            .enumerate()
            .filter(|&(i, w)| may_send(&sources[i], w))
            .map(|(i, w)| (i, w.next_send_ns))
            .min_by_key(|&(_, t)| t)
            .unwrap_or((usize::MAX, u64::MAX));
        let back = feedback.peek().map_or(u64::MAX, |Reverse(f)| f.0);
        let done = tx_done.unwrap_or(u64::MAX);
        let now = done.min(back).min(arrival);
        if now >= duration_ns {
            break;
        }
        if done == now {
            // The link is free: it pulls the next packet below.
            tx_done = None;
        } else if back == now {
            let Reverse((_, _, i, congestion, drop)) = feedback.pop().unwrap();
            let w = &mut senders[i];
            w.in_flight -= 1;
            let a = sources[i].aimd.unwrap();
            if a.scalable && !drop {
                w.round_acks += 1;
                w.round_marks += congestion as u32;
                if now >= w.round_end_ns {
                    let marked = w.round_marks as f64 / w.round_acks as f64;
                    w.cwnd = (w.cwnd * (1.0 - marked / 2.0)).max(1.0);
                    (w.round_acks, w.round_marks, w.round_end_ns) = (0, 0, now + a.rtt_ns);
                }
                if !congestion {
                    w.cwnd += 1.0 / w.cwnd;
                }
            } else if congestion {
                if now >= w.recover_until_ns {
                    w.cwnd = (w.cwnd / 2.0).max(1.0);
                    w.recover_until_ns = now + sources[i].aimd.unwrap().rtt_ns;
                }
            } else {
                w.cwnd += 1.0 / w.cwnd;
            }
            // A window that was closed reopens now, not in the past.
            w.next_send_ns = w.next_send_ns.max(now);
        } else {
            let s = &sources[src];
            let meta = PacketMeta {
                len_bytes: s.len_bytes,
                flow_hash: s.flow_hash,
                src_host_hash: s.src_host_hash,
                dst_host_hash: s.dst_host_hash,
                ecn: s.ecn,
                enqueue_time: SimTime::ZERO,
                l4s_queue: false,
            };
            flows[src].sent += 1;
            senders[src].in_flight += 1;
            senders[src].next_send_ns += s.interval_ns();
            q.enqueue(SimTime(now), Packet { meta, inner: src as u32 }, &mut rng, &mut dropped);
        }
        if tx_done.is_none() {
            if let Some(p) = q.dequeue(SimTime(now), &mut rng, &mut dropped) {
                let i = p.inner as usize;
                let ce = p.meta.ecn == Ecn::Ce;
                flows[i].delivered.push(Delivery {
                    at_ns: now,
                    sojourn_ns: now - p.meta.enqueue_time.as_nanos(),
                    len_bytes: p.meta.len_bytes,
                    ce,
                });
                let tx = tx_ns(p.meta.len_bytes);
                tx_done = Some(now + tx);
                if let Some(a) = sources[i].aimd {
                    seq += 1;
                    feedback.push(Reverse((now + tx + a.rtt_ns, seq, i, ce, false)));
                }
            }
        }
        for d in dropped.drain(..) {
            let i = d.packet.inner as usize;
            let f = &mut flows[i];
            match d.reason {
                DropReason::Aqm => f.aqm_drops_ns.push(now),
                DropReason::Overflow => f.overflow_drops_ns.push(now),
            }
            if let Some(a) = sources[i].aimd {
                seq += 1;
                feedback.push(Reverse((now + a.rtt_ns, seq, i, true, true)));
            }
        }
    }
    Report { flows, stats: q.stats() }
}
