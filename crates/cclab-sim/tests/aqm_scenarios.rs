//! AQM and ECN end to end: what CoDel and fq_codel are for (RFC 8289, RFC 8290)
//! and what an ECN-capable CUBIC flow sees behind them (RFC 3168).

mod common;
use cclab_sim::aqm::cake::{CakeConfig, FlowMode};
use cclab_sim::aqm::codel::CodelConfig;
use cclab_sim::aqm::pie::PieConfig;
use cclab_sim::aqm::fq_codel::FqCodelConfig;
use cclab_sim::aqm::AqmConfig;
use cclab_sim::config::SimConfig;
use cclab_sim::SimResult;
use common::*;

fn codel(ecn: bool) -> AqmConfig {
    AqmConfig::Codel(CodelConfig { ecn, ..Default::default() })
}

fn fq_codel() -> AqmConfig {
    AqmConfig::FqCodel(FqCodelConfig::default())
}

fn with_aqm(mut cfg: SimConfig, aqm: AqmConfig) -> SimConfig {
    cfg.bottleneck.aqm = aqm;
    cfg
}

/// 100 Mbit/s, 20 ms, a 10-BDP buffer, one CUBIC flow for 25 s.
fn bufferbloat(aqm: AqmConfig) -> SimResult {
    run_checked(with_aqm(config(100, 20, 10 * bdp_bytes(100, 20), 0.0, 25, vec![flow(0, "cubic")]), aqm))
}

fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    sum * sum / (xs.len() as f64 * xs.iter().map(|x| x * x).sum::<f64>())
}

#[test]
fn codel_and_fq_codel_cut_a_bloated_fifos_queueing_delay_to_milliseconds_and_keep_the_link_busy() {
    let fifo = bufferbloat(AqmConfig::Fifo);
    let fifo_p50 = fifo.bottleneck.sojourn_p50_ms.unwrap();
    eprintln!("fifo: sojourn p50 {fifo_p50:.1} ms, utilisation {:.3}", fifo.bottleneck.utilization);
    // CUBIC fills a 10-BDP FIFO: a standing queue of a good part of its 200 ms.
    assert!(fifo_p50 > 100.0, "fifo sojourn p50 {fifo_p50} ms");
    for (name, aqm) in [("codel", codel(false)), ("fq_codel", fq_codel())] {
        let r = bufferbloat(aqm);
        let b = &r.bottleneck;
        eprintln!(
            "{name}: sojourn p50 {:.2} p95 {:.2} p99 {:.2} ms, utilisation {:.3}, aqm drops {}, overflow {}",
            b.sojourn_p50_ms.unwrap(),
            b.sojourn_p95_ms.unwrap(),
            b.sojourn_p99_ms.unwrap(),
            b.utilization,
            b.aqm_drops,
            b.overflow_drops
        );
        assert_eq!(b.aqm, name);
        assert!(b.sojourn_p50_ms.unwrap() <= 15.0, "{name}: sojourn p50 {:?}", b.sojourn_p50_ms);
        assert!(b.utilization >= 0.85, "{name}: utilisation {}", b.utilization);
        // The AQM, not the buffer, controls the queue.
        assert!(b.aqm_drops > 0 && b.overflow_drops == 0, "{name}: aqm {} overflow {}", b.aqm_drops, b.overflow_drops);
        assert_eq!(b.drops, b.aqm_drops + b.overflow_drops);
        assert_eq!(r.flows[0].aqm_drop_segments, b.aqm_drops);
    }
}

#[test]
fn cake_holds_the_bloated_queue_near_its_5ms_target_and_pie_near_its_15ms_target_at_a_busy_link() {
    // tc's defaults: CAKE's target is rtt / 20 = 5 ms (rtt 100 ms); PIE's target 15 ms,
    // tupdate 15 ms, limit 1000, alpha 2, beta 20 (sch_pie.c pie_params_init).
    let cake = AqmConfig::Cake(CakeConfig { rtt_ns: 100_000_000, target_ns: 5_000_000, flow_mode: FlowMode::TripleIsolate, memory_limit_bytes: None, ecn: true });
    let pie = AqmConfig::Pie(PieConfig {
        target_ns: 15_000_000,
        tupdate_ns: 15_000_000,
        limit_packets: 1000,
        alpha: 2,
        beta: 20,
        ecn: false,
        bytemode: false,
        dq_rate_estimator: false,
    });
    for (name, aqm, low_ms, high_ms) in [("cake", cake, 0.0, 15.0), ("pie", pie, 7.5, 22.5)] {
        let r = bufferbloat(aqm);
        let b = &r.bottleneck;
        let p50 = b.sojourn_p50_ms.unwrap();
        eprintln!("{name}: sojourn p50 {p50:.2} ms, utilisation {:.3}, aqm drops {}", b.utilization, b.aqm_drops);
        assert_eq!(b.aqm, name);
        assert!((low_ms..=high_ms).contains(&p50), "{name}: sojourn p50 {p50} ms");
        assert!(b.utilization >= 0.85, "{name}: utilisation {}", b.utilization);
        assert!(b.aqm_drops > 0 && b.overflow_drops == 0, "{name}: aqm {} overflow {}", b.aqm_drops, b.overflow_drops);
    }
}

