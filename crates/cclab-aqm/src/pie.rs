//! PIE, RFC 8033, as Linux runs it: net/sched/sch_pie.c with include/net/pie.h
//! (`pie_drop_early`, `pie_process_dequeue`, `pie_calculate_probability`).
//!
//! Linux against RFC 8033, where it matters here:
//! - The queue delay is the dequeued packet's sojourn time (the timestamp
//!   method of RFC 8033 section 5.2 note), not Little's law, unless
//!   `dq_rate_estimator` is set.
//! - The probability is a u64 scaled by MAX_PROB = 2^56 - 1, alpha and beta are
//!   tc integers in units of 1/16 (alpha 2 = 0.125, beta 20 = 1.25) per second
//!   of delay error, and are scaled down by /2 below 10% and by a further /4
//!   per decade below 1%, 0.1%, ... (RFC 8033 section 4.2 auto-tuning, Linux
//!   extends the table down to 1e-6).
//! - Probability increases are capped at 2% per update once above 10%, and
//!   +2% is added while the delay exceeds 250 ms (RFC 8033 section 4.2 note).
//! - Decay when idle is prob -= prob/64 (98.4%) per update, not 98%.
//! - The de-randomization of RFC 8033 section 5.1 is in: an accumulator of
//!   probability; no drop before it reaches 0.85, always a drop at 8.5.
//! - ECN: marks instead of drops only while prob <= 10% (RFC 8033 section 5.1).
//! - The first probability update runs 500 ms after the qdisc is created
//!   (`pie_init` arms the timer at HZ/2), then every tupdate.
//!
//! Times are psched ticks (64 ns) as in Linux, so rounding follows its own.
//! The timer runs every `tupdate_ns` exactly (Linux rounds it to jiffies:
//! exact for 15 ms at HZ=1000, 16 ms at HZ=250), caught up at each
//! enqueue/dequeue, which is exact because the backlog only changes there.

use crate::ecn::mark;
use crate::{DropReason, Dropped, Packet, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::time::NANOS_PER_MILLI;
use cclab_cc::SimTime;
use serde::Deserialize;
use std::collections::VecDeque;

/// `{"kind": "pie", ...}`: tc's `pie` options.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PieConfig {
    pub target_ns: u64,
    pub tupdate_ns: u64,
    pub limit_packets: u32,
    /// In units of 1/16 (tc's integer `alpha`).
    pub alpha: u32,
    pub beta: u32,
    pub ecn: bool,
    pub bytemode: bool,
    pub dq_rate_estimator: bool,
}

/// include/net/pie.h
const MAX_PROB: u64 = u64::MAX >> 8;
const QUEUE_THRESHOLD: u64 = 16384;
const PIE_SCALE: u32 = 8;
/// PSCHED_SHIFT = 6: a psched tick is 64 ns.
const PSCHED_SHIFT: u32 = 6;
const PSCHED_TICKS_PER_SEC: u64 = 1_000_000_000 >> PSCHED_SHIFT;
/// `pie_init`: the first update fires HZ/2 after creation.
const FIRST_UPDATE_NS: u64 = 500 * NANOS_PER_MILLI;

fn ticks(ns: u64) -> u64 {
    ns >> PSCHED_SHIFT
}

pub struct Pie<P> {
    /// `psched_mtu(dev)`.
    mtu_bytes: u64,
    target: u64, // ticks
    tupdate_ns: u64,
    limit_packets: u32,
    alpha: u32,
    beta: u32,
    ecn: bool,
    bytemode: bool,
    dq_rate_estimator: bool,
    // struct pie_vars
    qdelay: u64,
    qdelay_old: u64,
    burst_time: u64,
    dq_tstamp: Option<u64>,
    prob: u64,
    accu_prob: u64,
    dq_count: Option<u64>,
    avg_dq_rate: u32,
    next_update: SimTime,
    queue: VecDeque<Packet<P>>,
    backlog_bytes: u64,
    stats: QdiscStats,
}

impl<P> Pie<P> {
    /// `psched_mtu_bytes`: `psched_mtu(dev)`, which pie_drop_early reads.
    pub fn new(c: &PieConfig, psched_mtu_bytes: u32) -> Self {
        let mut q = Pie {
            mtu_bytes: psched_mtu_bytes as u64,
            target: ticks(c.target_ns),
            tupdate_ns: c.tupdate_ns.max(1),
            limit_packets: c.limit_packets,
            alpha: c.alpha,
            beta: c.beta,
            ecn: c.ecn,
            bytemode: c.bytemode,
            dq_rate_estimator: c.dq_rate_estimator,
            qdelay: 0,
            qdelay_old: 0,
            burst_time: 0,
            dq_tstamp: None,
            prob: 0,
            accu_prob: 0,
            dq_count: None,
            avg_dq_rate: 0,
            next_update: SimTime(FIRST_UPDATE_NS),
            queue: VecDeque::new(),
            backlog_bytes: 0,
            stats: QdiscStats::default(),
        };
        q.vars_init();
        q
    }

