//! RED: Floyd & Jacobson, "Random Early Detection Gateways for Congestion
//! Avoidance" (1993), as Linux runs it: net/sched/sch_red.c over the
//! divisionless arithmetic of include/net/red.h, with Adaptive RED (Floyd,
//! Gummadi, Shenker 2001) as `red_adaptative_algo`. The parameters the kernel
//! receives (Wlog, Plog, Scell_log, the idle-damping table, max_P) are
//! computed from the tc options exactly as iproute2 does (tc/q_red.c
//! `red_parse_opt`, tc/tc_red.c `tc_red_eval_ewma`/`_P`/`_idle_damping`).
//!
//! Gentle RED is not in Linux's sch_red: above max the packet is always
//! marked (ECN) or dropped (`RED_HARD_MARK`).
//!
//! Linux quirks kept: tc builds the idle-damping table in 64 ns psched ticks
//! while red.h indexes it with microseconds, and applies the table's
//! natural-log exponent as a power-of-two shift, so the average decays
//! during idle time more slowly than the paper's (1-W)^m. The adaptive timer
//! runs every 500 ms from creation, caught up at each enqueue/dequeue.

use crate::ecn::mark;
use crate::{DropReason, Dropped, Packet, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::time::{NANOS_PER_MICRO, NANOS_PER_MILLI};
use cclab_cc::SimTime;
use serde::Deserialize;
use std::collections::VecDeque;

/// `{"kind": "red", ...}`: tc's `red` options, every default filled by Python.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedConfig {
    /// Hard limit of the child bfifo (`limit`).
    pub limit_bytes: u64,
    pub min_bytes: u32,
    pub max_bytes: u32,
    pub avpkt_bytes: u32,
    pub burst_packets: u32,
    /// max_P (`probability`).
    pub probability: f64,
    pub ecn: bool,
    pub harddrop: bool,
    pub adaptive: bool,
    /// Link rate for the idle-time decay (`bandwidth`); 0 takes the bottleneck's rate.
    pub bandwidth_bps: u64,
}

/// Adaptive RED updates max_P every 500 ms (sch_red.c `red_adaptative_timer`, HZ/2).
const ADAPT_PERIOD_NS: u64 = 500 * NANOS_PER_MILLI;
/// include/net/red.h: max_P stays in [1%, 50%], Q0.32.
const RED_ONE_PERCENT: u32 = (((1u64 << 32) + 50) / 100) as u32; // DIV_ROUND_CLOSEST(2^32, 100)
const MAX_P_MIN: u32 = RED_ONE_PERCENT;
const MAX_P_MAX: u32 = 50 * RED_ONE_PERCENT;
/// psched ticks per microsecond as tc reads them from /proc/net/psched on a
/// current kernel (NSEC_PER_USEC / PSCHED_TICKS2NS(1) = 1000 / 64): tc_core.c
/// `tc_core_init`, the unit `tc_calc_xmittime` returns.
const TC_TICKS_PER_USEC: f64 = 1000.0 / 64.0;

/// `tc_red_eval_ewma`: the smallest W = 2^-Wlog that lets a burst of `burst`
/// packets pass, burst + 1 - qmin/avpkt <= (1 - (1-W)^burst) / W.
pub fn eval_ewma(qmin: u32, burst: u32, avpkt: u32) -> Option<u8> {
    let a = burst as f64 + 1.0 - qmin as f64 / avpkt as f64;
    if a < 1.0 {
        return None;
    }
    let mut w: f64 = 0.5;
    for wlog in 1..32u8 {
        if a <= (1.0 - (1.0 - w).powi(burst as i32)) / w {
            return Some(wlog);
        }
        w /= 2.0;
    }
    None
}

/// `tc_red_eval_P`: Plog = log2((qmax - qmin) / prob), rounded up.
pub fn eval_p(qmin: u32, qmax: u32, prob: f64) -> Option<u8> {
    let delta = qmax as i64 - qmin as i64;
    if delta <= 0 {
        return None;
    }
    let mut p = prob / delta as f64;
    for i in 0..32u8 {
        if p > 1.0 {
            return Some(i);
        }
        p *= 2.0;
    }
    None
}

