//! The ACK-aggregation allowance: extra cwnd for data that arrives acked in
//! bursts (Wi-Fi, stretched ACKs), so sending doesn't stall between bursts
//! (Linux `bbr_update_ack_aggregation`, `bbr_ack_aggregation_cwnd`; Linux-only,
//! added in 5.1). extra_acked = packets acked in the current epoch beyond
//! bw x epoch length, max-filtered over 5-10 rounds.

use super::{us_delta, Bbr, BBR_SCALE, BBR_UNIT, BW_UNIT};
use crate::{RateSample, SimTime, TcpState};

/// `bbr_extra_acked_gain`: the allowance is 1 x extra_acked.
pub(super) const EXTRA_ACKED_GAIN: u32 = BBR_UNIT;
/// `bbr_extra_acked_win_rtts`: each of the two filter slots covers 5 rounds.
pub(crate) const EXTRA_ACKED_WIN_RTTS: u32 = 5;
/// `bbr_ack_epoch_acked_reset_thresh`: restart an epoch this old (in packets).
pub(super) const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
/// `bbr_extra_acked_max_us`: the allowance is at most 100 ms at the estimated bw.
pub(super) const EXTRA_ACKED_MAX_US: u64 = 100_000;
/// Linux keeps `ack_epoch_acked` in 20 bits and the window counter in 5.
const ACK_EPOCH_ACKED_MAX: u32 = 0xF_FFFF;
const EXTRA_ACKED_WIN_RTTS_MAX: u32 = 0x1F;

/// The `ack_epoch_*` and `extra_acked*` fields of Linux `struct bbr`.
#[derive(Clone, Debug, Default)]
pub(crate) struct AckAggregation {
    /// `ack_epoch_mstamp`.
    pub(super) epoch_start: SimTime,
    /// `ack_epoch_acked`: packets (S)ACKed since `epoch_start`.
    epoch_acked: u32,
    /// `extra_acked[2]`: u16 in Linux, which truncates.
    pub(super) extra_acked: [u16; 2],
    win_rtts: u32,
    win_idx: usize,
}

impl AckAggregation {
    /// An empty filter whose first epoch starts at `now` (`bbr_init`).
    pub(crate) fn new(now: SimTime) -> Self {
        AckAggregation { epoch_start: now, ..AckAggregation::default() }
    }

    /// Restart the epoch (`bbr_cwnd_event` on an idle restart).
    pub(crate) fn restart_epoch(&mut self, now: SimTime) {
        self.epoch_start = now;
        self.epoch_acked = 0;
    }

    /// `bbr_extra_acked`: max over the two windows.
    pub(crate) fn extra_acked(&self) -> u32 {
        self.extra_acked[0].max(self.extra_acked[1]) as u32
    }
}

impl AckAggregation {
    /// `bbr_update_ack_aggregation`, given the bandwidth estimate, whether
    /// this ACK starts a round, and the rounds each filter slot covers
    /// (BBRv3 uses 1 before the pipe is full).
    pub(crate) fn update(&mut self, tcp: &TcpState, rs: &RateSample, bw: u64, round_start: bool, win_rtts_thresh: u32) {
        if rs.acked_sacked == 0 || rs.interval.is_none_or(|i| i.as_micros() == 0) {
            return;
        }
        if round_start {
            self.win_rtts = (self.win_rtts + 1).min(EXTRA_ACKED_WIN_RTTS_MAX);
            if self.win_rtts >= win_rtts_thresh {
                self.win_rtts = 0;
                self.win_idx ^= 1;
                self.extra_acked[self.win_idx] = 0;
            }
        }
        // Packets the estimated bw would have delivered over the epoch.
        let epoch_us = us_delta(tcp.delivered_time, self.epoch_start);
        let mut expected_acked = (bw * epoch_us / BW_UNIT) as u32;
        // ACKs at or below the expected rate, or a very old epoch: start anew.
        if self.epoch_acked <= expected_acked || self.epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH {
            self.epoch_acked = 0;
            self.epoch_start = tcp.delivered_time;
            expected_acked = 0;
        }
        self.epoch_acked = (self.epoch_acked + rs.acked_sacked).min(ACK_EPOCH_ACKED_MAX);
        let extra_acked = (self.epoch_acked - expected_acked).min(tcp.snd_cwnd);
        if extra_acked > self.extra_acked[self.win_idx] as u32 {
            self.extra_acked[self.win_idx] = extra_acked as u16;
        }
    }