#[test]
fn fq_codel_isolates_bbr_from_cubic_where_a_fifo_lets_one_take_the_link() {
    // 50 Mbit/s, 40 ms, 5-BDP buffer, one BBR and one CUBIC flow for 30 s.
    let base = config(50, 40, 5 * bdp_bytes(50, 40), 0.0, 30, vec![flow(0, "bbr"), flow(1, "cubic")]);
    let shares = |r: &SimResult| r.flows.iter().map(|f| f.goodput_mbps).collect::<Vec<_>>();
    let fifo = run(base.clone());
    let fq = run(with_aqm(base, fq_codel()));
    let (j_fifo, j_fq) = (jain(&shares(&fifo)), jain(&shares(&fq)));
    eprintln!("fifo goodputs {:?} Jain {j_fifo:.3}; fq_codel goodputs {:?} Jain {j_fq:.3}", shares(&fifo), shares(&fq));
    assert!(j_fq >= 0.95, "fq_codel Jain {j_fq}");
    assert!(j_fifo < 0.9, "fifo Jain {j_fifo}");
    assert!(fq.bottleneck.utilization > 0.9);
}

#[test]
fn an_ecn_cubic_flow_behind_codel_is_marked_not_dropped_and_barely_retransmits() {
    let mut ecn_flow = flow(0, "cubic");
    ecn_flow.ecn = true;
    let marked = run_checked(with_aqm(config(100, 20, 10 * bdp_bytes(100, 20), 0.0, 20, vec![ecn_flow]), codel(true)));
    let dropped = run_checked(with_aqm(config(100, 20, 10 * bdp_bytes(100, 20), 0.0, 20, vec![flow(0, "cubic")]), codel(true)));
    let (m, d) = (&marked.flows[0], &dropped.flows[0]);
    eprintln!(
        "ecn: ce marks {} received {} retrans {} drops {} goodput {:.1}; no ecn: aqm drops {} retrans {} goodput {:.1}; sojourn p50 {:.2} / {:.2} ms",
        marked.bottleneck.ce_marks,
        m.ce_marks_received,
        m.retrans_segments,
        marked.bottleneck.drops,
        m.goodput_mbps,
        d.aqm_drop_segments,
        d.retrans_segments,
        d.goodput_mbps,
        marked.bottleneck.sojourn_p50_ms.unwrap(),
        dropped.bottleneck.sojourn_p50_ms.unwrap(),
    );
    assert!(m.ecn && !d.ecn);
    // The ECN flow's congestion signal is CE marks, all of which reach the receiver:
    // a few per CUBIC epoch (K = cbrt(W_max x 0.3 / 0.4) ~ 5 s at this BDP).
    assert!(marked.bottleneck.ce_marks >= 4, "ce marks {}", marked.bottleneck.ce_marks);
    assert_eq!(m.ce_marks_received, marked.bottleneck.ce_marks);
    assert_eq!(marked.bottleneck.drops, 0);
    assert!(m.retrans_segments <= 2, "ecn retransmissions {}", m.retrans_segments);
    // The same flow without ECN gets drops (and retransmits each) instead.
    assert!(d.aqm_drop_segments >= 4, "aqm drops {}", d.aqm_drop_segments);
    assert_eq!(d.ce_marks_received, 0);
    assert_eq!(d.retrans_segments, d.queue_drop_segments);
    // Both are held near CoDel's target, at full rate.
    assert!(marked.bottleneck.sojourn_p50_ms.unwrap() <= 15.0);
    assert!(m.goodput_mbps > 85.0, "ecn goodput {}", m.goodput_mbps);
}

#[test]
fn with_an_aqm_the_same_seed_gives_the_same_run_the_queue_stays_within_the_buffer_and_segments_are_conserved() {
    let mut flows = vec![flow(0, "cubic"), flow(1, "bbr"), flow(2, "reno")];
    flows[0].ecn = true;
    flows[2].ecn = true;
    let buffer = bdp_bytes(50, 30);
    for aqm in [codel(true), fq_codel()] {
        let mut cfg = with_aqm(config(50, 30, buffer, 0.001, 8, flows.clone()), aqm);
        cfg.seed = 7;
        let a = run_checked(cfg.clone());
        let b = run_checked(cfg);
        let name = a.bottleneck.aqm;
        assert_eq!(serde_json::to_string(&a.flows).unwrap(), serde_json::to_string(&b.flows).unwrap(), "{name}");
        assert_eq!(a.queue_series.queue_bytes, b.queue_series.queue_bytes, "{name}");
        assert!(a.bottleneck.queue_max_bytes <= buffer, "{name}: queue {} > buffer {buffer}", a.bottleneck.queue_max_bytes);
        for f in &a.flows {
            assert_eq!(f.data_segments_sent, f.segments_received + f.lost_segments + f.segments_in_network, "{name} flow {}", f.flow_id);
            assert!(f.aqm_drop_segments <= f.queue_drop_segments);
        }
        let ce: u64 = a.flows.iter().map(|f| f.ce_marks_received).sum();
        assert!(ce <= a.bottleneck.ce_marks, "{name}: {ce} CE received, {} marked", a.bottleneck.ce_marks);
        assert_eq!(a.queue_series.ce_marks.iter().sum::<u64>(), a.bottleneck.ce_marks, "{name}");
    }
}