/// `tc_red_eval_idle_damping`: Stab[t >> Scell_log] = -ln(1-W) * t / xmit_time,
/// with t and xmit_time in psched ticks; returns Scell_log and the table.
pub fn eval_idle_damping(wlog: u8, avpkt: u32, bytes_per_s: f64) -> Option<(u8, [u8; 256])> {
    let xmit_time = ((1e6 * avpkt as f64 / bytes_per_s) * TC_TICKS_PER_USEC) as u32 as f64; // unsigned
    let lw = -(1.0 - 1.0 / (1u64 << wlog) as f64).ln() / xmit_time;
    let maxtime = 31.0 / lw;
    let clog = (0..32u8).find(|&c| maxtime / ((1u64 << c) as f64) < 512.0)?;
    let mut stab = [0u8; 256];
    for (i, s) in stab.iter_mut().enumerate().take(255).skip(1) {
        *s = (((i as u64) << clog) as f64 * lw).min(255.0) as u8;
        *s = (*s).min(31);
    }
    stab[255] = 31;
    Some((clog, stab))
}

/// `struct red_parms` after `red_set_parms`.
struct Parms {
    qth_min: u64, // << Wlog
    qth_max: u64, // << Wlog
    wlog: u8,
    scell_log: u8,
    scell_max: u64,
    stab: [u8; 256],
    max_p: u32,
    max_p_delta: u32,
    qth_delta: u32,
    target_min: u64,
    target_max: u64,
}

pub struct Red<P> {
    limit_bytes: u64,
    ecn: bool,
    harddrop: bool,
    adaptive: bool,
    parms: Parms,
    /// `red_vars`: qavg is fixed point with the point at Wlog.
    qavg: u64,
    qcount: i64,
    q_r: u32,
    /// Start of the current idle period (`qidlestart`), None when busy.
    idle_since: Option<SimTime>,
    next_adapt: SimTime,
    queue: VecDeque<Packet<P>>,
    backlog_bytes: u64,
    stats: QdiscStats,
}

/// red.h's RED_DONT_MARK, RED_PROB_MARK, RED_HARD_MARK.
#[allow(clippy::enum_variant_names)]
enum Action {
    DontMark,
    ProbMark,
    HardMark,
}

impl<P> Red<P> {
    /// `red_parse_opt` then `red_change`. `link_bps` stands in for `bandwidth` when it is 0.
    pub fn new(c: &RedConfig, link_bps: u64) -> Self {
        // q_red.c: defaults from Sally Floyd's REDparameters.txt when a value is 0.
        let qth_max = if c.max_bytes > 0 { c.max_bytes } else { (c.limit_bytes / 4) as u32 };
        let qth_min = if c.min_bytes > 0 { c.min_bytes } else { qth_max / 3 };
        let avpkt = c.avpkt_bytes.max(1);
        let burst = if c.burst_packets > 0 { c.burst_packets } else { (2 * qth_min + qth_max) / (3 * avpkt) };
        let wlog = eval_ewma(qth_min, burst, avpkt).expect("RED: failed to calculate EWMA constant");
        // Plog is only what tc dumps; the kernel uses max_P (TCA_RED_MAX_P) when given.
        let _plog = eval_p(qth_min, qth_max, c.probability).expect("RED: failed to calculate probability");
        let bw_bps = if c.bandwidth_bps > 0 { c.bandwidth_bps } else { link_bps };
        let (scell_log, stab) =
            eval_idle_damping(wlog, avpkt, bw_bps as f64 / 8.0).expect("RED: failed to calculate idle damping table");
        let max_p = (c.probability * 4294967296.0) as u32; // q_red.c: probability * pow(2, 32)

        // red_set_parms
        let delta = (qth_max as i64 - qth_min as i64).max(1) as u32;
        let parms = Parms {
            qth_min: (qth_min as u64) << wlog,
            qth_max: (qth_max as u64) << wlog,
            wlog,
            scell_log,
            scell_max: 255u64 << scell_log,
            stab,
            max_p,
            max_p_delta: (max_p / delta).max(1),
            qth_delta: delta,
            target_min: qth_min as u64 + 2 * (delta / 5) as u64,
            target_max: qth_min as u64 + 3 * (delta / 5) as u64,
        };
        Red {
            limit_bytes: c.limit_bytes,
            ecn: c.ecn,
            harddrop: c.harddrop,
            adaptive: c.adaptive,
            parms,
            qavg: 0,
            qcount: -1,
            q_r: 0,
            // red_change: an empty child starts an idle period.
            idle_since: Some(SimTime::ZERO),
            next_adapt: SimTime(ADAPT_PERIOD_NS),
            queue: VecDeque::new(),
            backlog_bytes: 0,
            stats: QdiscStats::default(),
        }
    }

