//! DualPI2, RFC 9332, as Linux runs it: net/sched/sch_dualpi2.c (6.18).
//!
//! Two FIFOs behind one limit. Packets whose ECN field matches `ecn_mask`
//! (ECT(1) and CE by default: the L4S identifier of RFC 9331) go to the L
//! queue, everything else to the classic (C) queue. One PI controller, run
//! every `tupdate`, turns the larger of the two head-of-queue sojourns into a
//! base probability p'; the classic queue drops or marks with p'^2 (two
//! rolls), the L queue marks with k*p' (the coupling), and on top the L queue
//! marks every packet whose own sojourn exceeds the step threshold (1 ms). A
//! byte-credit round robin gives the L queue 90% and the classic 10% while
//! both are backlogged (`c_protection`).
//!
//! Linux against RFC 9332's pseudo-code, where it matters here (Linux is what
//! cclab follows):
//! - The PI input is max(C head sojourn, L head sojourn) (RFC A.2), never C alone.
//! - The native L4S AQM is a step at `step_thresh` (strict `>`), not the RFC's
//!   800-1200 us ramp; `min_qlen_step` defaults to 0 (the RFC's Th_len is 1).
//! - Marks and drops are random rolls (`get_random_u32() <= prob`), p'^2 as two
//!   rolls, where the RFC shows a deterministic accumulator (and allows both).
//! - No mark or drop while the whole backlog is under 2 MTU.
//! - alpha and beta are tc's Hz x 256; internally `param * 2^32 / 4 / 1e9` per
//!   64 ns (`dualpi2_scale_alpha_beta`), so the defaults 41 and 819 become 44
//!   and 879, i.e. 0.160 and 3.198 Hz.
//!
//! What the simulator leaves out, by name:
//! - Memory is counted in packet bytes, not skb truesize (as fq_codel and CAKE here).
//! - No GSO at the bottleneck (every packet is one frame), so `split_gso` has nothing to split.
//! - No tc filters or skb priority, so the LLLL class (L queue without AQM) cannot be reached.
//! - Linux re-arms the update timer at `now + tupdate` from its callback (its
//!   period drifts by the callback's latency); here it fires every `tupdate`
//!   exactly, caught up at each enqueue and dequeue, which is exact because the
//!   queues only change there.
//! - Linux adds the scaled delta into a u32 and catches a wrap; here the sum
//!   saturates, which is what that check intends.

use crate::ecn::mark;
use crate::{DropReason, Dropped, Ecn, Packet, Qdisc, QdiscStats};
use cclab_cc::rng::SimRng;
use cclab_cc::SimTime;
use serde::Deserialize;
use std::collections::VecDeque;

/// `{"kind": "dualpi2", ...}`: tc's `dualpi2` options, units in the names.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DualPi2Config {
    /// Packets in both queues together (tc `limit`, default 10000).
    pub limit_packets: u32,
    /// Bytes in both queues together (tc `memlimit`, default limit x 2 x MTU frame).
    pub memory_limit_bytes: u64,
    /// The classic queue's delay target (15 ms).
    pub target_ns: u64,
    /// The PI controller's period (16 ms).
    pub tupdate_ns: u64,
    /// The integral gain in tc's netlink unit, Hz x 256 (kernel default 41 = 0.16 Hz).
    pub alpha: u32,
    /// The proportional gain, Hz x 256 (kernel default 819 = 3.2 Hz).
    pub beta: u32,
    /// The L queue's step threshold as a sojourn (1 ms); exactly one of this and
    /// `step_thresh_packets` is set.
    pub step_thresh_ns: Option<u64>,
    /// The step threshold as the L queue's length in packets.
    pub step_thresh_packets: Option<u32>,
    /// No step mark while the L queue held fewer packets than this (0).
    pub min_qlen_step: u32,
    /// k: p_L = k x p' (2).
    pub coupling_factor: u8,
    /// On overload (k x p' > 1) drop with p'^2 in both queues (true), or cap p' at 1/k
    /// and let the limit tail-drop (false, tc `overflow`).
    pub drop_overload: bool,
    /// Apply the PI marks and drops at enqueue (true) instead of dequeue (false, Linux's default).
    pub drop_early: bool,
    /// The classic queue's share of the link while both queues are backlogged, % (10).
    pub c_protection_percent: u8,
    /// Which ECN codepoints go to the L queue, as bits of the ECN field: 1 = ECT(1)
    /// and CE (tc `l4s_ect`, default), 3 = any ECT (tc `any_ect`).
    pub ecn_mask: u8,
}

