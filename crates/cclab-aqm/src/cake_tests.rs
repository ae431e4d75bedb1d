use super::*;
use crate::testutil::{drive, Report, Source};
use crate::Ecn;

const LINK_BPS: u64 = 10_000_000;
const SEC: u64 = 1_000_000_000;

/// tc's defaults: rtt 100 ms (target 5 ms), triple-isolate, default memory, ECN.
fn config(flow_mode: FlowMode) -> CakeConfig {
    CakeConfig { rtt_ns: 100_000_000, target_ns: 5_000_000, flow_mode, memory_limit_bytes: None, ecn: true }
}

fn run(c: &CakeConfig, sources: &[Source], secs: u64) -> Report {
    let mut q = Cake::new(c, crate::PSCHED_MTU_BYTES);
    drive(&mut q, sources, LINK_BPS, secs * SEC, 1)
}

fn shares(r: &Report, from_ns: u64, to_ns: u64) -> Vec<f64> {
    let bytes: Vec<u64> = r.flows.iter().map(|f| f.bytes_between(from_ns, to_ns)).collect();
    let total = bytes.iter().sum::<u64>() as f64;
    bytes.iter().map(|&b| b as f64 / total).collect()
}

#[test]
fn the_resolved_config_parses_with_the_contract_keys_only() {
    let json = r#"{"kind": "cake", "rtt_ns": 100000000, "target_ns": 5000000,
        "flow_mode": "triple-isolate", "memory_limit_bytes": null, "ecn": true}"#;
    let c: crate::AqmConfig = serde_json::from_str(json).unwrap();
    assert_eq!(c, crate::AqmConfig::Cake(config(FlowMode::TripleIsolate)));
    for (name, mode) in [
        ("dual-srchost", FlowMode::DualSrchost),
        ("flowblind", FlowMode::Flowblind),
        ("dsthost", FlowMode::Dsthost),
    ] {
        let c: crate::AqmConfig = serde_json::from_str(&json.replace("triple-isolate", name)).unwrap();
        assert!(matches!(c, crate::AqmConfig::Cake(CakeConfig { flow_mode, .. }) if flow_mode == mode));
    }
    assert!(serde_json::from_str::<crate::AqmConfig>(&json.replace("triple-isolate", "triple")).is_err());
}

#[test]
fn two_bulk_flows_share_the_link_equally_whatever_their_packet_size() {
    // Same host, each offering the whole link: DRR counts bytes, not packets.
    let src = [Source::cbr(0, LINK_BPS).host(0), Source::cbr(1, LINK_BPS).host(0).len(300)];
    let r = run(&config(FlowMode::TripleIsolate), &src, 10);
    let s = shares(&r, 2 * SEC, 10 * SEC);
    eprintln!("cake shares 1514 B vs 300 B: {s:?}");
    assert!((s[0] - 0.5).abs() < 0.02, "{s:?}");
}

#[test]
fn a_sparse_flow_sees_almost_no_queue_beside_a_bulk_flow() {
    // 100 kbit/s of 200-byte packets beside a flow offering twice the link.
    let src = [Source::cbr(0, 2 * LINK_BPS), Source::cbr(1, 100_000).len(200)];
    let r = run(&config(FlowMode::TripleIsolate), &src, 10);
    let sparse_p99 = r.flows[1].sojourn_percentile_ns(SEC, 99.0) as f64 / 1e6;
    let bulk_p50 = r.flows[0].sojourn_percentile_ns(SEC, 50.0) as f64 / 1e6;
    eprintln!("cake sparse p99 {sparse_p99:.2} ms, bulk p50 {bulk_p50:.2} ms");
    // A new-flow packet waits at most for the frame on the wire (1.2 ms at 10 Mbit/s).
    assert!(sparse_p99 < 1.25, "sparse p99 {sparse_p99} ms");
    assert!(bulk_p50 > 4.0, "bulk p50 {bulk_p50} ms");
    assert!(r.flows[1].aqm_drops_ns.is_empty() && r.flows[1].overflow_drops_ns.is_empty());
}

#[test]
fn triple_isolate_gives_each_host_an_equal_share_whatever_its_flow_count() {
    // Host 0 runs one flow, host 1 four, each to its own server; each flow
    // offers the whole link.
    let mut src = vec![Source::cbr(0, LINK_BPS).host(0).dst(0)];
    src.extend((1..=4).map(|i| Source::cbr(i, LINK_BPS).host(1).dst(i)));
    let r = run(&config(FlowMode::TripleIsolate), &src, 10);
    let s = shares(&r, 2 * SEC, 10 * SEC);
    eprintln!("cake triple-isolate shares: {s:?}");
    assert!((s[0] - 0.5).abs() < 0.03, "host 0 share {}", s[0]);
    // Per-flow fairness instead ("flows") gives the single flow a fifth.
    let r = run(&config(FlowMode::Flows), &src, 10);
    let s = shares(&r, 2 * SEC, 10 * SEC);
    eprintln!("cake flows shares: {s:?}");
    assert!((s[0] - 0.2).abs() < 0.02, "flow 0 share {}", s[0]);
    // Triple isolation is fair to destinations as well: when all five flows go
    // to one server, that server's five bulk flows set every flow's quantum.
    let src: Vec<Source> = src.iter().map(|s| s.dst(0)).collect();
    let r = run(&config(FlowMode::TripleIsolate), &src, 10);
    let s = shares(&r, 2 * SEC, 10 * SEC);
    assert!((s[0] - 0.2).abs() < 0.02, "flow 0 share {} with one destination", s[0]);
}

