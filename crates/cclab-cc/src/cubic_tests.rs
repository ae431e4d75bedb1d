use super::*;
use crate::hystart::HystartExit;
use crate::{SimDuration, INFINITE_SSTHRESH};

/// RFC 9438 §4.1.1 constants, for expected values computed from the RFC's formulas.
const RFC_C: f64 = 0.4;
const RFC_BETA: f64 = 0.7;

fn secs(s: f64) -> SimTime {
    SimTime((s * 1e9) as u64)
}

fn tcp_with(cwnd: u32, ssthresh: u32) -> TcpState {
    let mut tcp = TcpState::new(1448);
    tcp.snd_cwnd = cwnd;
    tcp.snd_ssthresh = ssthresh;
    tcp.is_cwnd_limited = true;
    tcp
}

fn sample(rtt: SimDuration) -> AckSample {
    AckSample { pkts_acked: 1, rtt: Some(rtt), in_flight: 0 }
}

/// A CUBIC that has seen `rtt` as its minimum RTT and then a loss at
/// `w_max` packets; `tcp` ends with cwnd = ssthresh, as after recovery.
fn after_loss_at(w_max: u32, rtt: SimDuration, config: CubicConfig) -> (Cubic, TcpState) {
    let mut cc = Cubic::new(config);
    let mut tcp = tcp_with(w_max, INFINITE_SSTHRESH);
    cc.init(&mut tcp);
    cc.pkts_acked(&mut tcp, &sample(rtt));
    let ssthresh = cc.ssthresh(&tcp);
    tcp.snd_cwnd = ssthresh;
    tcp.snd_ssthresh = ssthresh;
    (cc, tcp)
}

/// One window acked per RTT, ACKs evenly spaced, one packet each, every
/// ACK an RTT sample of `rtt`. Returns (seconds since start, cwnd) at the
/// start of each round.
fn ack_clock(
    cc: &mut Cubic,
    tcp: &mut TcpState,
    rtt: SimDuration,
    duration_s: f64,
) -> Vec<(f64, u32)> {
    let start = tcp.now;
    let mut rounds = Vec::new();
    while (tcp.now - start).as_secs_f64() < duration_s {
        rounds.push(((tcp.now - start).as_secs_f64(), tcp.snd_cwnd));
        let acks = tcp.snd_cwnd as u64;
        for _ in 0..acks {
            tcp.now += SimDuration(rtt.as_nanos() / acks);
            tcp.snd_una += 1;
            tcp.snd_nxt = tcp.snd_una + tcp.snd_cwnd as u64;
            cc.pkts_acked(tcp, &sample(rtt));
            let ack_seq = tcp.snd_una;
            cc.cong_avoid(tcp, ack_seq, 1);
        }
    }
    rounds
}

/// RFC 9438 §4.2: W_cubic(t) = C (t - K)^3 + W_max, K = cbrt(W_max (1 - beta) / C).
fn rfc_w_cubic(w_max: f64, t_s: f64) -> f64 {
    let k = (w_max * (1.0 - RFC_BETA) / RFC_C).cbrt();
    RFC_C * (t_s - k).powi(3) + w_max
}

#[test]
fn k_is_the_cube_root_of_w_max_times_one_minus_beta_over_c() {
    // Tolerance 3 ms: Linux's C = 410/1024 (not 0.4) shifts K by 0.03%
    // (1.4 ms at 4.2 s), beta = 717/1024 and integer cwnd_epoch change
    // W_max - cwnd_epoch by < 0.1%, and K is floored to 1/1024 s (< 1 ms).
    for (w_max, tolerance_s) in [(100u32, 0.003), (1000, 0.006)] {
        let (mut cc, mut tcp) =
            after_loss_at(w_max, SimDuration::from_millis(100), CubicConfig::default());
        tcp.now = secs(10.0);
        cc.cong_avoid(&mut tcp, 0, 1);
        let k_s = cc.k_bic_ticks as f64 / 1024.0;
        let rfc_k_s = (w_max as f64 * (1.0 - RFC_BETA) / RFC_C).cbrt();
        assert!(
            (k_s - rfc_k_s).abs() < tolerance_s,
            "W_max {w_max}: K {k_s} s, RFC {rfc_k_s} s"
        );
        assert_eq!(cc.origin_point_pkts, w_max);
    }
}

