//! Links that change: a scheduled rate, RTT or loss, and a Mahimahi delivery trace.

mod common;
use cclab_sim::config::{LinkChangeConfig, SimConfig};
use cclab_sim::trace::DeliveryTrace;
use cclab_sim::SimResult;
use common::*;

fn change(at_s: u64) -> LinkChangeConfig {
    LinkChangeConfig { at_ns: at_s * S, rate_bps: None, rtt_ns: None, loss_probability: None }
}

/// Mean per-interval throughput of `flow` over [from_s, to_s).
fn throughput_mbps(r: &SimResult, flow: u32, from_s: f64, to_s: f64) -> f64 {
    let fs = &r.flow_series;
    let values: Vec<f64> = (0..fs.time_s.len())
        .filter(|&i| fs.flow_id[i] == flow && fs.time_s[i] > from_s && fs.time_s[i] <= to_s)
        .map(|i| fs.throughput_mbps[i])
        .collect();
    values.iter().sum::<f64>() / values.len() as f64
}

/// 100 Mbit/s, 20 ms, 1 BDP; the rate drops 5x to 20 Mbit/s from 10 s to 20 s.
fn rate_dip(cc: &str) -> SimConfig {
    let mut cfg = config(100, 20, bdp_bytes(100, 20), 0.0, 30, vec![flow(0, cc)]);
    cfg.bottleneck.schedule = vec![
        LinkChangeConfig { rate_bps: Some(20_000_000), ..change(10) },
        LinkChangeConfig { rate_bps: Some(100_000_000), ..change(20) },
    ];
    cfg
}

#[test]
fn a_flow_follows_the_rate_down_and_back_up_for_every_cc() {
    for cc in ["cubic", "bbr", "bbr3"] {
        let r = run_checked(rate_dip(cc));
        let before = throughput_mbps(&r, 0, 5.0, 10.0);
        let dip = throughput_mbps(&r, 0, 12.0, 20.0);
        let after = throughput_mbps(&r, 0, 25.0, 30.0);
        eprintln!("{cc}: {before:.1} -> {dip:.1} -> {after:.1} Mbit/s");
        // Never above what the link carries at each rate (payload share of a frame)...
        assert!(dip <= 20.0 * GOODPUT_CEILING * 1.02, "{cc}: {dip} Mbit/s at 20 Mbit/s");
        // ...and each uses it: the dip's rate, then the full rate again.
        assert!(before > 85.0 && dip > 15.0 && after > 80.0, "{cc}: {before} {dip} {after}");
        // The link's utilization counts what each rate offered.
        assert!(r.bottleneck.utilization > 0.85 && r.bottleneck.utilization <= 1.0, "{cc}: {}", r.bottleneck.utilization);
    }
}

#[test]
fn a_longer_rtt_from_its_scheduled_time_shows_in_the_flows_rtt() {
    let mut cfg = config(50, 20, bdp_bytes(50, 20), 0.0, 10, vec![flow(0, "bbr")]);
    cfg.bottleneck.schedule = vec![LinkChangeConfig { rtt_ns: Some(80 * MS), ..change(5) }];
    let r = run_checked(cfg);
    let fs = &r.flow_series;
    let srtt = |from_s: f64, to_s: f64| {
        let v: Vec<f64> = (0..fs.time_s.len()).filter(|&i| fs.time_s[i] > from_s && fs.time_s[i] <= to_s).map(|i| fs.srtt_ms[i]).collect();
        v.iter().cloned().fold(f64::INFINITY, f64::min)
    };
    assert!((20.0..40.0).contains(&srtt(2.0, 5.0)), "before: {}", srtt(2.0, 5.0));
    assert!(srtt(6.0, 10.0) >= 80.0, "after: {}", srtt(6.0, 10.0));
    assert_eq!(r.flows[0].rtt_min_ms.map(|v| v >= 19.9), Some(true));
}

