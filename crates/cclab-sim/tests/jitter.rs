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

#[test]
fn jitter_delays_acks_by_about_its_mean_and_the_laws_still_hold() {
    let cfg = |jitter_ns| {
        let mut c = config(20, 40, bdp_bytes(20, 40), 0.0, 5, vec![flow(0, "bbr")]);
        c.jitter_ns = jitter_ns;
        c
    };
    let (quiet, noisy) = (run_checked(cfg(0)), run_checked(cfg(200_000)));
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
