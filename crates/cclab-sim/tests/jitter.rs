//! ACK-path jitter: seeds differ the way kernel repetitions do, a seed still replays bit for
//! bit, and `jitter_ns = 0` is the simulator without jitter.

mod common;
use common::*;

/// Two CUBIC flows at RTTs 20 and 40 ms over 50 Mbit/s and a 1-BDP tail-drop queue: nothing
/// random happens in them but what jitter adds.
fn cubic_pair(seed: u64, jitter_ns: u64) -> cclab_sim::SimConfig {
    let mut second = flow(1, "cubic");
    second.extra_rtt_ns = 20 * MS;
    let mut cfg = config(50, 20, bdp_bytes(50, 20), 0.0, 8, vec![flow(0, "cubic"), second]);
    cfg.seed = seed;
    cfg.jitter_ns = jitter_ns;
    cfg
}

fn goodputs(cfg: cclab_sim::SimConfig) -> Vec<f64> {
    run(cfg).flows.iter().map(|f| f.goodput_mbps).collect()
}

#[test]
fn without_jitter_every_seed_gives_the_same_cubic_run() {
    let first = goodputs(cubic_pair(1, 0));
    for seed in 2..4 {
        assert_eq!(goodputs(cubic_pair(seed, 0)), first);
    }
}

#[test]
fn with_jitter_seeds_differ_and_each_replays_exactly() {
    let runs: Vec<Vec<f64>> = (1..5).map(|seed| goodputs(cubic_pair(seed, 7_600))).collect();
    let mut distinct: Vec<&Vec<f64>> = Vec::new();
    for run in &runs {
        if !distinct.contains(&run) {
            distinct.push(run);
        }
    }
    assert!(distinct.len() >= 3, "seeds gave {runs:?}");
    assert_eq!(goodputs(cubic_pair(2, 7_600)), runs[1]);
}

/// One BBR flow over 20 Mbit/s, 40 ms and a 1-BDP queue, with the given ACK noise.
fn bbr_at_20_mbps(duration_s: u64, jitter_ns: u64) -> cclab_sim::SimConfig {
    let mut c = config(20, 40, bdp_bytes(20, 40), 0.0, duration_s, vec![flow(0, "bbr")]);
    c.jitter_ns = jitter_ns;
    c
}

#[test]
fn jitter_delays_acks_by_about_its_mean_and_the_laws_still_hold() {
    let (quiet, noisy) = (run_checked(bbr_at_20_mbps(5, 0)), run_checked(bbr_at_20_mbps(5, 200_000)));
    let (q, n) = (&quiet.flows[0], &noisy.flows[0]);
    // BBR keeps the queue near empty, so its fastest RTT is the path's own plus the noise's
    // smallest draws: never less than without noise, and not by much more than the mean.
    let (q_min, n_min) = (q.rtt_min_ms.unwrap(), n.rtt_min_ms.unwrap());
    assert!(n_min >= q_min && n_min < q_min + 0.2, "{q_min} -> {n_min}");
    let (q_mean, n_mean) = (q.rtt_mean_ms.unwrap(), n.rtt_mean_ms.unwrap());
    assert!(n_mean > q_mean + 0.05, "mean RTT {q_mean} -> {n_mean}");
    assert!(n.goodput_mbps <= 20.0 * GOODPUT_CEILING && n.goodput_mbps > 0.8 * 20.0 * GOODPUT_CEILING);
    assert!(n.bytes_delivered <= n.bytes_sent);
}

/// When BBR's first PROBE_RTT starts, over a 50 Mbit/s, 40 ms path with a 2-BDP queue.
fn first_probe_rtt_s(seed: u64, jitter_ns: u64) -> f64 {
    let mut cfg = config(50, 40, 2 * bdp_bytes(50, 40), 0.0, 11, vec![flow(0, "bbr")]);
    cfg.seed = seed;
    cfg.jitter_ns = jitter_ns;
    cfg.flow_sample_interval_ns = 5 * MS;
    let series = run(cfg).flow_series;
    let i = series.cc_mode.iter().position(|&m| m == "probe_rtt").expect("a PROBE_RTT within 11 s");
    series.time_s[i]
}

