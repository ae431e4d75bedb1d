//! HyStart (hybrid slow start) as Linux `net/ipv4/tcp_cubic.c` (v2.3, as in
//! Linux 6.18) implements it: `bictcp_hystart_reset`, `hystart_update` and
//! `hystart_ack_delay`, after Ha and Rhee, "Taming the Elephants: New TCP
//! Slow Start" (Computer Networks, 2011).
//!
//! RFC 9438 §4.10 says CUBIC SHOULD use HyStart++ (RFC 9406). Linux does not:
//! it runs this original HyStart, which ends slow start for good (until an
//! RTO) by setting ssthresh = cwnd, with no conservative slow start after it.
//! We follow Linux.
//!
//! Two detectors run on each RTT sample while in slow start with cwnd of at
//! least [`HYSTART_LOW_WINDOW_PKTS`]:
//! - ACK train: ACKs keep arriving closely spaced for longer than half the
//!   minimum RTT after the round began, so the pipe is about full.
//! - Delay increase: the minimum RTT of this round's first
//!   [`HYSTART_MIN_SAMPLES`] samples exceeds the connection's minimum RTT by
//!   a threshold, so a queue is building.
//!
//! Time is in microseconds, as Linux's `bictcp_clock_us` (`tp->tcp_mstamp`).
//! Linux keeps it in a wrapping `u32`; we use `u64`, which never wraps.

use crate::TcpState;

/// `HYSTART_MIN_SAMPLES`: delay samples a round needs before its minimum is trusted.
pub const HYSTART_MIN_SAMPLES: u8 = 8;
/// `HYSTART_DELAY_MIN`: lower clamp of the delay-increase threshold (4 ms).
pub const HYSTART_DELAY_MIN_US: u64 = 4_000;
/// `HYSTART_DELAY_MAX`: upper clamp of the delay-increase threshold (16 ms).
pub const HYSTART_DELAY_MAX_US: u64 = 16_000;
/// Module parameter `hystart_low_window`: HyStart only acts at cwnd >= 16 packets.
pub const HYSTART_LOW_WINDOW_PKTS: u32 = 16;
/// Module parameter `hystart_ack_delta_us`: ACKs at most 2 ms apart form a train.
pub const HYSTART_ACK_DELTA_US: u64 = 2_000;
/// `hystart_ack_delay` caps its TSO/GRO cushion at 1 ms (`USEC_PER_MSEC`).
pub const HYSTART_ACK_DELAY_CAP_US: u64 = 1_000;
/// A veth's `gso_ipv4_max_size` (`GSO_LEGACY_MAX_SIZE`), which `sk_dst_gso_max_size`
/// hands TCP less `MAX_TCP_HEADER + 1` bytes of header room; the room (a few hundred
/// bytes, by kernel config) is left out: it moves the cushion only above the cap.
pub const TCP_GSO_MAX_SIZE_BYTES: u32 = 65_536;

/// The module parameters `hystart_detect`, `hystart_low_window`,
/// `hystart_ack_delta_us`, plus the socket's GSO size used by `hystart_ack_delay`.
#[derive(Clone, Debug, PartialEq)]
pub struct HystartParams {
    /// `hystart_detect & HYSTART_ACK_TRAIN` (Linux default: on).
    pub ack_train: bool,
    /// `hystart_detect & HYSTART_DELAY` (Linux default: on).
    pub delay: bool,
    pub low_window_pkts: u32,
    pub ack_delta_us: u64,
    /// `sk->sk_gso_max_size`. Default [`TCP_GSO_MAX_SIZE_BYTES`]: `sk_setup_caps`
    /// sets `NETIF_F_GSO` on every TCP socket whatever the device offers, so the
    /// size comes from the device even with GSO off there (the kernel engine's
    /// senders), and `hystart_ack_delay` is its 1 ms cap below about 2 Gbit/s.
    /// 0 turns the cushion off.
    pub gso_max_size_bytes: u32,
}

impl Default for HystartParams {
    fn default() -> Self {
        HystartParams {
            ack_train: true,
            delay: true,
            low_window_pkts: HYSTART_LOW_WINDOW_PKTS,
            ack_delta_us: HYSTART_ACK_DELTA_US,
            gso_max_size_bytes: TCP_GSO_MAX_SIZE_BYTES,
        }
    }
}

/// Which detector ended slow start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HystartExit {
    AckTrain,
    DelayIncrease,
}