    /// `bbr_ack_aggregation_cwnd` without v1's full-pipe gate: the allowance,
    /// capped at 100 ms worth of the estimated bandwidth `bw`.
    pub(crate) fn cwnd(&self, bw: u64) -> u32 {
        let max_aggr_cwnd = (bw * EXTRA_ACKED_MAX_US / BW_UNIT) as u32;
        let aggr_cwnd = (EXTRA_ACKED_GAIN * self.extra_acked()) >> BBR_SCALE;
        aggr_cwnd.min(max_aggr_cwnd)
    }
}

impl Bbr {
    /// `bbr_update_ack_aggregation`.
    pub(super) fn update_ack_aggregation(&mut self, tcp: &TcpState, rs: &RateSample) {
        let bw = self.bw();
        self.ack_agg.update(tcp, rs, bw, self.round_start, EXTRA_ACKED_WIN_RTTS);
    }

    /// `bbr_ack_aggregation_cwnd`: the allowance, once the pipe is full,
    /// capped at 100 ms worth of the estimated bandwidth.
    pub(super) fn ack_aggregation_cwnd(&self) -> u32 {
        if !self.full_bw_reached {
            return 0;
        }
        self.ack_agg.cwnd(self.bw())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness, RTT_US};
    use super::*;

    #[test]
    fn acks_at_the_estimated_rate_leave_only_the_truncation_as_extra() {
        let mut h = Harness::in_probe_bw(1);
        h.bbr.ack_agg = AckAggregation::new(h.tcp.delivered_time);
        // One packet per ms at bw 16777 (0.99998 packet/ms): after k ms the
        // expected count is k - 1 (truncated) while k + 1 were acked (the
        // epoch restarts on the first ACK, which counts). Extra stays at 2.
        for _ in 0..50 {
            h.ack(Ack { advance_us: 1_000, ..Ack::one_packet(100) });
        }
        assert_eq!(h.bbr.ack_agg.extra_acked(), 2);
    }

    #[test]
    fn a_burst_of_acks_after_a_silence_is_measured_as_extra() {
        let mut h = Harness::in_probe_bw(1);
        h.bbr.ack_agg = AckAggregation::new(h.tcp.delivered_time);
        // The epoch starts with 1 acked. After 20 ms of silence 19 packets were
        // expected but 1 acked, below the rate, so the epoch restarts; then 40
        // packets acked at once are all extra.
        h.ack(Ack { advance_us: 1_000, ..Ack::one_packet(100) });
        h.ack(Ack { advance_us: 20_000, delivered: 40, interval_us: RTT_US, ..Ack::one_packet(100) });
        assert_eq!(h.bbr.ack_agg.extra_acked(), 40);
        // One more packet 1 ms later: 41 acked, 0 expected.
        h.ack(Ack { advance_us: 1_000, ..Ack::one_packet(100) });
        assert_eq!(h.bbr.ack_agg.extra_acked(), 41);
        assert_eq!(h.bbr.ack_aggregation_cwnd(), 41);
    }

    #[test]
    fn the_allowance_is_capped_at_100_ms_of_the_estimated_bandwidth() {
        let mut h = Harness::in_probe_bw(1);
        h.bbr.ack_agg.extra_acked = [150, 0];
        // 16777 * 100000 / 2^24 = 99.998 -> 99 packets.
        assert_eq!(h.bbr.ack_aggregation_cwnd(), 99);
    }

    #[test]
    fn there_is_no_allowance_before_the_pipe_is_full() {
        let mut h = Harness::new(1);
        h.bbr.ack_agg.extra_acked = [30, 0];
        assert_eq!(h.bbr.ack_aggregation_cwnd(), 0);
    }

    #[test]
    fn the_extra_acked_filter_forgets_a_burst_after_two_five_round_windows() {
        let mut h = Harness::in_probe_bw(1);
        h.bbr.ack_agg.extra_acked = [0, 0];
        h.bbr.ack_agg.win_rtts = 0;
        let idx = h.bbr.ack_agg.win_idx;
        h.bbr.ack_agg.extra_acked[idx] = 60;
        // Rounds with one ACK each carry 50 packets (half a BDP per 100 ms,
        // i.e. below the rate, so each epoch restarts and extra = 50).
        for _ in 0..4 {
            h.round(50, 100);
        }
        assert_eq!(h.bbr.ack_agg.extra_acked(), 60, "four rounds: same window");
        h.round(50, 100); // fifth round start: switch to the other slot
        assert_eq!(h.bbr.ack_agg.extra_acked(), 60, "the old slot still counts");
        for _ in 0..5 {
            h.round(50, 100);
        }
        assert_eq!(h.bbr.ack_agg.extra_acked(), 50, "after ten rounds the burst is gone");
    }
}
