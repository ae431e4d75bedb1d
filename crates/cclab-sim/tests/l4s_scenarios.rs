//! Scalable congestion control and the queues built for it, end to end: DCTCP
//! behind a CE threshold (RFC 8257 section 3.1), DualPI2 (RFC 9332) and TCP Prague
//! through it and through a single classic ECN queue (RFC 9330, RFC 3168).

mod common;
use cclab_sim::aqm::codel::CodelConfig;
use cclab_sim::aqm::dualpi2::DualPi2Config;
use cclab_sim::aqm::AqmConfig;
use cclab_sim::config::SimConfig;
use cclab_sim::SimResult;
use common::*;

/// tc's `dualpi2` defaults (sch_dualpi2.c `dualpi2_reset_default`).
fn dualpi2() -> AqmConfig {
    AqmConfig::DualPi2(DualPi2Config::default())
}

/// CoDel with ECN and a CE threshold: the step marking DCTCP expects from a switch.
fn codel_ce_threshold(threshold_ns: u64) -> AqmConfig {
    AqmConfig::Codel(CodelConfig { ecn: true, ce_threshold_ns: Some(threshold_ns), ..Default::default() })
}

fn scenario(rate_mbps: u64, rtt_ms: u64, aqm: AqmConfig, flows: Vec<&str>, duration_s: u64, warmup_s: u64) -> SimConfig {
    let flows = flows.iter().enumerate().map(|(i, cc)| flow(i as u32, cc)).collect();
    let mut cfg = config(rate_mbps, rtt_ms, 4 * bdp_bytes(rate_mbps, rtt_ms), 0.0, duration_s, flows);
    cfg.bottleneck.aqm = aqm;
    cfg.warmup_ns = warmup_s * S;
    cfg
}

/// With the kernel engine's timing noise, the simulator's default (ACK lateness and the
/// bottleneck's stalls, python/cclab/spec/scenario.py). Prague needs it: it paces at exactly
/// cwnd / srtt once past slow start, so with perfect timing a lone flow is never
/// cwnd-limited and its window never grows.
fn noisy(mut cfg: SimConfig) -> SimConfig {
    cfg.jitter_ns = 30_700;
    cfg.stall_per_packet = 1.44e-4;
    cfg
}

