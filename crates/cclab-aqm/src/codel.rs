//! CoDel (RFC 8289) as Linux runs it: the control law and state machine of
//! include/net/codel_impl.h (`codel_should_drop`, `codel_dequeue`), the time
//! and fixed-point types of include/net/codel.h, and the single-queue qdisc of
//! net/sched/sch_codel.c. fq_codel runs one [`CodelVars`] per flow queue.
//!
//! Where RFC 8289 and Linux differ, this follows Linux: time in 1024 ns units
//! (`CODEL_SHIFT`), 1/sqrt(count) kept as a Q0.16 number refined by one Newton
//! step per drop instead of an exact sqrt, and the "re-enter with the previous
//! drop rate" rule on `count - lastcount` (RFC 8289 section 5.6 leaves it open).

use crate::ecn::set_ce;
use crate::{DropReason, Dropped, Packet, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;
use serde::Deserialize;
use std::collections::VecDeque;

/// include/net/codel.h: CoDel's clock ticks every 1024 ns, in a wrapping u32.
pub const CODEL_SHIFT: u32 = 10;
/// include/net/codel.h: `rec_inv_sqrt` is a u16; shift it to Q0.32.
const REC_INV_SQRT_SHIFT: u32 = 32 - 16;

/// `codel_time_t`: u32 in 1024 ns ticks.
pub type CodelTime = u32;

pub fn codel_time(t: SimTime) -> CodelTime {
    (t.as_nanos() >> CODEL_SHIFT) as u32
}

pub fn ns_to_codel(ns: u64) -> CodelTime {
    (ns >> CODEL_SHIFT) as u32
}

/// `codel_time_after(a, b)`: serial-number compare (RFC 1982).
fn after(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

fn after_eq(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// `reciprocal_scale(val, ep_ro)` (include/linux/math.h): val * ep_ro / 2^32.
pub fn reciprocal_scale(val: u32, ep_ro: u32) -> u32 {
    ((val as u64 * ep_ro as u64) >> 32) as u32
}

/// `tc qdisc add ... codel`: `{"kind": "codel", ...}` in the resolved config.
/// Defaults are sch_codel.c codel_init / codel_params_init.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodelConfig {
    pub target_ns: u64,
    pub interval_ns: u64,
    pub limit_packets: u64,
    pub ecn: bool,
    /// Mark ECT packets CE whenever their sojourn exceeds this (DCTCP-style); null = off.
    pub ce_threshold_ns: Option<u64>,
}

impl Default for CodelConfig {
    fn default() -> Self {
        // codel_params_init: target 5 ms, interval 100 ms, no ECN; codel_init: limit 1000.
        CodelConfig { target_ns: 5_000_000, interval_ns: 100_000_000, limit_packets: 1000, ecn: false, ce_threshold_ns: None }
    }
}

/// `struct codel_params`, in CoDel time.
#[derive(Clone, Copy, Debug)]
pub struct CodelParams {
    pub target: CodelTime,
    pub interval: CodelTime,
    /// `CODEL_DISABLED_THRESHOLD` (i32::MAX) when off.
    pub ce_threshold: CodelTime,
    /// Below this backlog CoDel never drops (one MTU: a lone packet is not a standing queue).
    pub mtu_bytes: u32,
    pub ecn: bool,
}

impl CodelParams {
    /// `mtu_bytes`: `psched_mtu(dev)` of the bottleneck's device (codel_init, fq_codel_init).
    pub fn new(target_ns: u64, interval_ns: u64, ce_threshold_ns: Option<u64>, ecn: bool, mtu_bytes: u32) -> Self {
        CodelParams {
            target: ns_to_codel(target_ns),
            interval: ns_to_codel(interval_ns),
            ce_threshold: ce_threshold_ns.map_or(i32::MAX as u32, ns_to_codel),
            mtu_bytes,
            ecn,
        }
    }
}

/// `struct codel_vars`: the per-queue state machine.
#[derive(Clone, Copy, Debug, Default)]
pub struct CodelVars {
    /// Drops (or marks) since entering the dropping state.
    pub count: u32,
    /// `count` when the dropping state was last entered.
    pub lastcount: u32,
    pub dropping: bool,
    /// 1/sqrt(count) in Q0.16.
    pub rec_inv_sqrt: u16,
    /// When the sojourn has been above target for an interval (0: below target).
    pub first_above_time: CodelTime,
    /// When to drop next (in the dropping state).
    pub drop_next: CodelTime,
    /// Sojourn of the last dequeued packet.
    pub ldelay: CodelTime,
}

/// What CoDel needs of the queue it manages: sch_codel's single FIFO or one
/// fq_codel flow (codel_impl.h's `dequeue_func`, `drop_func`, `backlog`).
pub trait CodelQueue<P> {
    /// Removes the head packet and takes it off the backlog.
    fn dequeue_head(&mut self) -> Option<Packet<P>>;
    /// The backlog CoDel compares with one MTU (the whole qdisc's in Linux).
    fn backlog_bytes(&self) -> u64;
    /// Discards a packet the control law dropped.
    fn drop_packet(&mut self, pkt: Packet<P>);
}

impl CodelVars {
    /// `codel_Newton_step`: new = (invsqrt / 2) * (3 - count * invsqrt^2), in Q0.32.
    pub fn newton_step(&mut self) {
        let invsqrt = (self.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
        let invsqrt2 = ((invsqrt as u64 * invsqrt as u64) >> 32) as u32;
        let mut val = (3u64 << 32).wrapping_sub(self.count as u64 * invsqrt2 as u64);
        val >>= 2; // avoid overflow in the following multiply
        // u64 arithmetic wraps as in C (count may jump, e.g. after fq_codel_drop).
        val = val.wrapping_mul(invsqrt as u64) >> (32 - 2 + 1);
        self.rec_inv_sqrt = (val >> REC_INV_SQRT_SHIFT) as u16;
    }

    /// `codel_control_law`: t + interval / sqrt(count).
    pub fn control_law(&self, t: CodelTime, interval: CodelTime) -> CodelTime {
        t.wrapping_add(reciprocal_scale(interval, (self.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT))
    }

    /// `codel_should_drop`: has the sojourn stayed above target for an interval?
    fn should_drop<P>(&mut self, pkt: Option<&Packet<P>>, params: &CodelParams, backlog_bytes: u64, now: CodelTime) -> bool {
        let Some(pkt) = pkt else {
            self.first_above_time = 0;
            return false;
        };
        self.ldelay = now.wrapping_sub(codel_time(pkt.meta.enqueue_time));
        if !after_eq(self.ldelay, params.target) || backlog_bytes <= params.mtu_bytes as u64 {
            // Went below: stay below for at least an interval.
            self.first_above_time = 0;
            return false;
        }
        if self.first_above_time == 0 {
            // Just went above: drop only if it stays above for an interval.
            self.first_above_time = now.wrapping_add(params.interval);
            false
        } else {
            after(now, self.first_above_time)
        }
    }

    /// `codel_dequeue`: the next packet to send from `queue`, after the drops
    /// and marks the control law asks for. `stats` counts AQM drops and CE marks.
    pub fn dequeue<P, Q: CodelQueue<P>>(&mut self, now_t: SimTime, params: &CodelParams, queue: &mut Q, stats: &mut QdiscStats) -> Option<Packet<P>> {
        let mut pkt = queue.dequeue_head();
        if pkt.is_none() {
            self.dropping = false;
            return None;
        }
        let now = codel_time(now_t);
        let mut drop = self.should_drop(pkt.as_ref(), params, queue.backlog_bytes(), now);
        'end: {
            if self.dropping {
                if !drop {
                    // Sojourn below target: leave the dropping state.
                    self.dropping = false;
                } else if after_eq(now, self.drop_next) {
                    // Time for the next drop; a large backlog may call for several now.
                    while self.dropping && after_eq(now, self.drop_next) {
                        self.count = self.count.wrapping_add(1);
                        self.newton_step();
                        let p = pkt.as_mut().expect("dropping implies a packet");
                        if params.ecn && set_ce(&mut p.meta) {
                            stats.ce_marks += 1;
                            self.drop_next = self.control_law(self.drop_next, params.interval);
                            break 'end;
                        }
                        stats.aqm_drops += 1;
                        queue.drop_packet(pkt.take().expect("checked"));
                        pkt = queue.dequeue_head();
                        if !self.should_drop(pkt.as_ref(), params, queue.backlog_bytes(), now) {
                            self.dropping = false;
                        } else {
                            self.drop_next = self.control_law(self.drop_next, params.interval);
                        }
                    }
                }
            } else if drop {
                let p = pkt.as_mut().expect("drop implies a packet");
                if params.ecn && set_ce(&mut p.meta) {
                    stats.ce_marks += 1;
                } else {
                    stats.aqm_drops += 1;
                    queue.drop_packet(pkt.take().expect("checked"));
                    pkt = queue.dequeue_head();
                    drop = self.should_drop(pkt.as_ref(), params, queue.backlog_bytes(), now);
                }
                let _ = drop; // Linux recomputes it here and does not read it again.
                self.dropping = true;
                // If we re-enter soon after leaving, resume near the drop rate that
                // controlled the queue last time.
                let delta = self.count.wrapping_sub(self.lastcount);
                if delta > 1 && !after_eq(now.wrapping_sub(self.drop_next), params.interval.wrapping_mul(16)) {
                    self.count = delta;
                    // Imprecise start; later Newton steps converge quadratically.
                    self.newton_step();
                } else {
                    self.count = 1;
                    self.rec_inv_sqrt = (!0u32 >> REC_INV_SQRT_SHIFT) as u16;
                }
                self.lastcount = self.count;
                self.drop_next = self.control_law(now, params.interval);
            }
        }
        if let Some(p) = pkt.as_mut() {
            if after(self.ldelay, params.ce_threshold) && set_ce(&mut p.meta) {
                stats.ce_marks += 1;
            }
        }
        pkt
    }
}

/// sch_codel: one FIFO managed by CoDel, tail drop at `limit` packets.
pub struct Codel<P> {
    params: CodelParams,
    vars: CodelVars,
    limit_packets: u64,
    fifo: CodelFifo<P>,
    stats: QdiscStats,
}

/// The FIFO under sch_codel, with the drops of one dequeue collected for the caller.
struct CodelFifo<P> {
    queue: VecDeque<Packet<P>>,
    backlog_bytes: u64,
    dropped: Vec<Packet<P>>,
}

impl<P> CodelQueue<P> for CodelFifo<P> {
    fn dequeue_head(&mut self) -> Option<Packet<P>> {
        let pkt = self.queue.pop_front()?;
        self.backlog_bytes -= pkt.meta.len_bytes as u64;
        Some(pkt)
    }
    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn drop_packet(&mut self, pkt: Packet<P>) {
        self.dropped.push(pkt);
    }
}

impl<P> Codel<P> {
    pub fn new(cfg: &CodelConfig, psched_mtu_bytes: u32) -> Self {
        Codel {
            params: CodelParams::new(cfg.target_ns, cfg.interval_ns, cfg.ce_threshold_ns, cfg.ecn, psched_mtu_bytes),
            vars: CodelVars::default(),
            limit_packets: cfg.limit_packets,
            fifo: CodelFifo { queue: VecDeque::new(), backlog_bytes: 0, dropped: Vec::new() },
            stats: QdiscStats::default(),
        }
    }

    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
}

impl<P> Qdisc<P> for Codel<P> {
    fn enqueue(&mut self, now: SimTime, mut pkt: Packet<P>, _rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        // codel_qdisc_enqueue: tail drop once `limit` packets are queued.
        if self.fifo.queue.len() as u64 >= self.limit_packets {
            self.stats.overflow_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
            return;
        }
        pkt.meta.enqueue_time = now;
        self.fifo.backlog_bytes += pkt.meta.len_bytes as u64;
        self.fifo.queue.push_back(pkt);
    }

    fn dequeue(&mut self, now: SimTime, _rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        let pkt = self.vars.dequeue(now, &self.params, &mut self.fifo, &mut self.stats);
        dropped.extend(self.fifo.dropped.drain(..).map(|packet| Dropped { packet, reason: DropReason::Aqm }));
        pkt
    }

    fn backlog_bytes(&self) -> u64 {
        self.fifo.backlog_bytes
    }

    fn backlog_packets(&self) -> usize {
        self.fifo.queue.len()
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PSCHED_MTU_BYTES;
    use crate::{Ecn, PacketMeta};

    const FRAME: u32 = 1514;

    fn pkt(id: u32, ecn: Ecn) -> Packet<u32> {
        Packet { meta: PacketMeta { len_bytes: FRAME, flow_hash: 0, src_host_hash: 0, dst_host_hash: 0, ecn, enqueue_time: SimTime::ZERO, l4s_queue: false }, inner: id }
    }

    #[test]
    fn newton_steps_track_one_over_sqrt_count_after_a_rough_first_step() {
        let mut v = CodelVars { count: 1, rec_inv_sqrt: (!0u32 >> REC_INV_SQRT_SHIFT) as u16, ..Default::default() };
        for count in 2..200u32 {
            v.count = count;
            v.newton_step();
            let exact = 1.0 / (count as f64).sqrt();
            let got = v.rec_inv_sqrt as f64 / 65536.0;
            if count == 2 {
                // From 1.0, one Newton step lands on 0.5, not 0.707 (Linux accepts this).
                assert!((got - 0.5).abs() < 1e-3);
            } else {
                // One step per increment then stays within a few percent.
                assert!((got - exact).abs() / exact < 0.03, "count {count}: {got} vs {exact}");
            }
        }
    }

    /// A link that sends one packet per `service_ns`, fed one packet per
    /// `arrival_ns`: returns (drop times, (send time, sojourn) of sent packets, the qdisc).
    fn overload(ecn: bool, service_ns: u64, arrival_ns: u64, duration_ns: u64) -> (Vec<u64>, Vec<(u64, u64)>, Codel<u32>) {
        let cfg = CodelConfig { ecn, limit_packets: 100_000, ..Default::default() };
        let mut q = Codel::new(&cfg, PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        let mut drops = Vec::new();
        let mut sent = Vec::new();
        let (mut next_arrival, mut next_service, mut id) = (0, service_ns, 0);
        while next_service < duration_ns {
            if next_arrival <= next_service {
                let e = if ecn { Ecn::Ect0 } else { Ecn::NotEct };
                q.enqueue(SimTime(next_arrival), pkt(id, e), &mut rng, &mut dropped);
                id += 1;
                next_arrival += arrival_ns;
            } else {
                let t = next_service;
                if let Some(p) = q.dequeue(SimTime(t), &mut rng, &mut dropped) {
                    sent.push((t, t - p.meta.enqueue_time.as_nanos()));
                }
                drops.extend(dropped.drain(..).map(|_| t));
                next_service += service_ns;
            }
        }
        (drops, sent, q)
    }

    #[test]
    fn codel_waits_an_interval_above_target_then_drops_at_intervals_shrinking_as_one_over_sqrt_count() {
        // 1 ms service, two arrivals per service: the queue grows 1 packet per ms.
        let (drops, _, q) = overload(false, 1_000_000, 500_000, 3_000_000_000);
        assert!(q.stats().aqm_drops > 10);
        // The sojourn passes 5 ms after ~5 ms; the first drop comes an interval (100 ms) later.
        let first = drops[0];
        assert!((100_000_000..=110_000_000).contains(&first), "first drop at {first} ns");
        // Gaps between successive drops early in the dropping state: interval/sqrt(count).
        let mut uniq: Vec<u64> = drops.clone();
        uniq.dedup();
        // The n-th gap is interval/sqrt(n) (count = n after the n-th drop); from
        // count 3 on the Newton estimate is within 3%.
        for n in 3..10 {
            let gap = uniq[n] - uniq[n - 1];
            let expect = 100e6 / (n as f64).sqrt();
            assert!((gap as f64 - expect).abs() < 0.05 * expect + 1.1e6, "gap {n}: {gap} vs {expect}");
        }
    }

    #[test]
    fn under_a_constant_ten_percent_overload_codel_bounds_the_sojourn_by_dropping_the_excess() {
        // Arrivals 10% faster than the link (an unresponsive source); a FIFO's
        // sojourn would grow to 6 s in 60 s.
        let (drops, sent, _) = overload(false, 1_000_000, 909_091, 60_000_000_000);
        let mut late: Vec<u64> = sent.iter().filter(|(t, _)| *t > 30_000_000_000).map(|(_, s)| *s).collect();
        late.sort_unstable();
        let p50_ms = late[late.len() / 2] as f64 / 1e6;
        let p99_ms = late[late.len() * 99 / 100] as f64 / 1e6;
        // CoDel keeps the queue standing a few targets deep (unresponsive traffic
        // cannot be held at target: drops act at once, not an RTT later).
        assert!(p50_ms > 5.0 && p99_ms < 50.0, "sojourn p50 {p50_ms} ms p99 {p99_ms} ms");
        // In steady state it drops the excess: 1 packet in 11 of the arrivals.
        let late_drops = drops.iter().filter(|t| **t > 30_000_000_000).count() as f64;
        let arrivals = 30e9 / 909_091.0;
        assert!((late_drops / arrivals - 1.0 / 11.0).abs() < 0.01, "drop fraction {}", late_drops / arrivals);
    }

    #[test]
    fn a_one_packet_backlog_is_never_dropped_however_old() {
        let mut q = Codel::new(&CodelConfig::default(), PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for i in 0..100u64 {
            q.enqueue(SimTime(i * 1_000_000_000), pkt(i as u32, Ecn::NotEct), &mut rng, &mut dropped);
            // Each packet waits 500 ms alone in the queue.
            assert!(q.dequeue(SimTime(i * 1_000_000_000 + 500_000_000), &mut rng, &mut dropped).is_some());
        }
        assert!(dropped.is_empty());
    }

    #[test]
    fn a_backlog_within_the_devices_mtu_is_never_dropped_and_build_passes_that_mtu() {
        // Three 1514-byte frames queued, each 500 ms old when served: the two left behind one
        // (3028 bytes) are within a 9000-byte device's psched_mtu but not a 1500-byte one's
        // (codel_should_drop: `backlog <= params->mtu`).
        let drops_at = |psched_mtu_bytes: u32| {
            let aqm = crate::AqmConfig::Codel(CodelConfig::default());
            let mut q: crate::AnyQdisc<u32> = aqm.build(crate::QueueLimit::Packets(1000), 10_000_000, psched_mtu_bytes);
            let (mut rng, mut dropped) = (SimRng::new(1), Vec::new());
            for i in 0..3u32 {
                q.enqueue(SimTime::ZERO, pkt(i, Ecn::NotEct), &mut rng, &mut dropped);
            }
            for i in 3..200u64 {
                q.dequeue(SimTime(i * 500_000_000), &mut rng, &mut dropped);
                q.enqueue(SimTime(i * 500_000_000), pkt(i as u32, Ecn::NotEct), &mut rng, &mut dropped);
            }
            dropped.len()
        };
        assert_eq!(drops_at(9014), 0);
        assert!(drops_at(PSCHED_MTU_BYTES) > 0);
    }

    #[test]
    fn with_ecn_codel_marks_ect_packets_instead_of_dropping_them() {
        let (drops, _, q) = overload(true, 1_000_000, 500_000, 1_000_000_000);
        assert!(drops.is_empty());
        assert!(q.stats().ce_marks > 5);
        assert_eq!(q.stats().aqm_drops, 0);
    }

    #[test]
    fn a_ce_threshold_marks_every_packet_whose_sojourn_exceeds_it() {
        let cfg = CodelConfig { ce_threshold_ns: Some(1_000_000), ..Default::default() };
        let mut q = Codel::new(&cfg, PSCHED_MTU_BYTES);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        q.enqueue(SimTime(0), pkt(0, Ecn::Ect0), &mut rng, &mut dropped);
        q.enqueue(SimTime(0), pkt(1, Ecn::Ect0), &mut rng, &mut dropped);
        assert_eq!(q.dequeue(SimTime(500_000), &mut rng, &mut dropped).unwrap().meta.ecn, Ecn::Ect0);
        assert_eq!(q.dequeue(SimTime(2_000_000), &mut rng, &mut dropped).unwrap().meta.ecn, Ecn::Ce);
    }
}
