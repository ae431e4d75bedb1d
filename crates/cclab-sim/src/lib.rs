//! cclab's packet-level simulator: a dumbbell (per-flow access links, one
//! tbf-like bottleneck, an uncongested ACK path) carrying Linux-faithful TCP
//! with the congestion controls of `cclab-cc`.
//!
//! Time is an integer nanosecond clock and every random draw comes from a
//! generator seeded by the scenario, so the same config gives bit-identical
//! results.

pub mod config;
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
/// reused for a different model.
/// 3: the receiver ACKs each in-order segment the application reads (Linux with an app
/// that drains the socket); paced senders emit GSO-sized bursts.
/// 4: ... only while deliveries per RTT reach new highs (receive-buffer autotuning).
/// 5: unpaced senders build GSO skbs and defer a short first one (tcp_tso_should_defer).
/// 6: the bottleneck pulls from a `cclab_aqm` qdisc (CoDel, fq_codel) and TCP speaks
/// ECN; FIFO runs are unchanged, but results gain the AQM/ECN/sojourn metrics.
/// 7: results are measured over [warmup_ns, end] with the whole run beside them
/// (`whole_run_*`); values with warmup 0 are unchanged, but every result gains columns.
/// 8: seeded timing noise on the ACK path (`jitter_ns`, on by default), so seeds differ as
/// kernel repetitions do; `jitter_ns = 0` gives model 7's runs.
/// 9: the receiver advertises Linux 6.18's autotuned window (tcp/receive_window.rs) and
/// the sender stops at its right edge; `receive_window_autotuning = false` gives model 8.
/// 10: with the window, the receiver's quick ACKs come from `tcp_grow_window` (while
/// `rcv_ssthresh` can grow) instead of model 4's per-RTT trigger, and two segments are
/// not ACKed at once when the window would shrink (`__tcp_ack_snd_check`).
/// 11: a flow's extra RTT sits wholly on its ACK path, as on the kernel engine; data
/// reaches the bottleneck undelayed (before, half the extra RTT delayed it). Unpaced
/// senders keep `tcp_update_pacing_rate`'s rate, and HyStart's ACK-train threshold gets
/// `hystart_ack_delay`'s cushion from it (TCP always has a GSO size); flow series report
/// that rate for them, as tcpi_pacing_rate does. `rwnd_limited_ms` counts only time the
/// window stopped a sender that pacing and cwnd would have let send (tcp_write_xmit).
/// 12: the receiving application reads 12 us after data arrives (READER_WAKEUP), so the
/// segments an ACK sent at arrival covers (a burst, data a filled hole released) are still
/// charged to the buffer when the window is chosen and `rcv_ssthresh` grown; the read then
/// runs `tcp_rcv_space_adjust`. The receiving socket is set up a handshake RTT before its
/// data and has read iperf3's 37-byte cookie, so the first buffer measurement ends at the
/// first read of data, as on the kernel engine.
/// 13: paced senders (BBR) defer a short skb too (`tcp_tso_should_defer` runs in
/// `tcp_write_xmit` after the pacing check), and the deferral waits only for an ACK due
/// within min(srtt/2, 1 ms), Linux 6.18's criterion.
/// 14: BBRv2/v3 read `tp->is_cwnd_limited` itself (raising inflight_hi in PROBE_UP, and
/// PROBE_UP's exit), not `tcp_is_cwnd_limited()`, whose slow-start clause counted a
/// pacing-limited flow below STARTUP's ssthresh as cwnd-limited.
/// 15: the application's first write (iperf3's 37-byte cookie) is acknowledged before the
/// data, and its ACK is the CC's first: BBR starts its data with 11 packets, as on Linux.
/// 16: the application's read sends the ACK the input path held back
/// (`__tcp_cleanup_rbuf`): two or more segments unacknowledged behind a window the unread
/// data would have shrunk, or a window the read doubles. Before, that ACK waited for the
/// next segment or the 40 ms delayed-ACK timer.
/// 17: the bottleneck's dequeue stalls now and then (`stall_per_packet`, on by default;
/// stall.rs), as tbf's does on the kernel engine: a Pareto-tailed wait of 0.2-6 ms, after
/// which the bucket's tokens let the queue catch up. `stall_per_packet = 0` gives model 16.
/// 18: an ACK that acknowledges data none of which Karn's rule lets it time (the one that
/// fills a hole) is timed by its timestamp echo, in whole milliseconds (`tcp_ack_update_rtt`'s
/// fallback; tcp/rtt.rs `tsopt_rtt`), so min_rtt can fall below the path's RTT; the SYN-ACK
/// is as late as any ACK; with the noise on, every ACK also pays the kernel path's fixed
/// 40 us (jitter.rs). BBR's min_rtt filter then sees new minima through its first rounds,
/// not only at the handshake, and PROBE_RTT comes when it does on the kernel.
/// 19: with the noise on, the timestamp option's millisecond clock ticks at a seeded phase
/// (tcp/rtt.rs `TsClock`), as the kernel's does from wherever it was when a run began: the
/// receiver's RTT (and so when autotuning grows the window in slow start) and the
/// hole-filler's RTT cross tick edges differently from seed to seed. Before, every run's
/// edges sat at whole milliseconds from time zero; `jitter_ns = 0` still does.
/// 20: with the noise on, the kernel engine's machine sleeps when idle (wake.rs). An ACK
/// that reaches its sender after 5 ms without a packet moving waits 167 us (the delay line
/// 66, the sender 101), with the ACKs arriving meanwhile; data after 5 ms without data wakes
/// the receiving application after 45 us plus a seeded exponential of mean 72 (tcp/receiver.rs
/// `idle_reader_wake`), not 12 us. BBR's PROBE_RTT rounds are then as long as on the kernel
/// (it leaves a round early as often), and slow start's reads scatter over its bursts as
/// the kernel's do, so the receiver's window holds a round back as often.
/// 21: `tcp_tso_should_defer`'s "a third of the window is free" compares bytes, as Linux
/// does (min(snd_wnd, cwnd x mss) / 3), not whole segments rounded down: four free segments
/// of a cwnd of 14 now wait for the head's ACK. The rtt set's figures stay model 20's (goodput
/// p90 7.9% against 7.8%).
/// 22: the last segment of every skb of two or more carries PSH (`__tcp_transmit_skb`), and
/// since Linux 6.6 such a segment marks its ACK as pushed (`tcp_measure_rcv_mss`,
/// `ICSK_ACK_PUSHED`): the read that then empties the socket sends the ACK the delayed-ACK
/// timer was holding (`__tcp_cleanup_rbuf`). An skb of three is ACKed 2 + 1, as in the
/// kernel's captures, not 2 and then 40 ms later.
pub const MODEL_VERSION: u32 = 22;

/// TCP payload per full segment on a 1500-byte MTU with timestamps.
pub const MSS_BYTES: u32 = 1448;
/// Headers on the wire: 12 B timestamps option + 20 B TCP + 20 B IP + 14 B Ethernet.
pub const FRAME_OVERHEAD_BYTES: u32 = 66;
/// A full segment's frame as tc tbf counts it.
pub const FULL_FRAME_BYTES: u32 = MSS_BYTES + FRAME_OVERHEAD_BYTES;

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