#[test]
fn with_noise_min_rtt_falls_through_the_first_rounds_and_probe_rtt_comes_later() {
    // Noiseless, the handshake's RTT is the path's floor: no data RTT undercuts it, and
    // PROBE_RTT comes 10 s after it in every seed.
    let quiet: Vec<f64> = (1..4).map(|seed| first_probe_rtt_s(seed, 0)).collect();
    assert!(quiet.iter().all(|&t| t == quiet[0] && t < 10.1), "{quiet:?}");
    // With the noise the handshake's SYN-ACK is as late as any ACK, and the first rounds'
    // many ACKs bring new minima: the filter's clock restarts with each (the kernel engine:
    // 0.05-0.25 s after the start, median 0.15 s, docs/FIDELITY.md).
    let mut noisy: Vec<f64> = (1..10).map(|seed| first_probe_rtt_s(seed, 30_700)).collect();
    noisy.sort_by(f64::total_cmp);
    assert!(noisy[0] >= quiet[0], "{noisy:?}");
    assert!(noisy[4] > quiet[0] + 0.03, "median {noisy:?} against {}", quiet[0]);
    assert!(noisy[8] < 10.5, "{noisy:?}");
}

#[test]
fn no_rtt_undercuts_the_path_floor_but_the_timestamp_options_whole_milliseconds() {
    let min_rtt_ms = |rate_mbps, rtt_ms| {
        let mut cfg = config(rate_mbps, rtt_ms, bdp_bytes(rate_mbps, rtt_ms), 0.0, 4, vec![flow(0, "bbr")]);
        cfg.jitter_ns = 30_700;
        run_checked(cfg).flows[0].rtt_min_ms.unwrap()
    };
    // 50 Mbit/s, 40 ms: the queue never drains while holes are filled, so every sample
    // carries the kernel path's 40 us (jitter.rs).
    let floor_ms = cclab_sim::jitter::KERNEL_PATH_FLOOR_NS as f64 / 1e6;
    let slow = min_rtt_ms(50, 40);
    assert!(slow >= 40.0 + floor_ms && slow < 40.0 + floor_ms + 0.01, "{slow}");
    // 300 Mbit/s, 100 ms: STARTUP's losses are repaired after DRAIN emptied the queue, and the
    // hole-filling ACKs' timestamp RTT, floored to the millisecond, is below the floor: as
    // on the kernel engine, whose BBR min_rtt reads 100.000 ms from about 2 s on.
    assert_eq!(min_rtt_ms(300, 100), 100.0);
}

#[test]
fn with_noise_each_seed_puts_the_timestamp_clocks_tick_edges_elsewhere() {
    let phase_ns = |seed, jitter_ns| cclab_sim::Simulation::new(cubic_pair(seed, jitter_ns)).unwrap().ts_clock().phase.as_nanos();
    // Without noise the edges sit at the simulation's whole milliseconds.
    assert!((1..6).all(|seed| phase_ns(seed, 0) == 0));
    // With it, anywhere in a tick (the kernel's clock ticks wherever it was when a run
    // began), drawn from the seed and replayed with it.
    let mut phases: Vec<u64> = (1..9).map(|seed| phase_ns(seed, 30_700)).collect();
    assert!(phases.iter().all(|&p| p < cclab_sim::tcp::rtt::TS_TICK_NS), "{phases:?}");
    assert_eq!(phase_ns(3, 30_700), phases[2]);
    phases.sort();
    phases.dedup();
    assert!(phases.len() >= 7, "{phases:?}");
}