/// HyStart's part of Linux `struct bictcp`.
#[derive(Clone, Debug)]
pub struct Hystart {
    params: HystartParams,
    /// `found`: the exit point was found; HyStart stays off until reset.
    exit: Option<HystartExit>,
    /// `round_start`: when the current round (one window of data) began.
    round_start_us: u64,
    /// `end_seq`: `snd_nxt` when the round began; the round ends once it is acked.
    end_seq: u64,
    /// `last_ack`: arrival of the last ACK that was part of a train.
    last_ack_us: u64,
    /// `curr_rtt`: minimum RTT seen so far in this round.
    curr_rtt_us: u64,
    /// `sample_cnt`: RTT samples taken in this round (up to the minimum).
    sample_cnt: u8,
}

fn now_us(tcp: &TcpState) -> u64 {
    tcp.now.as_nanos() / crate::time::NANOS_PER_MICRO
}

impl Hystart {
    pub fn new(params: HystartParams) -> Self {
        Hystart {
            params,
            exit: None,
            round_start_us: 0,
            end_seq: 0,
            last_ack_us: 0,
            curr_rtt_us: u64::MAX,
            sample_cnt: 0,
        }
    }

    /// Which detector fired, if any has since the last [`Hystart::restart`].
    pub fn exit(&self) -> Option<HystartExit> {
        self.exit
    }

    /// Linux `bictcp_reset` clearing `found`, then `bictcp_hystart_reset`
    /// (done at init and on entering Loss).
    pub fn restart(&mut self, tcp: &TcpState) {
        self.exit = None;
        self.reset_round(tcp);
    }

    /// Linux `bictcp_hystart_reset`: a new round starts now and ends when
    /// everything sent so far is acknowledged.
    pub fn reset_round(&mut self, tcp: &TcpState) {
        let now = now_us(tcp);
        self.round_start_us = now;
        self.last_ack_us = now;
        self.end_seq = tcp.snd_nxt;
        self.curr_rtt_us = u64::MAX;
        self.sample_cnt = 0;
    }