    /// The drop probability in [0, 1] (Linux lets it pass MAX_PROB by a little; we report that too).
    pub fn probability(&self) -> f64 {
        self.prob as f64 / MAX_PROB as f64
    }

    /// The latest queue-delay estimate, in ns.
    pub fn qdelay_ns(&self) -> u64 {
        self.qdelay << PSCHED_SHIFT
    }

    /// `pie_vars_init`: re-arms the 150 ms burst allowance and the rate measurement.
    fn vars_init(&mut self) {
        self.burst_time = ticks(150 * NANOS_PER_MILLI);
        self.dq_tstamp = None;
        self.accu_prob = 0;
        self.dq_count = None;
        self.avg_dq_rate = 0;
    }

    /// Runs the `tupdate` timer for every period that ended by `now`. The backlog
    /// only changes in enqueue/dequeue, so catching up here is exact.
    fn run_timer(&mut self, now: SimTime) {
        while now >= self.next_update {
            self.calculate_probability();
            self.next_update = SimTime(self.next_update.0 + self.tupdate_ns);
        }
    }

    /// `pie_drop_early`.
    fn drop_early(&mut self, packet_bytes: u32, rng: &mut SimRng) -> bool {
        // Burst allowance left: no early drop (RFC 8033 section 4.4).
        if self.burst_time > 0 {
            return false;
        }
        // Delay under half the target with a low probability: no early drop.
        if self.qdelay < self.target / 2 && self.prob < MAX_PROB / 5 {
            return false;
        }
        // Fewer than two MTU-sized packets queued, like RED's min_th.
        if self.backlog_bytes < 2 * self.mtu_bytes {
            return false;
        }
        let local_prob = if self.bytemode && packet_bytes as u64 <= self.mtu_bytes {
            packet_bytes as u64 * (self.prob / self.mtu_bytes)
        } else {
            self.prob
        };
        // De-randomization (RFC 8033 section 5.1).
        if local_prob == 0 {
            self.accu_prob = 0;
        } else {
            self.accu_prob = self.accu_prob.wrapping_add(local_prob);
        }
        if self.accu_prob < (MAX_PROB / 100) * 85 {
            return false;
        }
        if self.accu_prob >= (MAX_PROB / 2) * 17 {
            return true;
        }
        if (rng.next_u64() >> 8) < local_prob {
            self.accu_prob = 0;
            return true;
        }
        false
    }

    /// `pie_process_dequeue`, with the backlog after this packet left.
    fn process_dequeue(&mut self, now: SimTime, enqueue_time: SimTime, len_bytes: u32) {
        let now_t = ticks(now.as_nanos());
        let mut dtime = 0;
        if !self.dq_rate_estimator {
            self.qdelay = now_t.saturating_sub(ticks(enqueue_time.as_nanos()));
            if let Some(ts) = self.dq_tstamp {
                dtime = now_t - ts;
            }
            self.dq_tstamp = Some(now_t);
            if self.backlog_bytes == 0 {
                self.qdelay = 0;
            }
            if dtime == 0 {
                return;
            }
        } else {
            if self.backlog_bytes >= QUEUE_THRESHOLD && self.dq_count.is_none() {
                self.dq_tstamp = Some(now_t);
                self.dq_count = Some(0);
            }
            let Some(count) = self.dq_count else { return };
            let count = count + len_bytes as u64;
            self.dq_count = Some(count);
            if count < QUEUE_THRESHOLD {
                return;
            }
            dtime = now_t - self.dq_tstamp.unwrap_or(now_t);
            if dtime == 0 {
                return;
            }
            // Bytes per tick << PIE_SCALE, in u32 as Linux keeps it.
            let rate = ((count << PIE_SCALE) as u32 as u64 / dtime) as u32;
            self.avg_dq_rate =
                if self.avg_dq_rate == 0 { rate } else { self.avg_dq_rate - (self.avg_dq_rate >> 3) + (rate >> 3) };
            if self.backlog_bytes < QUEUE_THRESHOLD {
                self.dq_count = None;
            } else {
                self.dq_count = Some(0);
                self.dq_tstamp = Some(now_t);
            }
        }
        // Burst allowance reduction.
        self.burst_time = self.burst_time.saturating_sub(dtime);
    }