#[test]
fn the_window_curve_matches_c_times_t_minus_k_cubed_plus_w_max() {
    let (mut cc, mut tcp) =
        after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
    tcp.now = secs(10.0);
    cc.cong_avoid(&mut tcp, 0, 1);
    let rfc_k_s = (100.0 * (1.0 - RFC_BETA) / RFC_C).cbrt();
    // Tolerance 1.1 packets: Linux truncates C(t-K)^3 to whole packets
    // (< 1), its C differs from 0.4 by 0.1% of |W - W_max| <= 30 (0.03),
    // and K's < 3 ms error moves W by at most 21 pkt/s x 3 ms (0.06).
    for t_s in [0.0, 1.0, 2.0, 3.0, rfc_k_s, rfc_k_s + 1.0, rfc_k_s + 2.0, rfc_k_s + 3.0] {
        let got = cc.w_cubic_pkts((t_s * 1024.0).round() as u64) as f64;
        let want = rfc_w_cubic(100.0, t_s);
        assert!((got - want).abs() < 1.1, "t = {t_s} s: W {got}, RFC {want}");
    }
}

#[test]
fn the_curve_is_read_one_minimum_rtt_ahead_of_the_epoch_clock() {
    // delay_min 1 s: at the epoch's first ACK the target is W(1 s) = 86.7,
    // not W(0) = 70, so cwnd grows 1 packet per 70 / 16.7 = 4 acked
    // (Linux's target is truncated toward W_max, 86 or 87: cnt 4 either way).
    let (mut cc, mut tcp) =
        after_loss_at(100, SimDuration::from_secs(1), CubicConfig::default());
    tcp.now = secs(10.0);
    cc.cong_avoid(&mut tcp, 0, 1);
    let want = 70.0 / (rfc_w_cubic(100.0, 1.0) - 70.0);
    assert_eq!(cc.cnt, want as u32);
}

#[test]
fn cwnd_follows_the_cubic_curve_through_an_epoch() {
    let rtt = SimDuration::from_millis(100);
    let (mut cc, mut tcp) = after_loss_at(100, rtt, CubicConfig::default());
    tcp.now = secs(10.0);
    let rounds = ack_clock(&mut cc, &mut tcp, rtt, 6.0);
    // Linux aims each ACK at W(t + RTT) and closes the gap over one RTT,
    // so cwnd at a round start lies between W(t) and W(t + RTT), give or
    // take whole packets: below K the truncated C(t-K)^3 rounds the target
    // up toward W_max (< +1); cwnd is an integer and cnt = cwnd / (target
    // - cwnd) is floored (< -2 below).
    for &(t_s, cwnd) in &rounds {
        let low = rfc_w_cubic(100.0, t_s) - 2.0;
        let high = rfc_w_cubic(100.0, t_s + 0.1) + 1.0;
        assert!(
            low <= cwnd as f64 && cwnd as f64 <= high,
            "t {t_s:.1} s: cwnd {cwnd} not in [{low:.1}, {high:.1}]"
        );
    }
    assert!(rounds.last().unwrap().1 > 100, "past K the convex region probes beyond W_max");
}

#[test]
fn fast_convergence_lowers_w_max_when_cwnd_fell_short_of_the_last_one() {
    let mut cc = Cubic::new(CubicConfig::default());
    let mut tcp = tcp_with(100, INFINITE_SSTHRESH);
    cc.init(&mut tcp);
    cc.ssthresh(&tcp);
    assert_eq!(cc.w_max_pkts, 100);
    tcp.snd_cwnd = 80;
    cc.ssthresh(&tcp);
    // RFC 9438 §4.7: W_max = cwnd (1 + beta) / 2 = 68; Linux's 717/1024 gives 68.008, floored.
    let rfc = 80.0 * (1.0 + RFC_BETA) / 2.0;
    assert!((cc.w_max_pkts as f64 - rfc).abs() < 1.0, "W_max {} vs {rfc}", cc.w_max_pkts);
    // A window above the old W_max sets it outright.
    tcp.snd_cwnd = 120;
    cc.ssthresh(&tcp);
    assert_eq!(cc.w_max_pkts, 120);
}

#[test]
fn without_fast_convergence_w_max_is_the_cwnd_at_loss() {
    let mut cc = Cubic::new(CubicConfig { fast_convergence: false, ..CubicConfig::default() });
    let mut tcp = tcp_with(100, INFINITE_SSTHRESH);
    cc.init(&mut tcp);
    cc.ssthresh(&tcp);
    tcp.snd_cwnd = 80;
    cc.ssthresh(&tcp);
    assert_eq!(cc.w_max_pkts, 80);
}

#[test]
fn ssthresh_is_seven_tenths_of_cwnd_and_at_least_two() {
    let mut cc = Cubic::new(CubicConfig::default());
    assert_eq!(cc.ssthresh(&tcp_with(100, 0)), 70);
    assert_eq!(cc.ssthresh(&tcp_with(2, 0)), 2);
    // Linux's 717/1024 exceeds 0.7 by 0.00019, so floor(cwnd x 717/1024)
    // stays within one packet of 0.7 cwnd up to 5000 packets.
    for cwnd in 2..5000u32 {
        let got = cc.ssthresh(&tcp_with(cwnd, 0)) as f64;
        let rfc = (cwnd as f64 * RFC_BETA).max(2.0);
        assert!((got - rfc).abs() < 1.0, "cwnd {cwnd}: ssthresh {got}, 0.7 cwnd {rfc}");
    }
}

