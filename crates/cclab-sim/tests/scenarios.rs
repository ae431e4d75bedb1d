//! Named scenarios with physical expectations, one per seed finding the
//! simulator must reproduce.

mod common;
use common::*;

#[test]
fn one_cubic_flow_fills_a_100mbit_20ms_link_with_a_one_bdp_buffer() {
    let cfg = config(100, 20, bdp_bytes(100, 20), 0.0, 10, vec![flow(0, "cubic")]);
    let r = run_checked(cfg);
    let f = &r.flows[0];
    assert!(f.goodput_mbps > 90.0, "goodput {}", f.goodput_mbps);
    assert!(f.goodput_mbps <= 100.0 * GOODPUT_CEILING, "goodput {} above the ceiling", f.goodput_mbps);
    // CUBIC keeps the buffer busy: a standing queue but never above the limit.
    assert!(r.bottleneck.queue_max_bytes <= bdp_bytes(100, 20));
    assert!(r.bottleneck.utilization > 0.95);
}

#[test]
fn every_cc_fills_a_deep_buffered_link() {
    for cc in ["reno", "cubic", "bbr", "bbr2", "bbr3"] {
        let cfg = config(50, 10, 4 * bdp_bytes(50, 10), 0.0, 10, vec![flow(0, cc)]);
        let r = run_checked(cfg);
        let goodput = r.flows[0].goodput_mbps;
        assert!(goodput > 0.9 * 50.0 * GOODPUT_CEILING, "{cc}: goodput {goodput}");
        // With no random loss every retransmission answers a queue drop.
        assert_eq!(r.flows[0].retrans_segments, r.flows[0].queue_drop_segments, "{cc}: spurious retransmissions");
    }
}

#[test]
fn at_one_percent_loss_bbr_keeps_its_rate_while_cubic_collapses() {
    // ReBBR / the BBR paper: 100 Mbit/s, 100 ms, 1% random loss, 30 s.
    let buffer = 10_000_000;
    let bbr = run(config(100, 100, buffer, 0.01, 30, vec![flow(0, "bbr")]));
    let cubic = run(config(100, 100, buffer, 0.01, 30, vec![flow(0, "cubic")]));
    assert!(bbr.flows[0].goodput_mbps > 80.0, "bbr {}", bbr.flows[0].goodput_mbps);
    assert!(cubic.flows[0].goodput_mbps < 20.0, "cubic {}", cubic.flows[0].goodput_mbps);
}

#[test]
fn bbr_enters_probe_rtt_about_every_ten_seconds() {
    let r = run(config(100, 20, bdp_bytes(100, 20) * 2, 0.0, 35, vec![flow(0, "bbr")]));
    let entries: Vec<f64> = (0..r.events.kind.len())
        .filter(|&i| r.events.kind[i] == "cc_mode" && r.events.detail[i] == "probe_rtt")
        .map(|i| r.events.time_s[i])
        .collect();
    assert!(entries.len() >= 2, "PROBE_RTT entries {entries:?}");
    for pair in entries.windows(2) {
        let gap = pair[1] - pair[0];
        assert!((9.0..=12.0).contains(&gap), "PROBE_RTT gap {gap} s in {entries:?}");
    }
    // The cwnd series shows it: cwnd drops to 4 packets in those samples.
    let min_cwnd = r.flow_series.cwnd_pkts.iter().skip(20).min().copied().unwrap();
    assert!(min_cwnd <= 4 + 3 * 2, "min cwnd {min_cwnd}");
}

#[test]
fn a_finite_flow_completes_no_faster_than_the_link_allows() {
    let mut f = flow(0, "cubic");
    f.size_bytes = Some(10_000_000);
    let r = run_checked(config(100, 20, bdp_bytes(100, 20), 0.0, 30, vec![f]));
    let fr = &r.flows[0];
    assert!(fr.completed);
    assert_eq!(fr.bytes_delivered, 10_000_000);
    let fct = fr.fct_s.unwrap();
    let floor = 10_000_000.0 * 8.0 / (100e6 * GOODPUT_CEILING) + 0.020;
    assert!(fct >= floor, "fct {fct} < physical floor {floor}");
    assert!(fct < 3.0 * floor, "fct {fct} too slow");
    // The run stops once the flow is done.
    assert!(r.stats.simulated_s < 30.0);
}

#[test]
fn ten_flows_of_one_cc_share_a_deep_buffer_fairly() {
    let flows = (0..10).map(|i| flow(i, "cubic")).collect();
    let r = run(config(100, 20, 10 * bdp_bytes(100, 20), 0.0, 30, flows));
    let g: Vec<f64> = r.flows.iter().map(|f| f.goodput_mbps).collect();
    let jain = g.iter().sum::<f64>().powi(2) / (g.len() as f64 * g.iter().map(|x| x * x).sum::<f64>());
    assert!(jain > 0.9, "Jain index {jain}: {g:?}");
}

