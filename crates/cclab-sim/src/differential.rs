//! `cclab cc compare`: a simulated run drives two congestion controls through the same
//! hook calls (cclab_cc::differential). The run's first flow runs the reference CC, as any
//! run would; every state-changing call it makes is also made on a fresh reference and a
//! fresh candidate, both built with that flow's CC seed, from the same socket state.

use cclab_cc::differential::{Comparator, Comparison};
use serde::Serialize;

use crate::config::{FlowConfig, SimConfig};
use crate::sim::Simulation;

#[derive(Serialize)]
struct FieldJson {
    field: &'static str,
    first_call: usize,
    first_hook: &'static str,
    first_time_ns: u64,
    reference: String,
    candidate: String,
    calls: usize,
}

#[derive(Serialize)]
struct HookJson {
    hook: &'static str,
    calls: usize,
    differing_calls: usize,
}

#[derive(Serialize)]
struct ComparisonJson {
    flow_id: u32,
    reference: String,
    candidate: String,
    duration_ns: u64,
    calls: usize,
    differing_calls: usize,
    hooks: Vec<HookJson>,
    fields: Vec<FieldJson>,
}

/// Runs `config` with its first flow's CC as the driver and `candidate`'s CC beside a fresh
/// copy of it; `observe` as in [`crate::run_observed`].
pub fn compare(config: SimConfig, candidate: &FlowConfig, observe: impl FnMut(cclab_cc::SimTime, u64) -> bool) -> Result<(u32, Comparison), String> {
    let first = config.flows.first().ok_or("flows: a comparison needs a flow to drive it")?.clone();
    let reference_cc = first.cc_config()?;
    let candidate_cc = candidate.cc_config()?;
    let mut sim = Simulation::new(config)?;
    let sender = &mut sim.flows[0].sender;
    let seed = sender.cc_seed();
    sender.compare_cc_with(Comparator::new(reference_cc.build(seed), candidate_cc.build(seed)));
    sim.run_observed(observe)?;
    let comparison = match sim.flows[0].sender.cc() {
        cclab_cc::AnyCc::Recorded(recorder) => recorder.comparison(),
        _ => unreachable!("wrapped above"),
    };
    Ok((first.flow_id, comparison))
}

/// JSON in (the resolved config, the candidate's flow), JSON out.
pub fn compare_json(config_json: &str, candidate_json: &str, observe: impl FnMut(cclab_cc::SimTime, u64) -> bool) -> Result<String, String> {
    let config: SimConfig = serde_json::from_str(config_json).map_err(|e| format!("invalid simulator config: {e}"))?;
    let candidate: FlowConfig = serde_json::from_str(candidate_json).map_err(|e| format!("invalid candidate flow: {e}"))?;
    let reference = config.flows.first().map(|f| f.cc.clone()).unwrap_or_default();
    let duration_ns = config.duration_ns;
    let (flow_id, comparison) = compare(config, &candidate, observe)?;
    let json = ComparisonJson {
        flow_id,
        reference,
        candidate: candidate.cc.clone(),
        duration_ns,
        calls: comparison.calls,
        differing_calls: comparison.differing_calls,
        hooks: comparison.hooks.iter().map(|h| HookJson { hook: h.hook, calls: h.calls, differing_calls: h.differing_calls }).collect(),
        fields: comparison
            .fields
            .into_iter()
            .map(|f| FieldJson { field: f.field, first_call: f.first_call, first_hook: f.first_hook, first_time_ns: f.first_time_ns, reference: f.reference, candidate: f.candidate, calls: f.calls })
            .collect(),
    };
    serde_json::to_string(&json).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dumbbell(cc: &str) -> SimConfig {
        // 50 Mbit/s, 20 ms, 1 BDP, 3 s, with a little random loss so recovery runs too.
        SimConfig::dumbbell(50_000_000, 20_000_000, 125_000, 0.002, 3_000_000_000, vec![FlowConfig::bulk(0, cc)])
    }

    #[test]
    fn the_same_cc_beside_itself_never_differs_over_a_whole_run_with_losses() {
        for cc in ["cubic", "bbr", "bbr3", "dctcp"] {
            let (_, comparison) = compare(dumbbell(cc), &FlowConfig::bulk(0, cc), |_, _| true).unwrap();
            assert!(comparison.calls > 1000, "{cc}: {}", comparison.calls);
            assert_eq!(comparison.differing_calls, 0, "{cc}: {:?}", comparison.fields);
            for hook in ["init", "ssthresh", "set_state"] {
                if cc.starts_with("bbr") && hook == "ssthresh" {
                    continue; // BBR's loss response is in cong_control
                }
                assert!(comparison.hooks.iter().any(|h| h.hook == hook), "{cc}: no {hook}");
            }
        }
    }

    #[test]
    fn a_comparison_leaves_the_driving_flow_as_it_was() {
        let plain = crate::run(dumbbell("cubic")).unwrap();
        let mut sim = Simulation::new(dumbbell("cubic")).unwrap();
        let seed = sim.flows[0].sender.cc_seed();
        let cubic = FlowConfig::bulk(0, "reno").cc_config().unwrap();
        sim.flows[0].sender.compare_cc_with(Comparator::new(cubic.build(seed), cubic.build(seed)));
        sim.run_observed(|_, _| true).unwrap();
        let compared = crate::result::SimResult::from_simulation(sim, 0.0);
        assert_eq!(plain.flows[0].bytes_delivered, compared.flows[0].bytes_delivered);
        assert_eq!(plain.flows[0].retrans_segments, compared.flows[0].retrans_segments);
    }

    #[test]
    fn bbr_v1_and_v3_part_at_init_where_their_startup_pacing_gains_differ() {
        let (_, comparison) = compare(dumbbell("bbr"), &FlowConfig::bulk(0, "bbr3"), |_, _| true).unwrap();
        let first = comparison.fields.iter().min_by_key(|f| f.first_call).expect("they differ");
        assert_eq!((first.field, first.first_hook, first.first_call), ("pacing_rate_bytes_per_sec", "init", 0));
        // tcp_bbr.c's bbr_high_gain (2/ln 2 = 2.885, BBR_UNIT * 2885 / 1000 + 1) against v3's
        // bbr_startup_pacing_gain (BBR_UNIT * 277 / 100), on the same first RTT.
        let ratio = first.reference.parse::<f64>().unwrap() / first.candidate.parse::<f64>().unwrap();
        assert!((ratio - 2.885 / 2.77).abs() < 0.002, "{ratio}");
    }
}
