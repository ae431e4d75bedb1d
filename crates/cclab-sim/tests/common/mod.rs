//! Helpers shared by the simulator's integration tests.
#![allow(dead_code)]

use cclab_sim::config::{FlowConfig, SimConfig};
use cclab_sim::{SimResult, Simulation};

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;
pub const FRAME_BYTES: u64 = cclab_sim::FULL_FRAME_BYTES as u64;
pub const GOODPUT_CEILING: f64 = 1448.0 / 1514.0;

pub fn bdp_bytes(rate_mbps: u64, rtt_ms: u64) -> u64 {
    rate_mbps * 1_000_000 / 8 * rtt_ms / 1000
}

pub fn flow(id: u32, cc: &str) -> FlowConfig {
    FlowConfig::bulk(id, cc)
}

pub fn config(rate_mbps: u64, rtt_ms: u64, buffer_bytes: u64, loss: f64, duration_s: u64, flows: Vec<FlowConfig>) -> SimConfig {
    SimConfig::dumbbell(rate_mbps * 1_000_000, rtt_ms * MS, buffer_bytes, loss, duration_s * S, flows)
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