#[test]
fn a_longer_rtt_flow_starts_later_and_still_gets_through() {
    let mut late = flow(1, "reno");
    late.start_ns = 2 * S;
    late.extra_rtt_ns = 30 * MS;
    let r = run_checked(config(20, 10, 100_000, 0.0, 6, vec![flow(0, "reno"), late]));
    assert!(r.flows[1].start_s == 2.0);
    assert!(r.flows[1].bytes_delivered > 0);
    assert!(r.flows[1].rtt_min_ms.unwrap() >= 40.0, "extra RTT not applied: {:?}", r.flows[1].rtt_min_ms);
    assert!(r.flows[0].rtt_min_ms.unwrap() < 12.0);
}

#[test]
fn cubic_hystart_ends_slow_start_on_an_ack_train_before_a_one_bdp_buffer_overflows() {
    // 10 Mbit/s, 200 ms, 1 BDP (172 packets): a segment every 1.2 ms, so the
    // receiver's one ACK per segment forms a train (gaps <= 2 ms) that outlasts
    // delay_min / 2 in the round that starts at cwnd ~160; the kernel leaves slow
    // start there (TCPHystartTrainCwnd 253) with nothing lost. Without the train,
    // slow start runs to ~650 packets and overflows the buffer by ~450.
    let r = run_checked(config(10, 200, bdp_bytes(10, 200), 0.0, 3, vec![flow(0, "cubic")]));
    let f = &r.flows[0];
    assert_eq!(f.queue_drop_segments, 0, "slow start overflowed the buffer");
    assert_eq!(f.retrans_segments, 0);
    // It did leave slow start near the link's capacity rather than early: by 3 s
    // the link is full.
    assert!(f.goodput_mbps > 0.5 * 10.0 * GOODPUT_CEILING, "goodput {}", f.goodput_mbps);
}

#[test]
fn a_40_ms_cubic_flow_leaves_slow_start_by_hystart_at_the_window_linux_leaves_it() {
    // Kernel engine, 2 CUBIC at 20 and 40 ms over 50 Mbit/s and 1 BDP, five runs: the
    // 40 ms flow left slow start with nothing lost, at 47-57 packets (first 50 ms sample
    // after the exit), because the 20 ms flow's queue raised its RTT past HyStart's
    // delay threshold. With half its extra RTT before the bottleneck (an earlier model), its
    // data met that queue 10 ms earlier and it left at 28, a round too soon.
    for seed in 1..=3 {
        let mut long = flow(1, "cubic");
        long.extra_rtt_ns = 20 * MS;
        let mut cfg = config(50, 20, bdp_bytes(50, 20), 0.0, 1, vec![flow(0, "cubic"), long]);
        cfg.seed = seed;
        cfg.flow_sample_interval_ns = 5 * MS;
        let r = run_checked(cfg);
        let s = &r.flow_series;
        let long_samples: Vec<usize> = (0..s.time_s.len()).filter(|&i| s.flow_id[i] == 1).collect();
        let exit = *long_samples.iter().find(|&&i| s.cc_mode[i] == "congestion_avoidance").expect("left slow start");
        let lost_before: u64 = long_samples.iter().filter(|&&i| i <= exit).map(|&i| s.retrans_segments[i]).sum();
        assert_eq!(lost_before, 0, "seed {seed}: left slow start by a loss");
        assert!((40..=64).contains(&s.cwnd_pkts[exit]), "seed {seed}: left slow start at {} packets", s.cwnd_pkts[exit]);
    }
}

#[test]
fn a_cubic_flow_reports_the_pacing_rate_linux_sets_for_it() {
    // tcp_update_pacing_rate: 120% of max(cwnd, packets out) x MSS / srtt once cwnd is at
    // least half of ssthresh (tcpi_pacing_rate on the kernel engine).
    let mut cfg = config(50, 20, bdp_bytes(50, 20), 0.0, 3, vec![flow(0, "cubic")]);
    cfg.flow_sample_interval_ns = 100 * MS;
    let r = run_checked(cfg);
    let s = &r.flow_series;
    let last = s.time_s.len() - 1;
    let rate = s.pacing_rate_mbps[last].expect("a CUBIC flow has a pacing rate");
    let cwnd_rate_mbps = s.cwnd_pkts[last] as f64 * 1448.0 * 8.0 / (s.srtt_ms[last] / 1e3) / 1e6;
    assert!((1.1..=1.3).contains(&(rate / cwnd_rate_mbps)), "pacing {rate} Mbit/s against cwnd/srtt {cwnd_rate_mbps}");
}