impl Default for DualPi2Config {
    /// `dualpi2_reset_default`: Linux's and tc's defaults.
    fn default() -> Self {
        let limit_packets = 10_000;
        DualPi2Config {
            limit_packets,
            memory_limit_bytes: limit_packets as u64 * 2 * crate::PSCHED_MTU_BYTES as u64,
            target_ns: 15_000_000,
            tupdate_ns: 16_000_000,
            alpha: 41,
            beta: 819,
            step_thresh_ns: Some(1_000_000),
            step_thresh_packets: None,
            min_qlen_step: 0,
            coupling_factor: 2,
            drop_overload: true,
            drop_early: false,
            c_protection_percent: 10,
            ecn_mask: 1,
        }
    }
}

/// `MAX_PROB`: a probability of 1 is `u32::MAX`.
const MAX_PROB: u32 = u32::MAX;
/// `ALPHA_BETA_GRANULARITY`: internal gains are per 64 ns of delay.
const ALPHA_BETA_GRANULARITY: u32 = 6;
/// `ALPHA_BETA_SHIFT - ALPHA_BETA_GRANULARITY` = 8 - 6.
const ALPHA_BETA_SCALING: u32 = 2;

/// `dualpi2_scale_alpha_beta`: tc's Hz x 256 into probability (2^-32) per 64 ns of delay.
fn scale_alpha_beta(param: u32) -> u32 {
    ((param as u64 * MAX_PROB as u64 >> ALPHA_BETA_SCALING) / 1_000_000_000) as u32
}

/// The ECN field's two bits (RFC 3168: ECT(1) = 01, ECT(0) = 10, CE = 11).
fn ecn_bits(ecn: Ecn) -> u8 {
    match ecn {
        Ecn::NotEct => 0b00,
        Ecn::Ect1 => 0b01,
        Ecn::Ect0 => 0b10,
        Ecn::Ce => 0b11,
    }
}

/// A queued packet with the part of `struct dualpi2_skb_cb` the enqueue decides.
struct Queued<P> {
    pkt: Packet<P>,
    /// `cb->apply_step`: the L queue held at least `min_qlen_step` packets on arrival.
    apply_step: bool,
}

/// Per-queue counters (`struct tc_dualpi2_xstats` and the L queue's own qstats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DualPi2Stats {
    /// `packets_in_l` / `packets_in_c`: packets ever enqueued in each queue.
    pub packets_in_l: u64,
    pub packets_in_c: u64,
    /// `step_marks`: CE marks of the L queue's step (also counted in `ce_marks`).
    pub step_marks: u64,
    /// `maxq`: the most packets queued (both queues) seen at an enqueue.
    pub max_qlen: u64,
}

pub struct DualPi2<P> {
    /// `psched_mtu(dev)`.
    mtu_bytes: u64,
    limit_packets: u64,
    memory_limit_bytes: u64,
    target_ns: u64,
    tupdate_ns: u64,
    alpha: u32,
    beta: u32,
    step_thresh: u64,
    step_in_packets: bool,
    min_qlen_step: u64,
    coupling_factor: u64,
    drop_overload: bool,
    drop_early: bool,
    ecn_mask: u8,
    c_protection_wc: i64,
    c_protection_wl: i64,
    c_protection_init: i64,
    // The controller.
    prob: u32,
    last_qdelay_ns: u64,
    next_update: SimTime,
    // The queues.
    l_queue: VecDeque<Queued<P>>,
    c_queue: VecDeque<Queued<P>>,
    backlog_bytes: u64,
    l_backlog_bytes: u64,
    credit: i64,
    stats: QdiscStats,
    dualpi2_stats: DualPi2Stats,
}

impl<P> DualPi2<P> {
    /// `psched_mtu_bytes`: `psched_mtu(dev)`, which the credit scheduler and the
    /// two-packet floor of dualpi2_classic_marking read.
    pub fn new(c: &DualPi2Config, psched_mtu_bytes: u32) -> Self {
        let wc = c.c_protection_percent.min(100) as i64;
        let wl = 100 - wc;
        // dualpi2_calculate_c_protection: L is served first after a reset.
        let c_protection_init = psched_mtu_bytes as i64 * (wc - wl);
        let (step_thresh, step_in_packets) = match (c.step_thresh_ns, c.step_thresh_packets) {
            (_, Some(pkts)) => (pkts as u64, true),
            (Some(ns), None) => (ns, false),
            (None, None) => (1_000_000, false),
        };
        DualPi2 {
            mtu_bytes: psched_mtu_bytes as u64,
            limit_packets: c.limit_packets.max(1) as u64,
            memory_limit_bytes: c.memory_limit_bytes.max(1),
            target_ns: c.target_ns,
            tupdate_ns: c.tupdate_ns.max(1),
            alpha: scale_alpha_beta(c.alpha),
            beta: scale_alpha_beta(c.beta),
            step_thresh,
            step_in_packets,
            min_qlen_step: c.min_qlen_step as u64,
            coupling_factor: c.coupling_factor.max(1) as u64,
            drop_overload: c.drop_overload,
            drop_early: c.drop_early,
            ecn_mask: c.ecn_mask & 0b11,
            c_protection_wc: wc,
            c_protection_wl: wl,
            c_protection_init,
            prob: 0,
            last_qdelay_ns: 0,
            // dualpi2_init arms the timer at now + tupdate; the qdisc is created at time 0.
            next_update: SimTime(c.tupdate_ns.max(1)),
            l_queue: VecDeque::new(),
            c_queue: VecDeque::new(),
            backlog_bytes: 0,
            l_backlog_bytes: 0,
            credit: c_protection_init,
            stats: QdiscStats::default(),
            dualpi2_stats: DualPi2Stats::default(),
        }
    }