    /// Linux `hystart_update`, called by CUBIC's `pkts_acked` for each RTT
    /// sample while in slow start and not yet found. `delay_min_us` is CUBIC's
    /// minimum RTT (already updated with this sample). On exit sets
    /// ssthresh = cwnd, which ends slow start.
    pub fn on_rtt_sample(&mut self, tcp: &mut TcpState, delay_us: u64, delay_min_us: u64) {
        // Linux `after(tp->snd_una, ca->end_seq)`: the round's data is all acked.
        if tcp.snd_una > self.end_seq {
            self.reset_round(tcp);
        }
        // Rounds are tracked from the start, detection only from the low window up.
        if tcp.snd_cwnd < self.params.low_window_pkts {
            return;
        }
        if self.params.ack_train {
            let now = now_us(tcp);
            if now.saturating_sub(self.last_ack_us) <= self.params.ack_delta_us {
                self.last_ack_us = now;
                let ack_delay_us =
                    ack_delay_us(tcp.pacing_rate_bytes_per_sec, self.params.gso_max_size_bytes);
                // The train has lasted longer than delay_min/2: the first ACK of
                // the round left about half an RTT ago, so the pipe is full.
                // Linux halves only for SK_PACING_NONE: "Pacing might have delayed
                // packets up to RTT/2 during slow start" (fq on the sender).
                let threshold_us = if tcp.paced { delay_min_us + ack_delay_us } else { (delay_min_us + ack_delay_us) >> 1 };
                if now.saturating_sub(self.round_start_us) > threshold_us {
                    self.exit = Some(HystartExit::AckTrain);
                    tcp.snd_ssthresh = tcp.snd_cwnd;
                }
            }
        }
        if self.params.delay {
            self.curr_rtt_us = self.curr_rtt_us.min(delay_us);
            if self.sample_cnt < HYSTART_MIN_SAMPLES {
                self.sample_cnt += 1;
            } else {
                // HYSTART_DELAY_THRESH: eta = clamp(delay_min / 8, 4 ms, 16 ms).
                let eta_us = (delay_min_us >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
                if self.curr_rtt_us > delay_min_us + eta_us {
                    self.exit = Some(HystartExit::DelayIncrease);
                    tcp.snd_ssthresh = tcp.snd_cwnd;
                }
            }
        }
    }
}

/// Linux `hystart_ack_delay`: a cushion for TSO/GRO aggregation delays,
/// 4 GSO-sized bursts at the pacing rate, capped at 1 ms; 0 without a rate.
pub fn ack_delay_us(pacing_rate_bytes_per_sec: u64, gso_max_size_bytes: u32) -> u64 {
    if pacing_rate_bytes_per_sec == 0 {
        return 0;
    }
    let cushion_us = gso_max_size_bytes as u128 * 4 * 1_000_000 / pacing_rate_bytes_per_sec as u128;
    cushion_us.min(HYSTART_ACK_DELAY_CAP_US as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{SimDuration, SimTime, INFINITE_SSTHRESH};

    fn slow_start_state(cwnd: u32) -> TcpState {
        let mut tcp = TcpState::new(1448);
        tcp.snd_cwnd = cwnd;
        tcp.snd_ssthresh = INFINITE_SSTHRESH;
        tcp
    }

    fn at(tcp: &mut TcpState, ms: u64) {
        tcp.now = SimTime::ZERO + SimDuration::from_millis(ms);
    }

    #[test]
    fn the_delay_threshold_is_an_eighth_of_min_rtt_clamped_to_4_and_16_ms() {
        // delay_min 20 ms -> eta 2.5 ms, clamped up to 4 ms: 23.9 ms is no exit, 24.1 ms is.
        for (rtt_us, exits) in [(23_900, false), (24_100, true)] {
            let mut tcp = slow_start_state(20);
            let mut hs = Hystart::new(HystartParams { ack_train: false, ..Default::default() });
            hs.restart(&tcp);
            for i in 0..=HYSTART_MIN_SAMPLES as u64 {
                at(&mut tcp, 10 * i);
                hs.on_rtt_sample(&mut tcp, rtt_us, 20_000);
            }
            assert_eq!(hs.exit().is_some(), exits, "rtt {rtt_us} us");
        }
        // delay_min 200 ms -> eta 25 ms, clamped down to 16 ms.
        let mut tcp = slow_start_state(20);
        let mut hs = Hystart::new(HystartParams { ack_train: false, ..Default::default() });
        hs.restart(&tcp);
        for i in 0..=HYSTART_MIN_SAMPLES as u64 {
            at(&mut tcp, 10 * i);
            hs.on_rtt_sample(&mut tcp, 216_100, 200_000);
        }
        assert_eq!(hs.exit(), Some(HystartExit::DelayIncrease));
        assert_eq!(tcp.snd_ssthresh, 20);
    }

    #[test]
    fn the_delay_detector_needs_more_than_eight_samples_in_a_round() {
        let mut tcp = slow_start_state(20);
        let mut hs = Hystart::new(HystartParams { ack_train: false, ..Default::default() });
        hs.restart(&tcp);
        for i in 0..HYSTART_MIN_SAMPLES as u64 {
            at(&mut tcp, 10 * i);
            hs.on_rtt_sample(&mut tcp, 150_000, 100_000);
        }
        assert_eq!(hs.exit(), None);
        hs.on_rtt_sample(&mut tcp, 150_000, 100_000);
        assert_eq!(hs.exit(), Some(HystartExit::DelayIncrease));
    }

    #[test]
    fn a_paced_rate_adds_the_gso_cushion_to_the_ack_train_threshold() {
        // tcp_update_pacing_rate gives CUBIC a rate, so hystart_ack_delay is its 1 ms cap:
        // delay_min 20 ms, threshold (20 + 1) / 2 = 10.5 ms. A train of ACKs 0.5 ms apart
        // ends slow start after 10.5 ms, not after 10.
        let exit_after_us = |rate_bytes_per_sec: u64| {
            let mut tcp = slow_start_state(32);
            tcp.pacing_rate_bytes_per_sec = rate_bytes_per_sec;
            let mut hs = Hystart::new(HystartParams { delay: false, ..Default::default() });
            hs.restart(&tcp);
            for step in 1..=40u64 {
                tcp.now = SimTime::ZERO + SimDuration::from_micros(500 * step);
                hs.on_rtt_sample(&mut tcp, 20_000, 20_000);
                if hs.exit().is_some() {
                    return 500 * step;
                }
            }
            panic!("no exit")
        };
        assert_eq!(exit_after_us(u64::MAX), 10_500, "no rate yet: no cushion, first ACK past 10 ms");
        assert_eq!(exit_after_us(12_500_000), 11_000, "100 Mbit/s: 1 ms cushion, first ACK past 10.5 ms");
    }

    #[test]
    fn a_train_of_close_acks_longer_than_half_the_min_rtt_ends_slow_start() {
        // delay_min 20 ms: threshold 10 ms. ACKs 1 ms apart from round start.
        let mut tcp = slow_start_state(32);
        let mut hs = Hystart::new(HystartParams { delay: false, ..Default::default() });
        hs.restart(&tcp);
        for ms in 1..=10 {
            at(&mut tcp, ms);
            hs.on_rtt_sample(&mut tcp, 20_000, 20_000);
            assert_eq!(hs.exit(), None, "at {ms} ms the train is not past 10 ms yet");
        }
        at(&mut tcp, 11);
        hs.on_rtt_sample(&mut tcp, 20_000, 20_000);
        assert_eq!(hs.exit(), Some(HystartExit::AckTrain));
        assert_eq!(tcp.snd_ssthresh, 32);
    }

    #[test]
    fn a_paced_socket_waits_a_whole_min_rtt_of_ack_train() {
        // fq on the sender paces slow start: its ACK train may span half an RTT without a full
        // pipe, so Linux does not halve the threshold (sk_pacing_status != SK_PACING_NONE).
        let mut tcp = slow_start_state(32);
        tcp.paced = true;
        let mut hs = Hystart::new(HystartParams { delay: false, ..Default::default() });
        hs.restart(&tcp);
        for ms in 1..=20 {
            at(&mut tcp, ms);
            hs.on_rtt_sample(&mut tcp, 20_000, 20_000);
            assert_eq!(hs.exit(), None, "at {ms} ms the train is not past 20 ms yet");
        }
        at(&mut tcp, 21);
        hs.on_rtt_sample(&mut tcp, 20_000, 20_000);
        assert_eq!(hs.exit(), Some(HystartExit::AckTrain));
    }

    #[test]
    fn acks_further_apart_than_the_ack_delta_are_not_a_train() {
        let mut tcp = slow_start_state(32);
        let mut hs = Hystart::new(HystartParams { delay: false, ..Default::default() });
        hs.restart(&tcp);
        for i in 1..=20 {
            at(&mut tcp, 3 * i);
            hs.on_rtt_sample(&mut tcp, 20_000, 20_000);
        }
        assert_eq!(hs.exit(), None);
        assert_eq!(tcp.snd_ssthresh, INFINITE_SSTHRESH);
    }

    #[test]
    fn nothing_is_detected_below_the_low_window() {
        let mut tcp = slow_start_state(HYSTART_LOW_WINDOW_PKTS - 1);
        let mut hs = Hystart::new(HystartParams::default());
        hs.restart(&tcp);
        for ms in 0..40 {
            at(&mut tcp, ms);
            hs.on_rtt_sample(&mut tcp, 90_000, 20_000);
        }
        assert_eq!(hs.exit(), None);
    }

    #[test]
    fn a_round_ends_when_snd_una_passes_the_snd_nxt_of_its_start() {
        let mut tcp = slow_start_state(20);
        tcp.snd_nxt = 20;
        let mut hs = Hystart::new(HystartParams { ack_train: false, ..Default::default() });
        hs.restart(&tcp);
        // Five high samples in round one, then the round ends: round two starts
        // counting afresh, so four more high samples are not yet enough.
        for i in 0..5 {
            hs.on_rtt_sample(&mut tcp, 150_000, 100_000);
            tcp.snd_una = i;
        }
        tcp.snd_una = 21;
        tcp.snd_nxt = 60;
        for _ in 0..4 {
            hs.on_rtt_sample(&mut tcp, 150_000, 100_000);
        }
        assert_eq!(hs.exit(), None);
        assert_eq!(hs.end_seq, 60);
    }

    #[test]
    fn the_ack_delay_cushion_is_four_gso_bursts_at_the_pacing_rate_capped_at_1_ms() {
        // 64 KiB x 4 at 1 GB/s = 262 us; at 100 MB/s it would be 2.6 ms, capped.
        assert_eq!(ack_delay_us(1_000_000_000, 65_536), 262);
        assert_eq!(ack_delay_us(100_000_000, 65_536), 1_000);
        assert_eq!(ack_delay_us(0, 65_536), 0);
        assert_eq!(ack_delay_us(1_000_000_000, 0), 0);
    }
}