#[test]
fn the_reno_friendly_region_takes_over_when_the_cubic_curve_is_below_renos_estimate() {
    // Small W_max, short RTT: Reno gains ~0.53 packet every 10 ms, while
    // the cubic curve needs K = 2.47 s just to climb back to W_max = 20.
    let rtt = SimDuration::from_millis(10);
    let (mut friendly, mut tcp) = after_loss_at(20, rtt, CubicConfig::default());
    let (mut pure, mut tcp_pure) = after_loss_at(
        20,
        rtt,
        CubicConfig { tcp_friendliness: false, ..CubicConfig::default() },
    );
    assert_eq!(tcp.snd_cwnd, 14);
    let rounds = ack_clock(&mut friendly, &mut tcp, rtt, 1.0);
    ack_clock(&mut pure, &mut tcp_pure, rtt, 1.0);

    // RFC 9438 §4.3: W_est grows alpha_cubic = 3(1 - beta)/(1 + beta)
    // per RTT from cwnd_epoch = 14, and cwnd follows it. Bounds:
    // above, Linux's alpha of 8/15 adds 0.4 packet over 100 RTTs and W_est
    // moves in whole packets (+1); below, also whole packets (-1), cwnd
    // trails W_est by one RTT of growth (-0.53), and Linux re-evaluates at
    // most every HZ/32 = 28 ms while cwnd is unchanged, holding back up to
    // 2.8 RTTs of W_est growth (-1.5).
    let alpha = 3.0 * (1.0 - RFC_BETA) / (1.0 + RFC_BETA);
    let w_est = 14.0 + alpha * rounds.len() as f64;
    let cwnd = tcp.snd_cwnd as f64;
    assert!(w_est - 3.0 <= cwnd && cwnd <= w_est + 1.4, "cwnd {cwnd} vs W_est {w_est:.1}");
    // Without the Reno-friendly region cwnd stays on the cubic curve, below W_max.
    let w_cubic = rfc_w_cubic(20.0, 1.0 + 0.01);
    assert!(tcp_pure.snd_cwnd < 20 && (tcp_pure.snd_cwnd as f64 - w_cubic).abs() < 2.0);
}

#[test]
fn cwnd_grows_at_most_one_packet_per_two_acked() {
    let rtt = SimDuration::from_millis(100);
    let (mut cc, mut tcp) = after_loss_at(1000, rtt, CubicConfig::default());
    tcp.snd_cwnd = 100;
    tcp.snd_ssthresh = 100;
    tcp.now = secs(10.0);
    cc.cong_avoid(&mut tcp, 0, 1);
    // 30 s later the curve is thousands of packets above cwnd.
    tcp.now = secs(40.0);
    let before = tcp.snd_cwnd;
    for _ in 0..20 {
        cc.cong_avoid(&mut tcp, 0, 1);
    }
    assert_eq!(tcp.snd_cwnd, before + 10);
}

#[test]
fn before_any_loss_congestion_avoidance_adds_at_least_one_packet_per_20_acked() {
    let mut cc = Cubic::new(CubicConfig::default());
    let mut tcp = tcp_with(100, 50);
    cc.init(&mut tcp);
    tcp.now = secs(1.0);
    for _ in 0..20 {
        cc.cong_avoid(&mut tcp, 0, 1);
    }
    assert_eq!(tcp.snd_cwnd, 101);
}

#[test]
fn an_rto_forgets_w_max_so_the_next_curve_starts_flat_at_cwnd() {
    let (mut cc, mut tcp) =
        after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
    cc.set_state(&mut tcp, CaState::Loss);
    assert_eq!((cc.w_max_pkts, cc.delay_min_us), (0, 0));
    // RFC 9438 §4.8: after a timeout K = 0 and W_max = cwnd at the start of avoidance.
    tcp.snd_cwnd = 30;
    tcp.snd_ssthresh = 20;
    tcp.now = secs(5.0);
    cc.cong_avoid(&mut tcp, 0, 1);
    assert_eq!((cc.k_bic_ticks, cc.origin_point_pkts), (0, 30));
}

#[test]
fn idle_time_before_a_tx_start_shifts_the_epoch() {
    let (mut cc, mut tcp) =
        after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
    tcp.now = secs(1.0);
    cc.cong_avoid(&mut tcp, 0, 1);
    assert_eq!(cc.epoch_start_jiffies, Some(250));
    // Last send at 2 s, sending again at 5 s: 3 s idle, epoch moves to 4 s.
    tcp.next_send_time = secs(2.0);
    tcp.now = secs(5.0);
    cc.cwnd_event(&mut tcp, CwndEvent::TxStart);
    assert_eq!(cc.epoch_start_jiffies, Some(1000));
    // The shift never puts the epoch in the future.
    tcp.next_send_time = secs(0.5);
    tcp.now = secs(6.0);
    cc.cwnd_event(&mut tcp, CwndEvent::TxStart);
    assert_eq!(cc.epoch_start_jiffies, Some(1500));
}