    /// The average queue in bytes (qavg >> Wlog).
    pub fn average_bytes(&self) -> u64 {
        self.qavg >> self.parms.wlog
    }

    /// max_P as a fraction (changes only under `adaptive`).
    pub fn max_p(&self) -> f64 {
        self.parms.max_p as f64 / 4294967296.0
    }

    /// `red_calc_qavg_from_idle_time`: the average decays as if dummy packets of
    /// avpkt had left at the link rate during the idle time, from the table
    /// (a shift) or, for short idle times, its linear approximation. red.h
    /// indexes the table with microseconds while tc built it in 64 ns psched
    /// ticks; we reproduce both, so the decay is Linux's, not the paper's.
    fn qavg_from_idle_time(&self, now: SimTime, idle_since: SimTime) -> u64 {
        let p = &self.parms;
        let us_idle = (now.saturating_since(idle_since).as_nanos() / NANOS_PER_MICRO).min(p.scell_max);
        let shift = p.stab[((us_idle >> p.scell_log) & 255) as usize];
        if shift > 0 {
            self.qavg >> shift
        } else {
            let dec = ((self.qavg as u128 * us_idle as u128) >> p.scell_log) as u64;
            if dec < self.qavg >> 1 {
                self.qavg - dec
            } else {
                self.qavg >> 1
            }
        }
    }

    /// `red_calc_qavg`: qavg = qavg * (1 - W) + backlog * W, in Wlog fixed point.
    fn calc_qavg(&self, now: SimTime) -> u64 {
        match self.idle_since {
            None => self.qavg + self.backlog_bytes - (self.qavg >> self.parms.wlog),
            Some(since) => self.qavg_from_idle_time(now, since),
        }
    }

    /// `red_random`: qR uniform in [0, delta / max_P) (reciprocal_divide is exact).
    fn random(&self, rng: &mut SimRng) -> u32 {
        (rng.next_u64() >> 32) as u32 / self.parms.max_p_delta
    }

    /// `red_action`: between the thresholds, mark when
    /// max_P * (avg - min) / (max - min) * count >= rnd, so marks are spaced
    /// roughly uniformly rather than geometrically (the paper's count rule).
    fn action(&mut self, qavg: u64, rng: &mut SimRng) -> Action {
        let p = &self.parms;
        if qavg < p.qth_min {
            self.qcount = -1;
            Action::DontMark
        } else if qavg >= p.qth_max {
            self.qcount = -1;
            Action::HardMark
        } else {
            self.qcount += 1;
            if self.qcount != 0 {
                // red_mark_probability
                if ((qavg - p.qth_min) >> p.wlog) * self.qcount as u64 >= self.q_r as u64 {
                    self.qcount = 0;
                    self.q_r = self.random(rng);
                    return Action::ProbMark;
                }
            } else {
                self.q_r = self.random(rng);
            }
            Action::DontMark
        }
    }

    /// `red_adaptative_algo`, run every 500 ms while `adaptive` is set: AIMD on max_P
    /// towards an average between min + 0.4 (max - min) and min + 0.6 (max - min).
    fn adapt(&mut self, now: SimTime) {
        while self.adaptive && now >= self.next_adapt {
            let at = self.next_adapt;
            let qavg = match self.idle_since {
                Some(since) => self.qavg_from_idle_time(at, since),
                None => self.qavg,
            } >> self.parms.wlog;
            let p = &mut self.parms;
            if qavg > p.target_max && p.max_p <= MAX_P_MAX {
                p.max_p += MAX_P_MIN.min(p.max_p / 4); // alpha = min(1%, max_p / 4)
            } else if qavg < p.target_min && p.max_p >= MAX_P_MIN {
                p.max_p = (p.max_p / 10) * 9; // beta = 0.9
            }
            p.max_p_delta = ((p.max_p + p.qth_delta / 2) / p.qth_delta).max(1); // DIV_ROUND_CLOSEST
            self.next_adapt = SimTime(at.0 + ADAPT_PERIOD_NS);
        }
    }
}