    /// `pie_calculate_probability`: the PI controller, every tupdate.
    fn calculate_probability(&mut self) {
        let backlog = self.backlog_bytes;
        let (qdelay, qdelay_old);
        if self.dq_rate_estimator {
            qdelay_old = self.qdelay;
            self.qdelay_old = self.qdelay;
            qdelay = if self.avg_dq_rate > 0 { (backlog << PIE_SCALE) / self.avg_dq_rate as u64 } else { 0 };
        } else {
            qdelay = self.qdelay;
            qdelay_old = self.qdelay_old;
        }
        // A delay of zero over a non-empty queue means a tiny queue: no decay this round.
        let mut update_prob = !(qdelay == 0 && backlog != 0);

        // alpha, beta per second of delay error, in MAX_PROB units, /16.
        let mut alpha = (self.alpha as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;
        let mut beta = (self.beta as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;
        // RFC 8033 section 4.2: smaller steps while the probability is small.
        if self.prob < MAX_PROB / 10 {
            alpha >>= 1;
            beta >>= 1;
            let mut power = 100u64;
            while self.prob < MAX_PROB / power && power <= 1_000_000 {
                alpha >>= 2;
                beta >>= 2;
                power *= 10;
            }
        }
        let mut delta: i64 = (alpha as i64).wrapping_mul(qdelay as i64 - self.target as i64);
        delta = delta.wrapping_add((beta as i64).wrapping_mul(qdelay as i64 - qdelay_old as i64));

        let oldprob = self.prob;
        // Steps of at most 2% once above 10%.
        if delta > (MAX_PROB / 50) as i64 && self.prob >= MAX_PROB / 10 {
            delta = ((MAX_PROB / 100) * 2) as i64;
        }
        // Delays above 250 ms add 2% per update.
        if qdelay > ticks(250 * NANOS_PER_MILLI) {
            delta += (MAX_PROB / 50) as i64;
        }
        self.prob = self.prob.wrapping_add(delta as u64);
        if delta > 0 {
            if self.prob < oldprob {
                self.prob = MAX_PROB;
                update_prob = false;
            }
        } else if self.prob > oldprob {
            self.prob = 0;
        }
        // Two updates in a row with no delay: decay to 98.4%.
        if qdelay == 0 && qdelay_old == 0 && update_prob {
            self.prob -= self.prob / 64;
        }
        self.qdelay = qdelay;
        // Restart the measurement (and the burst allowance) once the queue has been quiet.
        if self.qdelay < self.target / 2
            && self.qdelay_old < self.target / 2
            && self.prob == 0
            && (!self.dq_rate_estimator || self.avg_dq_rate > 0)
        {
            self.vars_init();
        }
        if !self.dq_rate_estimator {
            self.qdelay_old = qdelay;
        }
    }
}

impl<P> Qdisc<P> for Pie<P> {
    /// `pie_qdisc_enqueue`.
    fn enqueue(&mut self, now: SimTime, mut pkt: Packet<P>, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        self.run_timer(now);
        if self.queue.len() as u64 >= self.limit_packets as u64 {
            self.accu_prob = 0;
            self.stats.overflow_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
            return;
        }
        let admit = !self.drop_early(pkt.meta.len_bytes, rng)
            // ECN-capable: mark instead while the probability is at most 10%.
            || (self.ecn && self.prob <= MAX_PROB / 10 && mark(&mut pkt.meta, &mut self.stats));
        if !admit {
            self.accu_prob = 0;
            self.stats.aqm_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Aqm });
            return;
        }
        pkt.meta.enqueue_time = now;
        self.backlog_bytes += pkt.meta.len_bytes as u64;
        self.queue.push_back(pkt);
    }