#[test]
fn random_loss_starts_at_its_scheduled_time() {
    let base = config(50, 20, bdp_bytes(50, 20), 0.0, 10, vec![flow(0, "cubic")]);
    let mut lossy = base.clone();
    lossy.bottleneck.schedule = vec![LinkChangeConfig { loss_probability: Some(0.01), ..change(5) }];
    assert_eq!(run_checked(base).flows[0].random_loss_segments, 0);
    let r = run_checked(lossy);
    assert!(r.flows[0].random_loss_segments > 20, "{}", r.flows[0].random_loss_segments);
    // CUBIC backs off under 1% loss: the second half carries less than the first.
    assert!(throughput_mbps(&r, 0, 6.0, 10.0) < 0.8 * throughput_mbps(&r, 0, 2.0, 5.0));
}

#[test]
fn a_constant_trace_of_one_packet_per_millisecond_carries_12_mbit_s() {
    let times_ms: Vec<u64> = (1..=1000).collect();
    let rate_bps = DeliveryTrace::mean_rate_bps(&times_ms);
    assert_eq!(rate_bps, 12_000_000);
    let mut cfg = config(12, 40, 2 * bdp_bytes(12, 40), 0.0, 20, vec![flow(0, "cubic")]);
    cfg.bottleneck.trace_ms = Some(times_ms);
    let r = run_checked(cfg);
    let goodput = r.flows[0].goodput_mbps;
    // One 1500-byte IP packet (1448 B of payload) per opportunity.
    let ceiling = 12.0 * 1448.0 / 1500.0;
    eprintln!("goodput {goodput:.2} Mbit/s of {ceiling:.2}");
    assert!(goodput <= ceiling && goodput > 0.9 * ceiling, "{goodput}");
    assert!(r.bottleneck.utilization > 0.9 && r.bottleneck.utilization <= 1.0);
}

#[test]
fn a_trace_with_an_outage_stops_delivery_for_its_length() {
    // 10 opportunities per ms (120 Mbit/s) for 2 s, then nothing until 3 s: a 1 s outage.
    let mut times_ms: Vec<u64> = (1..=2000).flat_map(|ms| std::iter::repeat_n(ms, 10)).collect();
    times_ms.push(3000);
    let mut cfg = config(80, 20, bdp_bytes(80, 20), 0.0, 6, vec![flow(0, "bbr")]);
    cfg.bottleneck.rate_bps = DeliveryTrace::mean_rate_bps(&times_ms);
    cfg.bottleneck.trace_ms = Some(times_ms);
    let r = run_checked(cfg);
    // The outage (2.0-3.0 s, then 5.0-6.0 s as the trace repeats) delivers nothing.
    assert!(throughput_mbps(&r, 0, 2.1, 3.0) < 1.0, "{}", throughput_mbps(&r, 0, 2.1, 3.0));
    assert!(throughput_mbps(&r, 0, 3.5, 5.0) > 60.0, "{}", throughput_mbps(&r, 0, 3.5, 5.0));
}

#[test]
fn a_window_limited_flow_speeds_up_without_a_loss_when_its_path_shrinks() {
    // A window-limited flow (no queue, no loss) whose path shrinks from 80 to 20 ms: the same
    // window now turns four times as often, and nothing sent across the change is lost or
    // retransmitted.
    let mut f = flow(0, "cubic");
    f.rwnd_bytes = Some(bdp_bytes(50, 80) / 2);
    let mut cfg = config(50, 80, bdp_bytes(50, 80), 0.0, 6, vec![f]);
    cfg.bottleneck.schedule = vec![LinkChangeConfig { rtt_ns: Some(20 * MS), ..change(3) }];
    let r = run_checked(cfg);
    assert_eq!(r.flows[0].lost_segments, 0);
    assert_eq!(r.flows[0].retrans_segments, 0, "spurious retransmissions after the RTT shrank");
    assert!(throughput_mbps(&r, 0, 4.0, 6.0) > 1.5 * throughput_mbps(&r, 0, 1.0, 3.0), "a window-limited flow speeds up on a shorter path");
}