impl<P> Qdisc<P> for Red<P> {
    /// `red_enqueue`.
    fn enqueue(&mut self, now: SimTime, mut pkt: Packet<P>, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        self.adapt(now);
        self.qavg = self.calc_qavg(now);
        self.idle_since = None;
        let congestion_drop = match self.action(self.qavg, rng) {
            Action::DontMark => false,
            Action::ProbMark => !self.ecn || !mark(&mut pkt.meta, &mut self.stats),
            Action::HardMark => self.harddrop || !self.ecn || !mark(&mut pkt.meta, &mut self.stats),
        };
        if congestion_drop {
            self.stats.aqm_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Aqm });
            return;
        }
        // The child bfifo: admit while the backlog stays within limit.
        if self.backlog_bytes + pkt.meta.len_bytes as u64 > self.limit_bytes {
            self.stats.overflow_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
            return;
        }
        pkt.meta.enqueue_time = now;
        self.backlog_bytes += pkt.meta.len_bytes as u64;
        self.queue.push_back(pkt);
    }

    /// `red_dequeue`: an empty child starts an idle period.
    fn dequeue(&mut self, now: SimTime, _rng: &mut SimRng, _dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        self.adapt(now);
        match self.queue.pop_front() {
            Some(pkt) => {
                self.backlog_bytes -= pkt.meta.len_bytes as u64;
                Some(pkt)
            }
            None => {
                if self.idle_since.is_none() {
                    self.idle_since = Some(now);
                }
                None
            }
        }
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
    use crate::testutil::{drive, Source};
    use crate::{Ecn, PacketMeta};

    /// tc's defaults for `red limit 400000 avpkt 1000 bandwidth 10mbit`:
    /// max = limit/4, min = max/3, burst = (2 min + max) / (3 avpkt), probability 0.02.
    fn config(ecn: bool) -> RedConfig {
        RedConfig {
            limit_bytes: 400_000,
            min_bytes: 33_333,
            max_bytes: 100_000,
            avpkt_bytes: 1000,
            burst_packets: 55,
            probability: 0.02,
            ecn,
            harddrop: false,
            adaptive: false,
            bandwidth_bps: 10_000_000,
        }
    }

    fn pkt(ecn: Ecn) -> Packet<u32> {
        Packet {
            meta: PacketMeta {
                len_bytes: 1000,
                flow_hash: 1,
                src_host_hash: 1,
                dst_host_hash: 2,
                ecn,
                enqueue_time: SimTime::ZERO,
                l4s_queue: false,
            },
            inner: 0,
        }
    }

    #[test]
    fn the_resolved_config_parses_with_the_contract_keys_only() {
        let json = r#"{"kind": "red", "limit_bytes": 400000, "min_bytes": 33333, "max_bytes": 100000,
            "avpkt_bytes": 1000, "burst_packets": 55, "probability": 0.02, "ecn": false,
            "harddrop": false, "adaptive": false, "bandwidth_bps": 10000000}"#;
        let c: crate::AqmConfig = serde_json::from_str(json).unwrap();
        assert_eq!(c, crate::AqmConfig::Red(config(false)));
        assert_eq!(c.name(), "red");
        let bad = json.replace("\"adaptive\"", "\"adaptative\"");
        assert!(serde_json::from_str::<crate::AqmConfig>(&bad).is_err());
    }

    #[test]
    fn parameters_are_derived_as_iproute2_derives_them() {
        // burst + 1 - min/avpkt = 22.67: W = 1/16 allows 15.5 packets, W = 1/32 allows 26.4.
        assert_eq!(eval_ewma(33_333, 55, 1000), Some(5));
        // 0.02 / 66667 doubled until above 1 takes 22 doublings (red.h: "Plog=22 ~ max_P 0.02").
        assert_eq!(eval_p(33_333, 100_000, 0.02), Some(22));
        // xmit of 1000 bytes at 10 Mbit/s = 800 us = 12500 ticks; 31/lW = 12.4M ticks -> Scell_log 15.
        let (clog, stab) = eval_idle_damping(5, 1000, 10e6 / 8.0).unwrap();
        assert_eq!(clog, 15);
        assert_eq!(stab[0], 0);
        assert!(stab.windows(2).all(|w| w[0] <= w[1]), "the damping grows with idle time");
        assert_eq!(stab[255], 31);
    }

    #[test]
    fn below_the_minimum_threshold_nothing_is_dropped_or_marked() {
        let mut q = Red::new(&config(false), 10_000_000);
        // 90% load of 1000-byte packets: the queue rarely holds more than one packet.
        let src = [Source::cbr(0, 9_000_000).len(1000)];
        let r = drive(&mut q, &src, 10_000_000, 5_000_000_000, 1);
        assert_eq!(r.stats.aqm_drops + r.stats.overflow_drops + r.stats.ce_marks, 0);
        assert!(q.average_bytes() < 33_333);
    }

    #[test]
    fn the_average_follows_the_ewma_weight() {
        // Hold the instantaneous backlog at 20 packets by dequeuing one
        // packet before each arrival; the average then steps towards 20000 bytes.
        let mut c = config(false);
        c.min_bytes = 300_000; // no marking in the way
        c.max_bytes = 390_000;
        c.burst_packets = (2 * c.min_bytes + c.max_bytes) / (3 * c.avpkt_bytes);
        let mut q = Red::new(&c, 10_000_000);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        for _ in 0..21 {
            q.enqueue(SimTime(0), pkt(Ecn::NotEct), &mut rng, &mut dropped);
        }
        let start = q.average_bytes() as f64;
        let b = 20_000.0;
        let w = 1.0 / (1u64 << q.parms.wlog) as f64;
        // burst 330 over min/avpkt 300: a = 31 <= 32 (1 - (31/32)^330), so W = 1/32.
        assert_eq!(q.parms.wlog, 5);
        let n = 1 << q.parms.wlog;
        for k in 1..=3 * n {
            q.dequeue(SimTime(k), &mut rng, &mut dropped);
            q.enqueue(SimTime(k), pkt(Ecn::NotEct), &mut rng, &mut dropped);
            let expect = b + (start - b) * (1.0 - w).powi(k as i32);
            if k == n || k == 3 * n {
                let got = q.average_bytes() as f64;
                assert!((got - expect).abs() < 0.01 * b, "k {k}: avg {got} expected {expect}");
            }
        }
    }

    #[test]
    fn between_the_thresholds_marks_grow_linearly_and_are_spaced_by_the_count_rule() {
        let c = config(false);
        let mut rng = SimRng::new(7);
        let mut rates = Vec::new();
        for k in 1..=3u64 {
            let mut q = Red::<u32>::new(&c, 10_000_000);
            let avg = 33_333 + k * (100_000 - 33_333) / 4;
            let pb = 0.02 * k as f64 / 4.0;
            let (mut marks, mut since, mut max_gap) = (0u64, 0u64, 0u64);
            let n = 400_000;
            for _ in 0..n {
                since += 1;
                if let Action::ProbMark = q.action(avg << q.parms.wlog, &mut rng) {
                    marks += 1;
                    max_gap = max_gap.max(since);
                    since = 0;
                }
            }
            // Floyd & Jacobson section 7: the gap between marks is uniform in
            // 1..1/pb, so marks come at about 2 pb / (1 + pb) of packets.
            let rate = marks as f64 / n as f64;
            let expect = 2.0 * pb / (1.0 + pb);
            assert!((rate - expect).abs() < 0.05 * expect, "pb {pb}: rate {rate} expected {expect}");
            assert!(max_gap as f64 <= 1.0 / pb + 1.0, "pb {pb}: gap {max_gap}");
            rates.push(rate);
        }
        // Linear in (avg - min): the three rates stand about 1 : 2 : 3.
        assert!((rates[1] / rates[0] - 2.0).abs() < 0.15 && (rates[2] / rates[0] - 3.0).abs() < 0.25, "{rates:?}");
    }

    #[test]
    fn above_the_maximum_threshold_every_packet_is_dropped_or_marked_unless_harddrop() {
        for (ecn, harddrop, ect) in
            [(false, false, Ecn::Ect0), (true, false, Ecn::NotEct), (true, false, Ecn::Ect0), (true, true, Ecn::Ect0)]
        {
            let mut c = config(ecn);
            c.harddrop = harddrop;
            let mut q = Red::new(&c, 10_000_000);
            let mut rng = SimRng::new(3);
            let mut dropped = Vec::new();
            q.idle_since = None;
            for _ in 0..50 {
                q.qavg = 200_000 << q.parms.wlog; // twice max: no gentle zone in Linux
                q.enqueue(SimTime(0), pkt(ect), &mut rng, &mut dropped);
            }
            let marked_instead = ecn && !harddrop && ect == Ecn::Ect0;
            if marked_instead {
                assert_eq!((dropped.len(), q.backlog_packets(), q.stats().ce_marks), (0, 50, 50));
            } else {
                assert_eq!((dropped.len(), q.backlog_packets(), q.stats().aqm_drops), (50, 0, 50));
            }
        }
    }

    #[test]
    fn with_ecn_on_ect_packets_are_marked_not_dropped() {
        let mut q = Red::new(&config(true), 10_000_000);
        // 1.5x overload: the average climbs through both thresholds.
        let src = [Source::cbr(0, 15_000_000).len(1000).ecn(Ecn::Ect0)];
        let r = drive(&mut q, &src, 10_000_000, 3_000_000_000, 1);
        assert_eq!(r.stats.aqm_drops, 0);
        assert!(r.stats.ce_marks > 100, "{:?}", r.stats);
        // Marked packets can still overflow the child bfifo: some never arrive.
        assert!(r.flows[0].marks() > 100 && r.flows[0].marks() <= r.stats.ce_marks);
        // Not-ECT traffic at the same load is dropped early instead.
        let mut q = Red::new(&config(true), 10_000_000);
        let r = drive(&mut q, &[Source::cbr(0, 15_000_000).len(1000)], 10_000_000, 3_000_000_000, 1);
        assert!(r.stats.aqm_drops > 100 && r.stats.ce_marks == 0, "{:?}", r.stats);
    }

    #[test]
    fn responsive_flows_hold_the_average_between_the_thresholds() {
        // Four Reno-like flows, 50 ms base RTT, into tc's defaults at 10 Mbit/s:
        // early drops keep the queue between min (33 kB, 27 ms) and max (100 kB, 80 ms).
        for ecn in [false, true] {
            let mut q = Red::new(&config(ecn), 10_000_000);
            let ect = if ecn { Ecn::Ect0 } else { Ecn::NotEct };
            let src: Vec<Source> = (0..4).map(|i| Source::aimd(i, 100_000_000, 50_000_000).ecn(ect)).collect();
            let r = drive(&mut q, &src, 10_000_000, 20_000_000_000, 1);
            let mean_ms = r.sojourn_mean_ns(2_000_000_000) / 1e6;
            let delivered: u64 = r.flows.iter().map(|f| f.bytes_between(2_000_000_000, 20_000_000_000)).sum();
            let utilization = delivered as f64 * 8.0 / 18.0 / 10e6;
            eprintln!(
                "red 4 aimd flows ecn {ecn}: sojourn mean {mean_ms:.1} ms, utilization {utilization:.3}, {:?}",
                r.stats
            );
            assert!((26.7..80.0).contains(&mean_ms), "mean sojourn {mean_ms} ms");
            assert!(utilization > 0.97 && r.stats.overflow_drops == 0);
            if ecn {
                assert!(r.stats.ce_marks > 20 && r.stats.aqm_drops == 0, "{:?}", r.stats);
            }
        }
    }

    #[test]
    fn an_idle_link_decays_the_average() {
        let mut q = Red::<u32>::new(&config(false), 10_000_000);
        let mut rng = SimRng::new(1);
        let mut dropped = Vec::new();
        q.idle_since = None;
        q.qavg = 60_000 << q.parms.wlog;
        assert!(q.dequeue(SimTime(0), &mut rng, &mut dropped).is_none()); // idle from t = 0
        let after = |ns: u64| q.qavg_from_idle_time(SimTime(ns), SimTime(0)) >> q.parms.wlog;
        let (a1, a2, a3) = (after(5_000_000), after(100_000_000), after(10_000_000_000));
        assert!(60_000 > a1 && a1 > a2 && a2 > a3, "{a1} {a2} {a3}");
        assert_eq!(a3, 0, "a long idle period empties the average");
    }

    #[test]
    fn adaptive_red_raises_max_p_under_a_high_average_and_lowers_it_under_a_low_one() {
        let mut c = config(false);
        c.adaptive = true;
        let mut q = Red::<u32>::new(&c, 10_000_000);
        q.idle_since = None;
        q.qavg = 90_000 << q.parms.wlog; // above target_max = min + 0.6 (max - min)
        q.adapt(SimTime(5_000_000_000));
        assert!(q.max_p() > 0.1, "max_p {}", q.max_p()); // +1% per 500 ms
        q.qavg = 0;
        q.adapt(SimTime(60_000_000_000));
        assert!(q.max_p() < 0.011, "max_p {}", q.max_p()); // x0.9 per 500 ms down to ~1%
    }
}
