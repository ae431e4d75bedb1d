//! The receiver's autotuned window (tcp/receive_window.rs) on whole runs: it holds a
//! long-RTT flow in STARTUP behind a loss episode, as on the kernel engine, and leaves a
//! clean single flow's goodput alone.

mod common;
use common::*;

/// Two BBR flows at 20 and 80 ms RTT over 50 Mbit/s and a 1-BDP tail-drop queue, 3 s: the
/// case where the kernel engine's long flow was `rwnd_limited` for 152-256 ms.
fn bbr_pair_1_to_4(autotuning: bool) -> cclab_sim::SimConfig {
    let mut long = flow(1, "bbr");
    long.extra_rtt_ns = 60 * MS;
    let mut cfg = config(50, 20, bdp_bytes(50, 20), 0.0, 3, vec![flow(0, "bbr"), long]);
    cfg.receive_window_autotuning = autotuning;
    cfg
}

#[test]
fn a_long_rtt_bbr_flow_waits_for_the_receive_window_in_startup_in_most_runs() {
    // The kernel engine held the long flow in 9 of 10 runs (92-300 ms); in the other the two
    // STARTUPs split the link before the window mattered (tests/kernel/test_kernel_receive_window.py).
    // Seeds move only BBR's random PROBE_BW phase here (no loss, no jitter).
    let mut held = Vec::new();
    for seed in 1..=10 {
        let mut cfg = bbr_pair_1_to_4(true);
        cfg.seed = seed;
        let r = run(cfg);
        let (short, long) = (r.flows[0].rwnd_limited_ms, r.flows[1].rwnd_limited_ms);
        // The window binds the long flow far more than the short one.
        held.push((long > 50.0 && long > 2.0 * short, short, long));
    }
    assert!(held.iter().filter(|h| h.0).count() >= 7, "(held, short ms, long ms) per seed: {held:?}");
}

#[test]
fn a_receiver_without_the_window_never_holds_its_sender() {
    let r = run(bbr_pair_1_to_4(false));
    for f in &r.flows {
        assert_eq!(f.rwnd_limited_ms, 0.0, "flow {}", f.flow_id);
    }
}

#[test]
fn a_clean_high_bdp_flow_is_not_slowed_by_the_window() {
    // 300 Mbit/s x 100 ms, a 1-BDP buffer, 10 s: the buffer grows by up to 4x per RTT,
    // faster than slow start doubles.
    for cc in ["cubic", "bbr"] {
        let cfg = |autotuning| {
            let mut c = config(300, 100, bdp_bytes(300, 100), 0.0, 10, vec![flow(0, cc)]);
            c.receive_window_autotuning = autotuning;
            c
        };
        let (with, without) = (run(cfg(true)).flows[0].goodput_mbps, run(cfg(false)).flows[0].goodput_mbps);
        assert!(with >= 0.98 * without, "{cc}: {with} with the window, {without} without");
    }
}

#[test]
fn a_steady_cubic_flow_is_acked_about_every_second_segment() {
    // Kernel engine, receiver namespace TcpOutSegs / TcpInSegs: 0.50-0.55 ACKs per segment
    // at 10, 20 and 50 Mbit/s; the quick ACKs of tcp_grow_window stop once rcv_ssthresh
    // meets the clamp.
    for rate in [10, 50] {
        let mut sim = cclab_sim::sim::Simulation::new(config(rate, 20, bdp_bytes(rate, 20), 0.0, 20, vec![flow(0, "cubic")])).unwrap();
        sim.run().unwrap();
        let rx = &sim.flows[0].receiver;
        let per_segment = rx.acks_sent as f64 / rx.segments_received as f64;
        assert!((0.45..=0.6).contains(&per_segment), "{rate} Mbit/s: {per_segment:.3} ACKs per segment");
    }
}

#[test]
fn a_paced_flows_odd_skbs_end_with_psh_and_their_last_segment_is_acked_at_once() {
    // BBR at 50 Mbit/s sends skbs of 2-4 segments. Each ends with PSH, so an skb of three
    // is ACKed 2 + 1 (the read's pushed ACK) rather than every second segment: 0.63 ACKs per
    // segment, against 0.52 with the PSH left out (the kernel's capture of BBRv3 beside
    // CUBIC: 0.56, a fifth of its ACKs covering one segment).
    let mut sim = cclab_sim::sim::Simulation::new(config(50, 40, bdp_bytes(50, 40), 0.0, 20, vec![flow(0, "bbr")])).unwrap();
    sim.run().unwrap();
    let rx = &sim.flows[0].receiver;
    let per_segment = rx.acks_sent as f64 / rx.segments_received as f64;
    assert!((0.58..=0.7).contains(&per_segment), "{per_segment:.3} ACKs per segment");
}
