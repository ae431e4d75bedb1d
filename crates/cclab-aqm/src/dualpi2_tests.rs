use super::*;
use crate::testutil::{drive, Source};
use crate::PacketMeta;

const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const LINK_BPS: u64 = 50_000_000;

fn config() -> DualPi2Config {
    DualPi2Config::default()
}

/// A DualPI2 whose controller is frozen at `prob`.
fn frozen(prob: f64) -> DualPi2<u32> {
    let mut q = DualPi2::new(&config(), crate::PSCHED_MTU_BYTES);
    q.next_update = SimTime::MAX;
    q.prob = (prob * MAX_PROB as f64) as u32;
    q
}

fn packet(ecn: Ecn, inner: u32) -> Packet<u32> {
    Packet { meta: PacketMeta::new(1514, 1, ecn), inner }
}

#[test]
fn the_resolved_config_parses_with_the_contract_keys_only() {
    let json = r#"{"kind": "dualpi2", "limit_packets": 10000, "memory_limit_bytes": 30280000, "target_ns": 15000000,
        "tupdate_ns": 16000000, "alpha": 41, "beta": 819, "step_thresh_ns": 1000000, "step_thresh_packets": null,
        "min_qlen_step": 0, "coupling_factor": 2, "drop_overload": true, "drop_early": false,
        "c_protection_percent": 10, "ecn_mask": 1}"#;
    let c: crate::AqmConfig = serde_json::from_str(json).unwrap();
    assert_eq!(c, crate::AqmConfig::DualPi2(config()));
    assert_eq!(c.name(), "dualpi2");
    assert!(serde_json::from_str::<crate::AqmConfig>(&json.replace("}", r#", "split_gso": true}"#)).is_err());
}

#[test]
fn the_gains_scale_as_dualpi2_scale_alpha_beta_does() {
    // sch_dualpi2.c: the defaults 41 and 819 (Hz x 256) become 44 and 879 per 64 ns.
    assert_eq!(scale_alpha_beta(41), 44);
    assert_eq!(scale_alpha_beta(819), 879);
}

#[test]
fn ect1_and_ce_go_to_the_l4s_queue_and_ect0_and_not_ect_to_the_classic_one() {
    let mut rng = SimRng::new(1);
    let mut dropped = Vec::new();
    for (mask, ecn, l4s) in [
        (1, Ecn::Ect1, true),
        (1, Ecn::Ce, true),
        (1, Ecn::Ect0, false),
        (1, Ecn::NotEct, false),
        (3, Ecn::Ect0, true),
        (3, Ecn::NotEct, false),
    ] {
        let mut q: DualPi2<u32> = DualPi2::new(&DualPi2Config { ecn_mask: mask, ..config() }, crate::PSCHED_MTU_BYTES);
        q.enqueue(SimTime(0), packet(ecn, 0), &mut rng, &mut dropped);
        assert_eq!((q.l_queue.len(), q.c_queue.len()), (l4s as usize, !l4s as usize), "mask {mask} {ecn:?}");
        let out = q.dequeue(SimTime(0), &mut rng, &mut dropped).unwrap();
        assert_eq!(out.meta.l4s_queue, l4s);
    }
    assert!(dropped.is_empty());
}

#[test]
fn the_controller_raises_p_while_the_queue_is_above_target_and_decays_it_when_idle() {
    let mut rng = SimRng::new(1);
    let mut dropped = Vec::new();
    let mut q: DualPi2<u32> = DualPi2::new(&config(), crate::PSCHED_MTU_BYTES);
    // A packet waiting since 0 at the first update (16 ms): p' grows by
    // alpha x (16 - 15) ms + beta x (16 - 0) ms, per 64 ns.
    q.enqueue(SimTime(0), packet(Ecn::NotEct, 0), &mut rng, &mut dropped);
    q.run_timer(SimTime(16 * MS));
    let expected = (MS as u128 * 44 + 16 * MS as u128 * 879) >> 6;
    assert_eq!(q.prob as u128, expected);
    let raised = q.prob;
    // Empty from then on: the delay error is -15 ms per update, p' walks back to 0.
    q.dequeue(SimTime(16 * MS), &mut rng, &mut dropped).unwrap();
    q.run_timer(SimTime(32 * MS));
    assert!(q.prob < raised);
    q.run_timer(SimTime(10 * SEC));
    assert_eq!(q.prob, 0);
}

#[test]
fn nothing_is_marked_or_dropped_while_under_two_mtu_are_queued() {
    let mut q = frozen(1.0);
    let mut rng = SimRng::new(1);
    let mut dropped = Vec::new();
    q.enqueue(SimTime(0), packet(Ecn::NotEct, 0), &mut rng, &mut dropped);
    for i in 0..1000 {
        let ecn = if i % 2 == 0 { Ecn::NotEct } else { Ecn::Ect1 };
        q.enqueue(SimTime(i), packet(ecn, 1), &mut rng, &mut dropped);
        // One packet stays behind: the backlog at each dequeue is one MTU.
        q.dequeue(SimTime(i), &mut rng, &mut dropped).unwrap();
    }
    assert!(dropped.is_empty());
    assert_eq!(q.stats().ce_marks, 0);
}

#[test]
fn classic_packets_see_p_squared_and_l4s_packets_k_times_p() {
    // p' = 0.2: classic ECT(0) packets are marked with 0.04, L4S ones with 0.4.
    let p = 0.2;
    let mut rng = SimRng::new(7);
    let (mut c_marks, mut l_marks, n) = (0u64, 0u64, 100_000u32);
    for ecn in [Ecn::Ect0, Ecn::Ect1] {
        let mut q = frozen(p);
        q.step_thresh = u64::MAX; // the PI's signal alone
        let mut dropped = Vec::new();
        for i in 0..4 {
            q.enqueue(SimTime(0), packet(ecn, i), &mut rng, &mut dropped);
        }
        for i in 0..n {
            q.enqueue(SimTime(0), packet(ecn, i), &mut rng, &mut dropped);
            let out = q.dequeue(SimTime(0), &mut rng, &mut dropped).unwrap();
            let marked = (out.meta.ecn == Ecn::Ce) as u64;
            if ecn == Ecn::Ect0 { c_marks += marked } else { l_marks += marked }
        }
        assert!(dropped.is_empty());
    }
    let (c, l) = (c_marks as f64 / n as f64, l_marks as f64 / n as f64);
    assert!((c - p * p).abs() < 0.004, "classic mark fraction {c}");
    assert!((l - 2.0 * p).abs() < 0.01, "L4S mark fraction {l}");
}

#[test]
fn on_overload_classic_ect_packets_are_dropped_and_every_surviving_l4s_packet_is_marked() {
    // p' = 0.7 > 1/k: p_L would pass 1.
    let p = 0.7;
    let mut rng = SimRng::new(3);
    for ecn in [Ecn::Ect0, Ecn::Ect1] {
        let mut q = frozen(p);
        let mut dropped = Vec::new();
        // A standing queue deep enough that a run of drops never takes it under 2 MTU.
        for i in 0..200 {
            q.enqueue(SimTime(0), packet(ecn, i), &mut rng, &mut dropped);
        }
        let (mut sent, mut marked) = (0u32, 0u32);
        for i in 0..20_000 {
            // Two in for each out, a little more than the ~1.96 each dequeue takes.
            q.enqueue(SimTime(0), packet(ecn, i), &mut rng, &mut dropped);
            q.enqueue(SimTime(0), packet(ecn, i), &mut rng, &mut dropped);
            if let Some(out) = q.dequeue(SimTime(0), &mut rng, &mut dropped) {
                sent += 1;
                marked += (out.meta.ecn == Ecn::Ce) as u32;
            }
        }
        let drop_fraction = dropped.len() as f64 / (dropped.len() as f64 + sent as f64);
        assert!((drop_fraction - p * p).abs() < 0.02, "{ecn:?}: drop fraction {drop_fraction}");
        match ecn {
            Ecn::Ect0 => assert_eq!(marked, 0, "classic ECN is off under overload"),
            _ => assert_eq!(marked, sent, "every L4S survivor is marked"),
        }
    }
}

#[test]
fn while_both_queues_are_backlogged_the_l4s_queue_gets_ninety_percent_of_the_bytes() {
    let mut q = frozen(0.0);
    let src = [Source::cbr(0, LINK_BPS).ecn(Ecn::Ect1), Source::cbr(1, LINK_BPS)];
    let r = drive(&mut q, &src, LINK_BPS, 2 * SEC, 1);
    let (l, c) = (r.flows[0].bytes_between(SEC / 2, 2 * SEC) as f64, r.flows[1].bytes_between(SEC / 2, 2 * SEC) as f64);
    let l_share = l / (l + c);
    assert!((l_share - 0.9).abs() < 0.01, "L4S share {l_share}");
}

#[test]
fn scalable_flows_keep_the_l4s_queue_near_its_one_ms_step() {
    // RFC 9332 section 1.1 / RFC 9330: an L4S queue's delay stays around the step,
    // far under the classic target, with marks and no drops.
    let mut q = DualPi2::new(&config(), crate::PSCHED_MTU_BYTES);
    let src: Vec<Source> = (0..2).map(|i| Source::scalable(i, 10 * LINK_BPS, 20 * MS)).collect();
    let r = drive(&mut q, &src, LINK_BPS, 10 * SEC, 1);
    let from = 2 * SEC;
    let p50 = r.sojourn_percentile_ns(from, 50.0) as f64 / 1e6;
    let p99 = r.sojourn_percentile_ns(from, 99.0) as f64 / 1e6;
    eprintln!("dualpi2 2 scalable: sojourn p50 {p50:.2} ms p99 {p99:.2} ms, {:?} {:?}", r.stats, q.dualpi2_stats());
    assert!(p99 < 2.0, "p50 {p50} p99 {p99}");
    let stats = q.dualpi2_stats();
    assert!(stats.step_marks > 0 && r.stats.aqm_drops == 0 && stats.packets_in_c == 0, "{stats:?}");
}

#[test]
fn classic_flows_settle_near_the_fifteen_ms_target() {
    let mut q = DualPi2::new(&config(), crate::PSCHED_MTU_BYTES);
    let src: Vec<Source> = (0..4).map(|i| Source::aimd(i, 10 * LINK_BPS, 20 * MS)).collect();
    let r = drive(&mut q, &src, LINK_BPS, 20 * SEC, 1);
    let mean = r.sojourn_mean_ns(5 * SEC) / 1e6;
    eprintln!("dualpi2 4 classic: mean sojourn {mean:.1} ms, {:?}", r.stats);
    assert!((10.0..20.0).contains(&mean), "mean sojourn {mean} ms");
    assert_eq!(q.dualpi2_stats().packets_in_l, 0);
}

#[test]
fn a_scalable_and_a_classic_flow_share_the_link_through_the_coupling() {
    // RFC 9332 section 2.1: k = 2 gives rough rate balance between a scalable and a
    // classic flow; neither takes less than a quarter.
    let mut q = DualPi2::new(&config(), crate::PSCHED_MTU_BYTES);
    let src = [Source::scalable(0, 10 * LINK_BPS, 20 * MS), Source::aimd(1, 10 * LINK_BPS, 20 * MS)];
    let r = drive(&mut q, &src, LINK_BPS, 30 * SEC, 1);
    let (l, c) = (r.flows[0].bytes_between(5 * SEC, 30 * SEC) as f64, r.flows[1].bytes_between(5 * SEC, 30 * SEC) as f64);
    let l_share = l / (l + c);
    eprintln!("dualpi2 scalable vs classic: L4S share {l_share:.3}, {:?}", r.stats);
    assert!((0.25..0.75).contains(&l_share), "L4S share {l_share}");
}

#[test]
fn a_step_in_packets_marks_once_the_l4s_queue_is_longer_than_it() {
    let mut q: DualPi2<u32> = DualPi2::new(&DualPi2Config { step_thresh_ns: None, step_thresh_packets: Some(3), ..config() }, crate::PSCHED_MTU_BYTES);
    q.next_update = SimTime::MAX;
    let mut rng = SimRng::new(1);
    let mut dropped = Vec::new();
    for i in 0..8 {
        q.enqueue(SimTime(0), packet(Ecn::Ect1, i), &mut rng, &mut dropped);
    }
    // The L queue's length after each dequeue: 7, 6, 5, 4 (marked, > 3), then 3, 2, 1, 0.
    let marks: Vec<bool> = (0..8).map(|_| q.dequeue(SimTime(0), &mut rng, &mut dropped).unwrap().meta.ecn == Ecn::Ce).collect();
    assert_eq!(marks, [true, true, true, true, false, false, false, false]);
    assert_eq!(q.dualpi2_stats().step_marks, 4);
}

#[test]
fn the_limit_tail_drops_and_counts_both_queues() {
    let mut q: DualPi2<u32> = DualPi2::new(&DualPi2Config { limit_packets: 4, ..config() }, crate::PSCHED_MTU_BYTES);
    let mut rng = SimRng::new(1);
    let mut dropped = Vec::new();
    for i in 0..6 {
        let ecn = if i % 2 == 0 { Ecn::Ect1 } else { Ecn::NotEct };
        q.enqueue(SimTime(0), packet(ecn, i), &mut rng, &mut dropped);
    }
    assert_eq!(q.backlog_packets(), 4);
    assert_eq!(dropped.len(), 2);
    assert!(dropped.iter().all(|d| d.reason == DropReason::Overflow));
    assert_eq!(q.stats().overflow_drops, 2);
}