    /// p', the base probability in [0, 1] (`prob` in tc's statistics).
    pub fn base_probability(&self) -> f64 {
        self.prob as f64 / MAX_PROB as f64
    }

    pub fn dualpi2_stats(&self) -> DualPi2Stats {
        self.dualpi2_stats
    }

    /// Bytes in the L queue.
    pub fn l_backlog_bytes(&self) -> u64 {
        self.l_backlog_bytes
    }

    /// Runs the update timer for every period that ended by `now`.
    fn run_timer(&mut self, now: SimTime) {
        while now >= self.next_update {
            let at = self.next_update;
            self.prob = self.calculate_probability(at);
            self.next_update = SimTime(at.0 + self.tupdate_ns);
        }
    }

    /// `get_queue_delays`: each queue's head sojourn at `now` (0 when empty).
    fn head_delay_ns(queue: &VecDeque<Queued<P>>, now: SimTime) -> u64 {
        queue.front().map_or(0, |q| now.saturating_since(q.pkt.meta.enqueue_time).as_nanos())
    }

    /// `calculate_probability`: p' += alpha (qdelay - target) + beta (qdelay - last qdelay).
    fn calculate_probability(&mut self, now: SimTime) -> u32 {
        let qdelay = Self::head_delay_ns(&self.l_queue, now).max(Self::head_delay_ns(&self.c_queue, now));
        let delta = (qdelay as i128 - self.target_ns as i128) * self.alpha as i128
            + (qdelay as i128 - self.last_qdelay_ns as i128) * self.beta as i128;
        self.last_qdelay_ns = qdelay;
        // __scale_delta: per 64 ns.
        let scaled = (delta.unsigned_abs() >> ALPHA_BETA_GRANULARITY).min(MAX_PROB as u128) as u32;
        let new_prob = if delta > 0 { self.prob.saturating_add(scaled) } else { self.prob.saturating_sub(scaled) };
        if !self.drop_overload {
            // Overflow mode: p' never passes 1/k, so k x p' never overloads.
            return new_prob.min(MAX_PROB / self.coupling_factor as u32);
        }
        new_prob
    }

    /// `dualpi2_roll`: true with probability (prob + 1) / 2^32.
    fn roll(rng: &mut SimRng, prob: u32) -> bool {
        ((rng.next_u64() >> 32) as u32) <= prob
    }

    fn in_l_queue(&self, ecn: Ecn) -> bool {
        ecn_bits(ecn) & self.ecn_mask != 0
    }

    /// `must_drop`: the PI's classic (p'^2) or coupled (k x p') signal for `pkt`, given
    /// the backlog without it. True: drop it; a mark is applied in place.
    fn must_drop(&mut self, pkt: &mut Packet<P>, l4s: bool, rng: &mut SimRng) -> bool {
        if self.backlog_bytes < 2 * self.mtu_bytes {
            return false;
        }
        let prob = self.prob;
        let l_prob = prob as u64 * self.coupling_factor;
        let overload = l_prob > MAX_PROB as u64;
        if !l4s {
            // dualpi2_classic_marking: p_C = p'^2; ECN off once overloaded.
            if Self::roll(rng, prob) && Self::roll(rng, prob) {
                if overload || pkt.meta.ecn == Ecn::NotEct {
                    return true;
                }
                mark(&mut pkt.meta, &mut self.stats);
            }
            return false;
        }
        // dualpi2_scalable_marking.
        if overload {
            if self.drop_overload && Self::roll(rng, prob) && Self::roll(rng, prob) {
                return true;
            }
            mark(&mut pkt.meta, &mut self.stats);
            return false;
        }
        if Self::roll(rng, l_prob as u32) {
            if pkt.meta.ecn == Ecn::NotEct {
                return true;
            }
            mark(&mut pkt.meta, &mut self.stats);
        }
        false
    }

