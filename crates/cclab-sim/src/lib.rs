//! cclab's packet-level simulator: a dumbbell (per-flow access links, one
//! tbf-like bottleneck, an uncongested ACK path) carrying Linux-faithful TCP
//! with the congestion controls of `cclab-cc`.
//!
//! Time is an integer nanosecond clock and every random draw comes from a
//! generator seeded by the scenario, so the same config gives bit-identical
//! results.

pub mod config;
pub mod differential;
pub mod event;
pub mod jitter;
pub mod metrics;
pub mod network;
pub mod result;
pub mod sim;
pub mod stall;
pub mod tcp;
pub mod wake;
pub mod window;

pub use cclab_aqm as aqm;
/// Mahimahi delivery traces (shared with the kernel engine's userspace bottleneck).
pub use cclab_aqm::delivery_trace as trace;
pub use cclab_cc as cc;
pub use config::SimConfig;
pub use result::SimResult;
pub use sim::Simulation;

/// Version of the simulated behaviour. Bump it whenever a change alters what
/// a run produces: sweeps key finished runs on it, so old results are not
/// reused for a different model. What each version changed: CHANGELOG.md,
/// "Simulator model versions".
pub const MODEL_VERSION: u32 = 23;

/// A host's MTU unless `[host] mtu` sets it (Ethernet's); every frame and segment size
/// follows from the MTU through `HostConfig::mss_bytes` and `frame_bytes`.
pub const DEFAULT_MTU_BYTES: u32 = 1500;
/// Headers inside the MTU on a full segment: 20 B IP + 20 B TCP + 12 B timestamps option.
pub const TCP_IP_HEADER_BYTES: u32 = 52;
/// Headers on the wire: the above + the 14 B Ethernet header, which tc tbf counts too.
pub const FRAME_OVERHEAD_BYTES: u32 = TCP_IP_HEADER_BYTES + cclab_aqm::delivery_trace::ETHERNET_HEADER_BYTES;
/// TCP payload per full segment at the default MTU, with timestamps.
pub const MSS_BYTES: u32 = DEFAULT_MTU_BYTES - TCP_IP_HEADER_BYTES;
/// A full segment's frame at the default MTU, as tc tbf counts it.
pub const FULL_FRAME_BYTES: u32 = MSS_BYTES + FRAME_OVERHEAD_BYTES;
/// The MTUs a spec may set (`[host] mtu`): IPv4's minimum datagram every host accepts
/// (RFC 791) to jumbo frames.
pub const MTU_RANGE_BYTES: std::ops::RangeInclusive<u32> = 576..=9000;

/// Runs a scenario to completion.
pub fn run(config: SimConfig) -> Result<SimResult, String> {
    run_observed(config, |_, _| true)
}

/// Runs a scenario, handing `observe(now, events_processed)` control every
/// `sim::OBSERVE_EVERY_EVENTS` events (progress, Ctrl-C); `false` stops it with
/// `Err(sim::INTERRUPTED)`.
pub fn run_observed(config: SimConfig, observe: impl FnMut(cc::SimTime, u64) -> bool) -> Result<SimResult, String> {
    let wall_start = std::time::Instant::now();
    let mut sim = Simulation::new(config)?;
    sim.run_observed(observe)?;
    Ok(SimResult::from_simulation(sim, wall_start.elapsed().as_secs_f64()))
}

/// JSON in, JSON out: the contract the Python layer and the kernel engine share.
pub fn run_json(config_json: &str) -> Result<String, String> {
    run_json_observed(config_json, |_, _| true)
}

/// `run_json` with an observer, as `run_observed`.
pub fn run_json_observed(config_json: &str, observe: impl FnMut(cc::SimTime, u64) -> bool) -> Result<String, String> {
    let config: SimConfig = serde_json::from_str(config_json).map_err(|e| format!("invalid simulator config: {e}"))?;
    let result = run_observed(config, observe)?;
    serde_json::to_string(&result).map_err(|e| e.to_string())
}