    /// `pie_qdisc_dequeue`.
    fn dequeue(&mut self, now: SimTime, _rng: &mut SimRng, _dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        self.run_timer(now);
        let pkt = self.queue.pop_front()?;
        self.backlog_bytes -= pkt.meta.len_bytes as u64;
        self.process_dequeue(now, pkt.meta.enqueue_time, pkt.meta.len_bytes);
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
    use crate::testutil::{drive, Source};
    use crate::{Ecn, PacketMeta};

    /// tc's defaults: target 15 ms, tupdate 15 ms, limit 1000, alpha 2, beta 20.
    fn config(ecn: bool) -> PieConfig {
        PieConfig {
            target_ns: 15 * NANOS_PER_MILLI,
            tupdate_ns: 15 * NANOS_PER_MILLI,
            limit_packets: 1000,
            alpha: 2,
            beta: 20,
            ecn,
            bytemode: false,
            dq_rate_estimator: false,
        }
    }

    /// A PIE whose controller is frozen at `prob` with the burst allowance spent.
    fn frozen(ecn: bool, prob: f64) -> Pie<u32> {
        let mut q = Pie::new(&config(ecn), crate::PSCHED_MTU_BYTES);
        q.next_update = SimTime::MAX;
        q.prob = (prob * MAX_PROB as f64) as u64;
        q.burst_time = 0;
        q
    }

    const LINK_BPS: u64 = 10_000_000;
    const SEC: u64 = 1_000_000_000;

    #[test]
    fn the_resolved_config_parses_with_the_contract_keys_only() {
        let json = r#"{"kind": "pie", "target_ns": 15000000, "tupdate_ns": 15000000, "limit_packets": 1000,
            "alpha": 2, "beta": 20, "ecn": false, "bytemode": false, "dq_rate_estimator": false}"#;
        let c: crate::AqmConfig = serde_json::from_str(json).unwrap();
        assert_eq!(c, crate::AqmConfig::Pie(config(false)));
        assert!(serde_json::from_str::<crate::AqmConfig>(&json.replace("}", r#", "extra": 1}"#)).is_err());
    }

    #[test]
    fn under_a_constant_overload_the_queue_delay_settles_at_the_target() {
        // Unresponsive traffic from a cold start: the queue overshoots (no update
        // for 500 ms, tiny steps while prob < 1%, then +2% per update past 250 ms),
        // the probability overshoots in turn, and the integral term then walks
        // it back until the mean delay is the target. The heavier the overload,
        // the longer that takes (a 3x overload needs ~18 s).
        for (load, settled_s, dq_rate_estimator) in [(1.1, 4, false), (1.5, 12, false), (1.1, 4, true)] {
            let mut c = config(false);
            c.dq_rate_estimator = dq_rate_estimator;
            let mut q = Pie::new(&c, crate::PSCHED_MTU_BYTES);
            let src = [Source::cbr(0, (LINK_BPS as f64 * load) as u64)];
            let r = drive(&mut q, &src, LINK_BPS, 30 * SEC, 1);
            let from = settled_s * SEC;
            let mean = r.sojourn_mean_ns(from) / 1e6;
            let p50 = r.sojourn_percentile_ns(from, 50.0) as f64 / 1e6;
            let p95 = r.sojourn_percentile_ns(from, 95.0) as f64 / 1e6;
            eprintln!("pie load {load} dq_rate_estimator {dq_rate_estimator}: from {settled_s} s sojourn mean {mean:.1} ms p50 {p50:.1} ms p95 {p95:.1} ms, prob {:.3}", q.probability());
            assert!((12.0..18.0).contains(&mean), "load {load}: mean sojourn {mean} ms");
            // A stable queue under unresponsive load drops the excess, 1 - 1/load of arrivals.
            let f = &r.flows[0];
            let drops = f.aqm_drops_ns.iter().filter(|&&t| t >= from).count() as f64;
            let arrivals = drops + f.delivered.iter().filter(|d| d.at_ns >= from).count() as f64;
            let excess = 1.0 - 1.0 / load;
            assert!((drops / arrivals - excess).abs() < 0.02, "load {load}: drop fraction {}", drops / arrivals);
        }
    }

    #[test]
    fn responsive_flows_settle_at_the_15_ms_target_within_two_seconds() {
        // Four Reno-like flows, 50 ms base RTT, line rate 10x the bottleneck.
        for ecn in [false, true] {
            let mut q = Pie::new(&config(ecn), crate::PSCHED_MTU_BYTES);
            let ect = if ecn { Ecn::Ect0 } else { Ecn::NotEct };
            let src: Vec<Source> = (0..4).map(|i| Source::aimd(i, 10 * LINK_BPS, 50_000_000).ecn(ect)).collect();
            let r = drive(&mut q, &src, LINK_BPS, 20 * SEC, 1);
            let windows: Vec<f64> = (1..10)
                .map(|w| {
                    let v: Vec<u64> = r
                        .flows
                        .iter()
                        .flat_map(|f| f.delivered.iter())
                        .filter(|d| d.at_ns >= 2 * w * SEC && d.at_ns < 2 * (w + 1) * SEC)
                        .map(|d| d.sojourn_ns)
                        .collect();
                    v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e6
                })
                .collect();
            let delivered: u64 = r.flows.iter().map(|f| f.bytes_between(2 * SEC, 20 * SEC)).sum();
            let utilization = delivered as f64 * 8.0 / 18.0 / LINK_BPS as f64;
            eprintln!("pie 4 aimd flows ecn {ecn}: mean sojourn per 2 s from 2 s {windows:.1?} ms, utilization {utilization:.3}, {:?}", r.stats);
            assert!(windows.iter().all(|m| (11.0..19.0).contains(m)), "{windows:?}");
            assert!(utilization > 0.97, "utilization {utilization}");
            if ecn {
                // The probability stays under 10%: every signal is a mark.
                assert!(r.stats.ce_marks > 50 && r.stats.aqm_drops == 0, "{:?}", r.stats);
            }
        }
    }

    #[test]
    fn no_early_drop_during_the_150_ms_burst_allowance() {
        // The controller holds 50%; only the allowance protects the burst.
        let mut q = frozen(false, 0.5);
        q.burst_time = ticks(150 * NANOS_PER_MILLI);
        let r = drive(&mut q, &[Source::cbr(0, 3 * LINK_BPS)], LINK_BPS, SEC / 2, 1);
        let first = r.flows[0].aqm_drops_ns[0];
        assert!((150_000_000..160_000_000).contains(&first), "first drop at {first} ns");
        // Without it the first drops come as soon as two MTUs are queued and the
        // accumulator passes 0.85.
        let mut q = frozen(false, 0.5);
        let r = drive(&mut q, &[Source::cbr(0, 3 * LINK_BPS)], LINK_BPS, SEC / 2, 1);
        assert!(r.flows[0].aqm_drops_ns[0] < 5_000_000);
    }

    #[test]
    fn with_ecn_ect_packets_are_marked_while_the_probability_is_at_most_ten_percent() {
        for (prob, ecn, ect, marks_expected) in [
            (0.05, true, Ecn::Ect0, true),
            (0.2, true, Ecn::Ect0, false),
            (0.05, true, Ecn::NotEct, false),
            (0.05, false, Ecn::Ect0, false),
        ] {
            let mut q = frozen(ecn, prob);
            let r = drive(&mut q, &[Source::cbr(0, 2 * LINK_BPS).ecn(ect)], LINK_BPS, SEC, 1);
            let s = r.stats;
            if marks_expected {
                assert!(s.ce_marks > 20 && s.aqm_drops == 0, "prob {prob}: {s:?}");
            } else {
                assert!(s.aqm_drops > 20 && s.ce_marks == 0, "prob {prob} ecn {ecn} {ect:?}: {s:?}");
            }
        }
    }

    #[test]
    fn drops_are_derandomized_between_0_85_and_8_5_accumulated_probability() {
        let mut q = frozen(false, 0.1);
        q.qdelay = q.target; // past half the target: early drop is on
        let mut rng = SimRng::new(5);
        let mut dropped = Vec::new();
        let meta = PacketMeta {
            len_bytes: 1514,
            flow_hash: 1,
            src_host_hash: 1,
            dst_host_hash: 2,
            ecn: Ecn::NotEct,
            enqueue_time: SimTime::ZERO,
            l4s_queue: false,
        };
        for _ in 0..10 {
            q.enqueue(SimTime(0), Packet { meta, inner: 0 }, &mut rng, &mut dropped);
        }
        let (mut since, mut gaps) = (0u32, Vec::new());
        for i in 0..200_000u32 {
            let before = dropped.len();
            q.enqueue(SimTime(1), Packet { meta, inner: i }, &mut rng, &mut dropped);
            since += 1;
            if dropped.len() > before {
                gaps.push(since);
                since = 0;
            } else {
                q.queue.pop_back();
                q.backlog_bytes -= 1514;
            }
        }
        let (min, max) = (*gaps.iter().min().unwrap(), *gaps.iter().max().unwrap());
        let mean = gaps.iter().sum::<u32>() as f64 / gaps.len() as f64;
        // 0.85 / 0.1 = 8.5 -> at least the 9th packet; 8.5 / 0.1 = 85 -> at most the 85th.
        assert!(min >= 9 && max <= 85, "gaps {min}..{max}");
        // Memoryless drops at 10% would average a gap of 10; the accumulator adds ~8.
        assert!((mean - 18.0).abs() < 2.0, "mean gap {mean}");
    }
}