    /// `dequeue_packet`: the credit scheduler. Returns the packet, whether it came
    /// from the L queue, and the credit change to apply if it is sent.
    fn dequeue_packet(&mut self) -> Option<(Queued<P>, bool, i64)> {
        let c_len = self.c_queue.len();
        let (queued, l4s, change) = if !self.l_queue.is_empty() && (c_len == 0 || self.credit <= 0) {
            let q = self.l_queue.pop_front()?;
            self.l_backlog_bytes -= q.pkt.meta.len_bytes as u64;
            (q, true, if c_len > 0 { self.c_protection_wc } else { 0 })
        } else if c_len > 0 {
            let q = self.c_queue.pop_front()?;
            (q, false, if self.l_queue.is_empty() { 0 } else { -self.c_protection_wl })
        } else {
            // dualpi2_reset_c_protection: both empty.
            self.credit = self.c_protection_init;
            return None;
        };
        self.backlog_bytes -= queued.pkt.meta.len_bytes as u64;
        let change = change * queued.pkt.meta.len_bytes as i64;
        Some((queued, l4s, change))
    }

    /// `do_step_aqm`: mark (or, Not-ECT, drop) an L packet past the step. True: drop it.
    fn step_must_drop(&mut self, queued: &mut Queued<P>, now: SimTime) -> bool {
        let qdelay = if self.step_in_packets {
            self.l_queue.len() as u64
        } else {
            now.saturating_since(queued.pkt.meta.enqueue_time).as_nanos()
        };
        if queued.apply_step && qdelay > self.step_thresh {
            if queued.pkt.meta.ecn == Ecn::NotEct {
                return true;
            }
            if mark(&mut queued.pkt.meta, &mut self.stats) {
                self.dualpi2_stats.step_marks += 1;
            }
        }
        false
    }
}

impl<P> Qdisc<P> for DualPi2<P> {
    /// `dualpi2_qdisc_enqueue` -> `dualpi2_skb_classify`, `dualpi2_enqueue_skb`.
    fn enqueue(&mut self, now: SimTime, mut pkt: Packet<P>, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) {
        self.run_timer(now);
        let l4s = self.in_l_queue(pkt.meta.ecn);
        pkt.meta.l4s_queue = l4s;
        let qlen = (self.l_queue.len() + self.c_queue.len()) as u64;
        if qlen >= self.limit_packets || self.backlog_bytes + pkt.meta.len_bytes as u64 > self.memory_limit_bytes {
            self.stats.overflow_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Overflow });
            return;
        }
        if self.drop_early && self.must_drop(&mut pkt, l4s, rng) {
            self.stats.aqm_drops += 1;
            dropped.push(Dropped { packet: pkt, reason: DropReason::Aqm });
            return;
        }
        pkt.meta.enqueue_time = now;
        self.dualpi2_stats.max_qlen = self.dualpi2_stats.max_qlen.max(qlen);
        let len = pkt.meta.len_bytes as u64;
        self.backlog_bytes += len;
        if l4s {
            let apply_step = self.l_queue.len() as u64 >= self.min_qlen_step;
            self.dualpi2_stats.packets_in_l += 1;
            self.l_backlog_bytes += len;
            self.l_queue.push_back(Queued { pkt, apply_step });
        } else {
            self.dualpi2_stats.packets_in_c += 1;
            self.c_queue.push_back(Queued { pkt, apply_step: false });
        }
    }

    /// `dualpi2_qdisc_dequeue`: the PI's signal (unless applied at enqueue), then the
    /// L queue's step; a dropped packet leaves the credit as it was.
    fn dequeue(&mut self, now: SimTime, rng: &mut SimRng, dropped: &mut Vec<Dropped<P>>) -> Option<Packet<P>> {
        self.run_timer(now);
        while let Some((mut queued, l4s, credit_change)) = self.dequeue_packet() {
            if !self.drop_early && self.must_drop(&mut queued.pkt, l4s, rng) {
                self.stats.aqm_drops += 1;
                dropped.push(Dropped { packet: queued.pkt, reason: DropReason::Aqm });
                continue;
            }
            if l4s && self.step_must_drop(&mut queued, now) {
                self.stats.aqm_drops += 1;
                dropped.push(Dropped { packet: queued.pkt, reason: DropReason::Aqm });
                continue;
            }
            self.credit += credit_change;
            return Some(queued.pkt);
        }
        None
    }

    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }

    fn backlog_packets(&self) -> usize {
        self.l_queue.len() + self.c_queue.len()
    }

    fn stats(&self) -> QdiscStats {
        self.stats
    }
}

#[cfg(test)]
#[path = "dualpi2_tests.rs"]
mod tests;
