//! Simulator speed: simulated data packets per wall-second, and wall time of
//! the scenarios the issues name. Run: `cargo bench -p cclab-sim --bench throughput`
//! (add a scenario name to run just that one; `-- --no-receive-window` runs every scenario
//! with a receiver that never limits its sender, to price the window model). Figures go to
//! docs/BENCHMARKS.md.

use cclab_sim::config::{FlowConfig, SimConfig};
use std::time::Instant;

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

fn scenario(rate_mbps: u64, rtt_ms: u64, buffer_bytes: u64, loss: f64, duration_s: u64, ccs: &[&str]) -> SimConfig {
    let flows = ccs.iter().enumerate().map(|(i, cc)| FlowConfig::bulk(i as u32, cc)).collect();
    SimConfig::dumbbell(rate_mbps * 1_000_000, rtt_ms * MS, buffer_bytes, loss, duration_s * S, flows)
}

/// The same one-flow scenario behind a queue discipline (`bottleneck.aqm` as Python resolves it).
fn behind(mut cfg: SimConfig, aqm_json: &str) -> SimConfig {
    cfg.bottleneck.aqm = serde_json::from_str(aqm_json).expect("valid aqm config");
    cfg
}

/// tc's `dualpi2` defaults, as Python resolves them.
const DUALPI2: &str = r#"{"kind":"dualpi2","limit_packets":10000,"memory_limit_bytes":30280000,"target_ns":15000000,"tupdate_ns":16000000,"alpha":41,"beta":819,"step_thresh_ns":1000000,"step_thresh_packets":null,"min_qlen_step":0,"coupling_factor":2,"drop_overload":true,"drop_early":false,"c_protection_percent":10,"ecn_mask":1}"#;

fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let receive_window = !std::env::args().any(|a| a == "--no-receive-window");
    let bdp_1g_25ms = 1_000_000_000 / 8 * 25 / 1000;
    let hundred = vec!["cubic"; 50].into_iter().chain(vec!["bbr"; 50]).collect::<Vec<_>>();
    let cases: Vec<(&str, SimConfig)> = vec![
        ("cubic_1g_25ms_1bdp_60s", scenario(1000, 25, bdp_1g_25ms, 0.0, 60, &["cubic"])),
        ("bbr_1g_25ms_1bdp_60s", scenario(1000, 25, bdp_1g_25ms, 0.0, 60, &["bbr"])),
        ("bbr_1g_200ms_100KB_60s", scenario(1000, 200, 100_000, 0.0, 60, &["bbr"])),
        ("cubic_1g_200ms_100KB_60s", scenario(1000, 200, 100_000, 0.0, 60, &["cubic"])),
        ("bbr_100m_100ms_1pct_loss_60s", scenario(100, 100, 10_000_000, 0.01, 60, &["bbr"])),
        // BBRv3 and BBRv2 on BBRv1's scenarios (BBRv3 should stay within 1.5x of v1's packets/s).
        ("bbr3_1g_25ms_1bdp_60s", scenario(1000, 25, bdp_1g_25ms, 0.0, 60, &["bbr3"])),
        ("bbr3_1g_200ms_100KB_60s", scenario(1000, 200, 100_000, 0.0, 60, &["bbr3"])),
        ("bbr3_100m_100ms_1pct_loss_60s", scenario(100, 100, 10_000_000, 0.01, 60, &["bbr3"])),
        ("bbr2_1g_25ms_1bdp_60s", scenario(1000, 25, bdp_1g_25ms, 0.0, 60, &["bbr2"])),
        ("100_flows_1g_20ms_60s", scenario(1000, 20, 2 * 2_500_000, 0.0, 60, &hundred)),
        // The cost of a queue discipline: CUBIC at 1 Gbit/s, 25 ms, 10 BDP behind each (tc defaults).
        ("cubic_1g_25ms_10bdp_fifo_60s", scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["cubic"])),
        ("cubic_1g_25ms_10bdp_codel_60s", behind(scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["cubic"]),
            r#"{"kind":"codel","target_ns":5000000,"interval_ns":100000000,"limit_packets":1000,"ecn":false,"ce_threshold_ns":null}"#)),
        ("cubic_1g_25ms_10bdp_fq_codel_60s", behind(scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["cubic"]),
            r#"{"kind":"fq_codel","target_ns":5000000,"interval_ns":100000000,"limit_packets":10240,"flows":1024,"quantum_bytes":1514,"ecn":true,"ce_threshold_ns":null,"memory_limit_bytes":33554432,"drop_batch":64}"#)),
        ("cubic_1g_25ms_10bdp_pie_60s", behind(scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["cubic"]),
            r#"{"kind":"pie","target_ns":15000000,"tupdate_ns":15000000,"limit_packets":1000,"alpha":2,"beta":20,"ecn":false,"bytemode":false,"dq_rate_estimator":false}"#)),
        ("cubic_1g_25ms_10bdp_cake_60s", behind(scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["cubic"]),
            r#"{"kind":"cake","rtt_ns":100000000,"target_ns":5000000,"flow_mode":"triple-isolate","memory_limit_bytes":null,"ecn":true}"#)),
        // L4S: DualPI2 against fq_codel, and DCTCP and Prague against CUBIC behind it (tc defaults).
        ("cubic_1g_25ms_10bdp_dualpi2_60s", behind(scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["cubic"]), DUALPI2)),
        ("dctcp_1g_25ms_10bdp_dualpi2_60s", behind(scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["dctcp"]), DUALPI2)),
        ("prague_1g_25ms_10bdp_dualpi2_60s", behind(scenario(1000, 25, 10 * bdp_1g_25ms, 0.0, 60, &["prague"]), DUALPI2)),
        ("100_flows_1g_20ms_fq_codel_60s", behind(scenario(1000, 20, 2 * 2_500_000, 0.0, 60, &hundred),
            r#"{"kind":"fq_codel","target_ns":5000000,"interval_ns":100000000,"limit_packets":10240,"flows":1024,"quantum_bytes":1514,"ecn":true,"ce_threshold_ns":null,"memory_limit_bytes":33554432,"drop_batch":64}"#)),
    ];
    println!("| scenario | wall s | data packets | packets/s | events/s | goodput Mbit/s (sum) | retrans | peak RSS MiB |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, mut cfg) in cases {
        cfg.receive_window_autotuning = receive_window;
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let start = Instant::now();
        let r = cclab_sim::run(cfg).expect("valid scenario");
        let wall = start.elapsed().as_secs_f64();
        let goodput: f64 = r.flows.iter().map(|f| f.goodput_mbps).sum();
        let retrans: u64 = r.flows.iter().map(|f| f.retrans_segments).sum();
        println!(
            "| {name} | {wall:.2} | {} | {:.2e} | {:.2e} | {goodput:.1} | {retrans} | {:.0} |",
            r.stats.data_packets,
            r.stats.data_packets as f64 / wall,
            r.stats.events_processed as f64 / wall,
            peak_rss_mib()
        );
    }
}