#[test]
fn rtt_samples_in_the_first_second_of_an_epoch_do_not_lower_delay_min() {
    let (mut cc, mut tcp) =
        after_loss_at(100, SimDuration::from_millis(100), CubicConfig::default());
    tcp.now = secs(10.0);
    cc.cong_avoid(&mut tcp, 0, 1);
    tcp.now = secs(10.9);
    cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(50)));
    assert_eq!(cc.delay_min_us, 100_000);
    tcp.now = secs(11.0);
    cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(50)));
    assert_eq!(cc.delay_min_us, 50_000);
}

/// Slow start from cwnd 16 with ACKs 5 ms apart (never an ACK train), the
/// first round at `base_rtt`, later rounds at `later_rtt`. Returns the ACK
/// number at which HyStart ended slow start, if it did within 80 ACKs.
fn slow_start(base_rtt_us: u64, later_rtt_us: u64) -> (Cubic, TcpState, Option<u32>) {
    let mut cc = Cubic::new(CubicConfig::default());
    let mut tcp = tcp_with(16, INFINITE_SSTHRESH);
    tcp.snd_nxt = 16;
    cc.init(&mut tcp);
    for ack in 1..=80u32 {
        tcp.now += SimDuration::from_millis(5);
        tcp.snd_una += 1;
        let rtt_us = if tcp.snd_una <= 16 { base_rtt_us } else { later_rtt_us };
        cc.pkts_acked(&mut tcp, &sample(SimDuration::from_micros(rtt_us)));
        if cc.hystart.exit().is_some() {
            return (cc, tcp, Some(ack));
        }
        let ack_seq = tcp.snd_una;
        cc.cong_avoid(&mut tcp, ack_seq, 1);
        tcp.snd_nxt += 2;
    }
    (cc, tcp, None)
}

#[test]
fn hystart_ends_slow_start_when_the_rtt_rises_past_the_delay_threshold() {
    // delay_min 100 ms: threshold 100 + clamp(100/8, 4, 16) = 112.5 ms.
    let (_, tcp, exit_ack) = slow_start(100_000, 113_000);
    // Round two starts at ACK 17; its 9th sample (ACK 25) is the first judged.
    assert_eq!(exit_ack, Some(25));
    // Exit sets ssthresh = cwnd (16 + 24 acked), ending slow start.
    assert_eq!(tcp.snd_ssthresh, 40);
    assert!(!tcp.in_slow_start());
}

#[test]
fn hystart_keeps_slow_start_when_the_rtt_stays_below_the_delay_threshold() {
    let (cc, tcp, exit_ack) = slow_start(100_000, 112_000);
    assert_eq!(exit_ack, None);
    assert_eq!(cc.hystart.exit(), None);
    assert_eq!((tcp.snd_cwnd, tcp.snd_ssthresh), (96, INFINITE_SSTHRESH));
}

#[test]
fn hystart_is_off_when_disabled() {
    // One round at 100 ms, then a round of 200 ms samples: a clear delay
    // increase that ends slow start only when HyStart is on.
    for hystart in [true, false] {
        let mut cc = Cubic::new(CubicConfig { hystart, ..CubicConfig::default() });
        let mut tcp = tcp_with(32, INFINITE_SSTHRESH);
        tcp.snd_nxt = 32;
        cc.init(&mut tcp);
        cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(100)));
        tcp.snd_una = 33;
        tcp.snd_nxt = 100;
        for _ in 0..20 {
            tcp.now += SimDuration::from_millis(5);
            cc.pkts_acked(&mut tcp, &sample(SimDuration::from_millis(200)));
        }
        let exit = if hystart { Some(HystartExit::DelayIncrease) } else { None };
        assert_eq!(cc.hystart.exit(), exit);
        assert_eq!(tcp.snd_ssthresh == INFINITE_SSTHRESH, !hystart);
    }
}

#[test]
fn cubic_root_is_the_exact_floor() {
    for x in [1u64, 2, 3, 10, 1000, 1 << 20, 2_642_245] {
        let cube = x * x * x;
        assert_eq!(cubic_root(cube), x);
        assert_eq!(cubic_root(cube - 1), x - 1);
        assert_eq!(cubic_root(cube + 1), x);
    }
    assert_eq!(cubic_root(0), 0);
    assert_eq!(cubic_root(u64::MAX), 2_642_245);
}
