//! The measurement window: metrics over [warmup, end], the whole run beside them.

mod common;
use common::*;
use serde_json::Value;

fn as_json(result: &cclab_sim::SimResult) -> Value {
    serde_json::to_value(result).unwrap()
}

/// Two CUBIC flows, the second starting late, so the first seconds differ from the rest.
fn two_cubics(warmup_ns: u64) -> cclab_sim::SimConfig {
    let mut late = flow(1, "cubic");
    late.start_ns = 2 * S;
    let mut cfg = config(20, 20, bdp_bytes(20, 20), 0.0, 8, vec![flow(0, "cubic"), late]);
    cfg.warmup_ns = warmup_ns;
    cfg
}

#[test]
fn a_warmup_leaves_the_whole_run_numbers_as_they_were_without_one() {
    let plain = as_json(&run(two_cubics(0)));
    let warm = as_json(&run(two_cubics(3 * S)));
    for (table, plain_rows, warm_rows) in [
        ("flows", plain["flows"].as_array().unwrap().clone(), warm["flows"].as_array().unwrap().clone()),
        ("bottleneck", vec![plain["bottleneck"].clone()], vec![warm["bottleneck"].clone()]),
    ] {
        for (p, w) in plain_rows.iter().zip(&warm_rows) {
            for (name, value) in p.as_object().unwrap() {
                if let Some(metric) = name.strip_prefix("whole_run_") {
                    // Without a warm-up the window is the whole run, bit for bit.
                    assert_eq!(&p[metric], value, "{table}.{metric}");
                    assert_eq!(&w[name.as_str()], value, "{table}.{name} moved with the warm-up");
                }
            }
        }
    }
}

#[test]
fn windowed_counters_are_the_whole_run_minus_the_warmup() {
    let r = run(two_cubics(3 * S));
    let json = as_json(&r);
    for (f, row) in r.flows.iter().zip(json["flows"].as_array().unwrap()) {
        let whole = row["whole_run_bytes_delivered"].as_u64().unwrap();
        assert!(f.bytes_delivered > 0 && f.bytes_delivered < whole);
        // Goodput over the 5 s after the warm-up.
        let expected = f.bytes_delivered as f64 * 8.0 / 5.0 / 1e6;
        assert!((f.goodput_mbps - expected).abs() < 1e-9, "{} vs {expected}", f.goodput_mbps);
        assert!(f.rtt_min_ms.unwrap() >= row["whole_run_rtt_min_ms"].as_f64().unwrap());
    }
    // Both flows share the link after the warm-up: its utilization stays high, and the
    // window's queue samples are those after 3 s.
    assert!(r.bottleneck.utilization > 0.9, "{}", r.bottleneck.utilization);
    assert!(r.bottleneck.queue_max_bytes <= json["bottleneck"]["whole_run_queue_max_bytes"].as_u64().unwrap());
}

#[test]
fn a_warmup_at_or_past_the_duration_is_refused() {
    let mut cfg = two_cubics(0);
    cfg.warmup_ns = cfg.duration_ns;
    let error = cclab_sim::run(cfg).err().expect("refused");
    assert!(error.contains("warmup_ns"), "{error}");
}

#[test]
fn a_run_whose_flows_all_finish_before_the_warmup_ends_has_an_empty_window() {
    let mut finite = flow(0, "cubic");
    finite.size_bytes = Some(1_000_000);
    let mut cfg = config(20, 20, bdp_bytes(20, 20), 0.0, 10, vec![finite]);
    cfg.warmup_ns = 8 * S;
    let r = run(cfg);
    let json = as_json(&r);
    assert!(r.flows[0].completed);
    assert_eq!(r.flows[0].bytes_delivered, 0);
    assert_eq!(r.flows[0].goodput_mbps, 0.0);
    assert_eq!(json["flows"][0]["whole_run_bytes_delivered"].as_u64(), Some(1_000_000));
    assert_eq!(r.bottleneck.utilization, 0.0);
}

#[test]
fn the_windows_utilization_is_of_what_the_link_offered_after_a_rate_change() {
    use cclab_sim::config::LinkChangeConfig;
    // 40 Mbit/s that drop to 10 Mbit/s at 4 s, the warm-up's end: two CUBIC flows keep the
    // slower link busy, so the window's utilization is of 10 Mbit/s, not of 40.
    let mut cfg = config(40, 20, 4 * bdp_bytes(40, 20), 0.0, 10, vec![flow(0, "cubic"), flow(1, "cubic")]);
    cfg.bottleneck.schedule = vec![LinkChangeConfig { at_ns: 4 * S, rate_bps: Some(10_000_000), rtt_ns: None, loss_probability: None }];
    cfg.warmup_ns = 4 * S;
    let r = run(cfg);
    assert!(r.bottleneck.utilization > 0.9, "{}", r.bottleneck.utilization);
    let goodput: f64 = r.flows.iter().map(|f| f.goodput_mbps).sum();
    assert!(goodput < 10.0 && goodput > 9.0, "{goodput}");
}
