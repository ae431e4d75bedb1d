//! Helpers shared by the simulator's integration tests.
#![allow(dead_code)]

use cclab_sim::config::{BottleneckConfig, FlowConfig, SimConfig};
use cclab_sim::{SimResult, Simulation};

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;
pub const FRAME_BYTES: u64 = cclab_sim::FULL_FRAME_BYTES as u64;
pub const GOODPUT_CEILING: f64 = 1448.0 / 1514.0;

pub fn bdp_bytes(rate_mbps: u64, rtt_ms: u64) -> u64 {
    rate_mbps * 1_000_000 / 8 * rtt_ms / 1000
}

pub fn flow(id: u32, cc: &str) -> FlowConfig {
    FlowConfig { flow_id: id, cc: cc.into(), probe_bw_gain: None, start_ns: 0, size_bytes: None, extra_rtt_ns: 0, rwnd_bytes: None }
}

pub fn config(rate_mbps: u64, rtt_ms: u64, buffer_bytes: u64, loss: f64, duration_s: u64, flows: Vec<FlowConfig>) -> SimConfig {
    SimConfig {
        seed: 1,
        duration_ns: duration_s * S,
        bottleneck: BottleneckConfig {
            rate_bps: rate_mbps * 1_000_000,
            rtt_ns: rtt_ms * MS,
            queue_limit_bytes: Some(buffer_bytes),
            queue_limit_packets: None,
            loss_probability: loss,
        },
        flows,
        flow_sample_interval_ns: 100 * MS,
        queue_sample_interval_ns: MS,
    }
}

/// Runs with the scoreboard and queue-limit invariants checked after every event.
pub fn run_checked(config: SimConfig) -> SimResult {
    let mut sim = Simulation::new(config).expect("valid config");
    sim.check_invariants = true;
    sim.run().expect("invariants hold");
    SimResult::from_simulation(sim, 0.0)
}

pub fn run(config: SimConfig) -> SimResult {
    cclab_sim::run(config).expect("valid config")
}