/// The mean of a flow's sampled `ecn_alpha` after `from_s`.
fn mean_alpha(r: &SimResult, flow_id: u32, from_s: f64) -> f64 {
    let fs = &r.flow_series;
    let v: Vec<f64> = (0..fs.time_s.len())
        .filter(|&i| fs.flow_id[i] == flow_id && fs.time_s[i] > from_s)
        .map(|i| fs.ecn_alpha[i].expect("DCTCP reports alpha"))
        .collect();
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn dctcp_behind_a_one_ms_ce_threshold_fills_the_link_with_a_short_queue_and_alpha_tracks_the_marks() {
    // RFC 8257 section 3: a DCTCP sender keeps the queue around the marking threshold
    // and the link busy; alpha estimates the fraction of its packets that were marked.
    let r = run_checked(scenario(50, 10, codel_ce_threshold(MS), vec!["dctcp"], 15, 3));
    let (b, f) = (&r.bottleneck, &r.flows[0]);
    let marked_fraction = f.ce_marks_received as f64 / (f.bytes_delivered as f64 / 1448.0);
    let alpha = mean_alpha(&r, 0, 3.0);
    eprintln!(
        "dctcp 50M 10ms ce_threshold 1ms: utilization {:.3}, sojourn mean {:.2} p99 {:.2} ms, marked {marked_fraction:.3}, mean alpha {alpha:.3}, drops {}, retrans {}",
        b.utilization,
        b.sojourn_mean_ms.unwrap(),
        b.sojourn_p99_ms.unwrap(),
        b.drops,
        f.retrans_segments
    );
    assert!(f.ecn, "DCTCP negotiates ECN without being asked");
    assert!(b.utilization >= 0.95, "utilization {}", b.utilization);
    assert!(b.sojourn_mean_ms.unwrap() < 2.0, "sojourn mean {:?}", b.sojourn_mean_ms);
    assert_eq!(b.drops, 0, "marks, not drops");
    // Alpha is an EWMA of each window's marked fraction: its mean is the run's fraction.
    assert!(marked_fraction > 0.01);
    assert!((alpha - marked_fraction).abs() < 0.25 * marked_fraction + 0.01, "alpha {alpha} marked {marked_fraction}");
}

#[test]
fn dctcp_cuts_by_half_the_marked_fraction_where_cubic_halves_so_it_keeps_more_of_the_link() {
    // The same CE threshold with RFC 3168's response (CUBIC with ECN): one cut per
    // window regardless of how many were marked, so the link drains more often.
    let dctcp = run_checked(scenario(50, 10, codel_ce_threshold(MS), vec!["dctcp"], 15, 3));
    let mut cfg = scenario(50, 10, codel_ce_threshold(MS), vec!["cubic"], 15, 3);
    cfg.flows[0].ecn = true;
    let cubic = run_checked(cfg);
    eprintln!("utilization dctcp {:.3} cubic+ecn {:.3}", dctcp.bottleneck.utilization, cubic.bottleneck.utilization);
    assert!(dctcp.bottleneck.utilization > cubic.bottleneck.utilization);
}

#[test]
fn a_dctcp_flow_is_the_same_bit_for_bit_on_the_same_seed() {
    let a = run(scenario(50, 10, codel_ce_threshold(MS), vec!["dctcp", "dctcp"], 5, 0));
    let b = run(scenario(50, 10, codel_ce_threshold(MS), vec!["dctcp", "dctcp"], 5, 0));
    let json = |r: &SimResult| {
        let mut v = serde_json::to_value(r).unwrap();
        v["stats"]["sim_wall_s"] = serde_json::Value::Null;
        v
    };
    assert_eq!(json(&a), json(&b));
}

#[test]
fn a_cubic_flow_through_dualpi2_waits_near_the_classic_target_in_the_classic_queue() {
    // RFC 9332: Not-ECT traffic goes to the classic queue, whose PI2 holds it near 15 ms.
    let r = run_checked(scenario(50, 20, dualpi2(), vec!["cubic"], 30, 10));
    let b = &r.bottleneck;
    let d = &b.dual_queue;
    eprintln!(
        "cubic through dualpi2: classic sojourn mean {:.1} p50 {:.1} ms, utilization {:.3}, aqm drops {}",
        d.classic_sojourn_mean_ms.unwrap(),
        d.classic_sojourn_p50_ms.unwrap(),
        b.utilization,
        b.aqm_drops
    );
    assert_eq!(b.aqm, "dualpi2");
    assert_eq!(d.l4s_packets, Some(0));
    assert!(d.classic_packets.unwrap() > 0);
    assert!(d.l4s_sojourn_mean_ms.is_none());
    let mean = d.classic_sojourn_mean_ms.unwrap();
    assert!((8.0..22.0).contains(&mean), "classic sojourn mean {mean} ms");
    assert!(b.aqm_drops > 0 && b.overflow_drops == 0);
    assert!(r.queue_series.l4s_queue_bytes.iter().all(|q| *q == Some(0)));
}

#[test]
fn a_single_queue_reports_no_per_queue_metrics() {
    let r = run(scenario(20, 20, AqmConfig::Fifo, vec!["cubic"], 2, 0));
    assert!(r.bottleneck.dual_queue.l4s_packets.is_none());
    assert!(r.queue_series.l4s_queue_bytes.iter().all(Option::is_none));
    assert!(r.flow_series.ecn_alpha.iter().all(Option::is_none));
}

#[test]
fn a_prague_flow_through_dualpi2_fills_the_link_with_a_sub_millisecond_l4s_queue() {
    // RFC 9330 section 3 / RFC 9332: an L4S flow keeps its queue around the 1 ms step
    // at full utilization.
    let r = run_checked(noisy(scenario(50, 20, dualpi2(), vec!["prague"], 15, 5)));
    let (b, f) = (&r.bottleneck, &r.flows[0]);
    let d = &b.dual_queue;
    eprintln!(
        "prague through dualpi2: utilization {:.3}, L4S sojourn mean {:.2} p99 {:.2} ms, L4S marks {:?}, alpha {:.3}, goodput {:.2}",
        b.utilization,
        d.l4s_sojourn_mean_ms.unwrap(),
        d.l4s_sojourn_p99_ms.unwrap(),
        d.l4s_ce_marks,
        mean_alpha(&r, 0, 5.0),
        f.goodput_mbps
    );
    assert!(f.ecn);
    assert_eq!(d.classic_packets, Some(0), "ECT(1): every packet in the L4S queue");
    assert!(b.utilization >= 0.9, "utilization {}", b.utilization);
    assert!(d.l4s_sojourn_p99_ms.unwrap() <= 2.0, "L4S p99 {:?}", d.l4s_sojourn_p99_ms);
    assert_eq!(b.drops, 0);
}

#[test]
fn prague_and_cubic_share_dualpi2_but_prague_starves_cubic_in_one_classic_ecn_queue() {
    // RFC 9330 section 4.2 and RFC 9332 section 2.1: the coupling gives a scalable and a
    // classic flow roughly equal rates (neither under a quarter); a single RFC 3168 queue
    // marks both alike, and the scalable flow, cutting by only alpha / 2, takes most of it.
    let shares = |aqm: AqmConfig| {
        let mut cfg = noisy(scenario(50, 20, aqm, vec!["prague", "cubic"], 30, 10));
        cfg.flows[1].ecn = true;
        let r = run_checked(cfg);
        let (p, c) = (r.flows[0].goodput_mbps, r.flows[1].goodput_mbps);
        (p / (p + c), r)
    };
    let (coupled, r) = shares(dualpi2());
    let (single, _) = shares(AqmConfig::Codel(CodelConfig { ecn: true, ..Default::default() }));
    let d = &r.bottleneck.dual_queue;
    eprintln!(
        "prague share: dualpi2 {coupled:.3} (L4S p99 {:.2} ms, classic mean {:.1} ms), codel with ecn {single:.3}",
        d.l4s_sojourn_p99_ms.unwrap(),
        d.classic_sojourn_mean_ms.unwrap()
    );
    assert!((0.25..=0.75).contains(&coupled), "coupled share {coupled}");
    assert!(single > 0.75, "single-queue share {single}");
}

#[test]
fn a_prague_flow_is_the_same_bit_for_bit_on_the_same_seed() {
    let run_json = || {
        let mut v = serde_json::to_value(run(noisy(scenario(50, 20, dualpi2(), vec!["prague", "cubic"], 5, 0)))).unwrap();
        v["stats"]["sim_wall_s"] = serde_json::Value::Null;
        v
    };
    assert_eq!(run_json(), run_json());
}

#[test]
fn cubic_with_accurate_ecn_reduces_on_the_ce_count_as_on_the_rfc3168_echo_and_stays_ect0() {
    // RFC 9768: the feedback changes, not the response (CUBIC still cuts once per window on
    // an ECN signal). ECT(0) stays CUBIC's codepoint, so DualPI2 still queues it as classic.
    let run_with = |accecn: bool| {
        let mut cfg = noisy(scenario(50, 20, dualpi2(), vec!["cubic"], 20, 5));
        cfg.flows[0].ecn = !accecn;
        cfg.flows[0].accecn = accecn;
        run_checked(cfg)
    };
    let (classic, accurate) = (run_with(false), run_with(true));
    let (g_classic, g_accurate) = (classic.flows[0].goodput_mbps, accurate.flows[0].goodput_mbps);
    eprintln!("cubic through dualpi2 with ECN: rfc3168 {g_classic:.2}, accecn {g_accurate:.2} Mbit/s; CE {} / {}", classic.flows[0].ce_marks_received, accurate.flows[0].ce_marks_received);
    assert!(accurate.flows[0].ecn && accurate.flows[0].ce_marks_received > 0);
    assert_eq!(accurate.bottleneck.dual_queue.l4s_packets, Some(0), "ECT(0): the classic queue");
    assert!((g_accurate - g_classic).abs() <= 0.05 * g_classic, "{g_classic} {g_accurate}");
}