#[test]
fn a_bbr_flow_with_a_60_ms_rtt_takes_about_half_of_a_one_bdp_link_from_a_20_ms_one_as_on_linux() {
    // Kernel engine: 23.8 and 23.5 Mbit/s over 20 s. There iperf3 opens each data
    // connection about two RTTs after launch (control connection first), so its data
    // flows begin 60 and 180 ms in; the same here (SYN two RTTs late, data one RTT
    // later; docs/FIDELITY.md). With one segment per pacing
    // interval the 20 ms flow, paced at about a frame per departure slot, won nearly
    // every freed slot of the full queue: the 60 ms flow lost 30-55% of its packets in
    // STARTUP and kept 16-20% of the link. GSO bursts of 2-4 frames, as Linux sends
    // them, spread the tail drops. Three more kernel runs (validate's default set) gave
    // the 60 ms flow 39-47% of the goodput, so the bound sits below that range and
    // well above the starved mode; simulator seeds 1-10 gave 28-45% (model 12).
    let mut near = flow(0, "bbr");
    near.start_ns = 40 * MS;
    let mut far = flow(1, "bbr");
    far.extra_rtt_ns = 40 * MS;
    far.start_ns = 120 * MS;
    let r = run_checked(config(50, 20, bdp_bytes(50, 20), 0.0, 20, vec![near, far]));
    let (near, far) = (r.flows[0].goodput_mbps, r.flows[1].goodput_mbps);
    assert!(far / (near + far) > 0.35, "60 ms flow {far} vs 20 ms flow {near} Mbit/s");
    assert!(near + far > 0.95 * 50.0 * GOODPUT_CEILING, "link not full: {near} + {far}");
}

#[test]
fn a_cubic_flow_with_a_60_ms_rtt_keeps_a_linux_like_share_next_to_a_20_ms_one() {
    // Kernel engine, 15-20 s: the 60 ms flow got 9.4-17.3 Mbit/s of 47.7 (four runs,
    // mean 14.2). Its data there starts two path RTTs after the spec's start (iperf3's
    // cookie and start message), at 40 and 120 ms; here data starts one RTT after
    // `start_ns`, so the starts below match. Unpaced senders that sent only what each
    // ACK freed gave it 5-8 Mbit/s: one of its packets met the queue's first overflow
    // and its W_max stayed small. Linux's GSO skbs and TSO deferral make the 20 ms
    // flow arrive in runs of 3-4 frames and the 60 ms flow in pairs (router capture,
    // docs/FIDELITY.md). The outcome hangs on the phase of the first overflow, so
    // three starting phases are averaged.
    let mut far_goodputs = Vec::new();
    for far_start_ms in [58, 60, 62] {
        let mut near = flow(0, "cubic");
        near.start_ns = 20 * MS;
        let mut far = flow(1, "cubic");
        far.extra_rtt_ns = 40 * MS;
        far.start_ns = far_start_ms * MS;
        let r = run_checked(config(50, 20, bdp_bytes(50, 20), 0.0, 15, vec![near, far]));
        let (near, far) = (r.flows[0].goodput_mbps, r.flows[1].goodput_mbps);
        assert!(near + far > 0.95 * 50.0 * GOODPUT_CEILING, "link not full: {near} + {far}");
        far_goodputs.push(far);
    }
    let mean = far_goodputs.iter().sum::<f64>() / far_goodputs.len() as f64;
    assert!((9.0..20.0).contains(&mean), "60 ms flow: {far_goodputs:?} Mbit/s");
}

#[test]
fn twenty_five_bbr_flows_in_a_tenth_of_a_bdp_share_the_link_fairly_as_on_linux() {
    // Kernel engine: Jain 0.90-0.94 (docs/FIDELITY.md). With one segment per pacing
    // interval one STARTUP flow ran away (Jain 0.2): its evenly spaced packets won the
    // freed slots of the full queue while the others' lost them.
    let flows = (0..25).map(|i| flow(i, "bbr")).collect();
    let r = run(config(100, 20, bdp_bytes(100, 20) / 10, 0.0, 30, flows));
    let g: Vec<f64> = r.flows.iter().map(|f| f.goodput_mbps).collect();
    let jain = g.iter().sum::<f64>().powi(2) / (g.len() as f64 * g.iter().map(|x| x * x).sum::<f64>());
    assert!(jain > 0.8, "Jain index {jain}: {g:?}");
}

#[test]
fn a_nic_at_the_bottlenecks_rate_never_overflows_its_queue_where_a_fast_one_does() {
    // Five frames of buffer: a 10 Gbit/s NIC delivers CUBIC's skbs faster than 100 Mbit/s drains
    // them; a 100 Mbit/s NIC hands them over exactly as fast as they leave.
    let with_nic = |access_mbps: u64| {
        let mut cfg = config(100, 20, 5 * FRAME_BYTES, 0.0, 5, vec![flow(0, "cubic")]);
        cfg.jitter_ns = 0;
        cfg.stall_per_packet = 0.0;
        cfg.host.access_rate_bps = Some(access_mbps * 1_000_000);
        run_checked(cfg)
    };
    assert_eq!(with_nic(100).bottleneck.overflow_drops, 0);
    assert!(with_nic(10_000).bottleneck.overflow_drops > 0);
}