#[test]
fn under_a_moderate_overload_cobalt_holds_the_sojourn_at_the_5_ms_target() {
    for load in [1.1, 1.3] {
        let rate = (LINK_BPS as f64 * load / 2.0) as u64;
        let r = run(&config(FlowMode::TripleIsolate), &[Source::cbr(0, rate), Source::cbr(1, rate)], 20);
        let mean = r.sojourn_mean_ns(4 * SEC) / 1e6;
        let p95 = r.sojourn_percentile_ns(4 * SEC, 95.0) as f64 / 1e6;
        eprintln!("cake load {load}: from 4 s sojourn mean {mean:.2} ms p95 {p95:.2} ms, {:?}", r.stats);
        assert!((4.0..6.5).contains(&mean) && p95 < 10.0, "load {load}: mean {mean} ms p95 {p95} ms");
    }
}

#[test]
fn responsive_flows_keep_the_sojourn_near_the_5_ms_target() {
    // Four Reno-like flows from four hosts, 50 ms base RTT: CoDel holds the
    // standing queue at the target; the sawtooth puts the mean a little above.
    for ect in [Ecn::NotEct, Ecn::Ect0] {
        let src: Vec<Source> =
            (0..4).map(|i| Source::aimd(i, 10 * LINK_BPS, 50_000_000).host(i).ecn(ect)).collect();
        let r = run(&config(FlowMode::TripleIsolate), &src, 20);
        let mean = r.sojourn_mean_ns(2 * SEC) / 1e6;
        let p50 = r.sojourn_percentile_ns(2 * SEC, 50.0) as f64 / 1e6;
        let delivered: u64 = r.flows.iter().map(|f| f.bytes_between(2 * SEC, 20 * SEC)).sum();
        let utilization = delivered as f64 * 8.0 / 18.0 / LINK_BPS as f64;
        eprintln!("cake 4 aimd flows {ect:?}: sojourn mean {mean:.2} ms p50 {p50:.2} ms, utilization {utilization:.3}, {:?}", r.stats);
        assert!((3.0..9.0).contains(&mean), "mean sojourn {mean} ms");
        assert!(utilization > 0.93, "utilization {utilization}");
        if ect == Ecn::Ect0 {
            assert!(r.stats.ce_marks > 50 && r.stats.aqm_drops == 0, "{:?}", r.stats);
        }
    }
}

#[test]
fn ect_packets_are_marked_instead_of_dropped() {
    let r = run(&config(FlowMode::TripleIsolate), &[Source::cbr(0, LINK_BPS * 6 / 5).ecn(Ecn::Ect0)], 5);
    assert!(r.stats.ce_marks > 100 && r.stats.aqm_drops == 0, "{:?}", r.stats);
    assert_eq!(r.flows[0].marks(), r.stats.ce_marks);
}

#[test]
fn overflow_drops_come_from_the_fattest_flow() {
    let mut c = config(FlowMode::TripleIsolate);
    c.memory_limit_bytes = Some(100_000);
    let src = [Source::cbr(0, 2 * LINK_BPS), Source::cbr(1, LINK_BPS * 3 / 10)];
    let r = run(&c, &src, 5);
    assert!(r.flows[0].overflow_drops_ns.len() > 10, "{:?}", r.stats);
    assert!(r.flows[1].overflow_drops_ns.is_empty() && r.flows[1].aqm_drops_ns.is_empty());
    // The thin flow keeps its whole offered rate.
    let thin_bps = r.flows[1].bytes_between(SEC, 5 * SEC) as f64 * 8.0 / 4.0;
    assert!((thin_bps / (LINK_BPS as f64 * 0.3) - 1.0).abs() < 0.02, "thin flow {thin_bps} bit/s");
}

#[test]
fn blue_contains_an_unresponsive_flow_that_overflows_the_memory_limit() {
    // At 3x CoDel's drop rate (sqrt(count) per interval) would need tens of
    // seconds to catch up; the overflow drops raise BLUE, which then drops
    // the excess so that the queue stops overflowing.
    let mut c = config(FlowMode::TripleIsolate);
    c.memory_limit_bytes = Some(300_000);
    let mut q = Cake::new(&c, crate::PSCHED_MTU_BYTES);
    let r = drive(&mut q, &[Source::cbr(0, 3 * LINK_BPS)], LINK_BPS, 10 * SEC, 1);
    let f = &r.flows[0];
    let late = |v: &Vec<u64>| v.iter().filter(|&&t| t >= 5 * SEC).count();
    let (overflow, aqm) = (late(&f.overflow_drops_ns), late(&f.aqm_drops_ns));
    let p_drop = q.flows.iter().map(|fl| fl.cvars.p_drop).max().unwrap() as f64 / 4294967296.0;
    eprintln!("cake 3x into 300 kB: after 5 s {overflow} overflow drops, {aqm} AQM drops, BLUE p_drop {p_drop:.3}");
    assert!(p_drop > 0.5, "BLUE p_drop {p_drop}");
    assert!((overflow as f64) < 0.05 * aqm as f64, "overflow {overflow} aqm {aqm}");
}