/// One initial window (10 segments) over 100 Mbit/s and 40 ms: its ACKs reach the sender
/// 20 ms after the receiver last did anything, on an idle machine.
fn one_window_rtt_min_ms(jitter_ns: u64) -> f64 {
    let mut f = flow(0, "cubic");
    f.size_bytes = Some(10 * 1448);
    let mut cfg = config(100, 40, bdp_bytes(100, 40), 0.0, 1, vec![f]);
    cfg.jitter_ns = jitter_ns;
    run_checked(cfg).flows[0].rtt_min_ms.unwrap()
}

#[test]
fn with_noise_a_packet_reaching_an_idle_machine_waits_for_it_to_wake() {
    use cclab_sim::jitter::KERNEL_PATH_FLOOR_NS;
    use cclab_sim::wake::ACK_WAKE_NS;
    // A 1 ns mean leaves the path's floor and the wake-up before the sender reads the ACK
    // (and takes its RTT sample).
    let (quiet, noisy) = (one_window_rtt_min_ms(0), one_window_rtt_min_ms(1));
    let expected_ms = (KERNEL_PATH_FLOOR_NS + ACK_WAKE_NS) as f64 / 1e6;
    let added_ms = noisy - quiet;
    assert!((added_ms - expected_ms).abs() < 0.002, "added {added_ms} ms, expected {expected_ms}");
}

/// A bulk BBR flow at 20 Mbit/s keeps the machine busy: its packets find it awake.
#[test]
fn a_busy_path_never_waits_for_the_machine_to_wake() {
    let (quiet, noisy) = (run_checked(bbr_at_20_mbps(3, 0)), run_checked(bbr_at_20_mbps(3, 1)));
    // Past the first rounds BBR's flight keeps packets crossing every few hundred us: the
    // median RTT moves by the floor alone, not by the 167 us of two wake-ups.
    let median = |r: &cclab_sim::SimResult| r.flows[0].rtt_p50_ms.unwrap();
    let added_ms = median(&noisy) - median(&quiet);
    assert!(added_ms < 0.1, "median RTT {} -> {}", median(&quiet), median(&noisy));
}

/// Every counter of a run, to tell runs apart exactly.
fn counts(cfg: cclab_sim::SimConfig) -> Vec<(u64, u64, u64)> {
    run(cfg).flows.iter().map(|f| (f.bytes_delivered, f.data_segments_sent, f.retrans_segments)).collect()
}

fn with_noise(mut cfg: cclab_sim::SimConfig, ts_clock_phase: Option<bool>, idle_reader_wake: Option<bool>, idle_machine_wake: Option<bool>) -> cclab_sim::SimConfig {
    cfg.noise = cclab_sim::config::NoiseConfig { ts_clock_phase, idle_reader_wake, idle_machine_wake };
    cfg
}

#[test]
fn the_host_noises_unset_follow_the_ack_jitter_and_each_can_be_set_apart_from_it() {
    // Unset, each runs exactly when the jitter does: the same run as all three set to that.
    let jittered = counts(cubic_pair(3, 7_600));
    assert_eq!(counts(with_noise(cubic_pair(3, 7_600), Some(true), Some(true), Some(true))), jittered);
    let quiet = counts(cubic_pair(3, 0));
    assert_eq!(counts(with_noise(cubic_pair(3, 0), Some(false), Some(false), Some(false))), quiet);
    // Each alone, with the jitter off, changes the run; the three off leave the jitter alone,
    // another run again.
    for (phase, reader, machine) in [(Some(true), None, None), (None, Some(true), None), (None, None, Some(true))] {
        assert_ne!(counts(with_noise(cubic_pair(3, 0), phase, reader, machine)), quiet, "{phase:?} {reader:?} {machine:?} on");
    }
    let jitter_alone = counts(with_noise(cubic_pair(3, 7_600), Some(false), Some(false), Some(false)));
    assert_ne!(jitter_alone, jittered);
    assert_ne!(jitter_alone, quiet);
}
