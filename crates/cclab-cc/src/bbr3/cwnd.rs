//! cwnd: gain x BDP plus the ACK-aggregation and TSO allowances (v3
//! `bbr_bdp`, `bbr_quantization_budget`, `bbr_inflight`, `bbr_tso_segs_goal`,
//! `bbr_packets_in_net_at_edt`, `bbr_set_cwnd`, `bbr_save_cwnd`). Unlike
//! BBRv1 there is no packet conservation in recovery: v2/v3 bound cwnd by
//! the loss-driven model instead (`bounds`).

use super::{Bbr3, Mode, Phase, Version};
use crate::bbr::cwnd::{PACING_SHIFT, TSO_MAX_BYTES};
use crate::bbr::{ca_rank, BBR_SCALE, BBR_UNIT, BW_SCALE, BW_UNIT, NO_MIN_RTT_US};
use crate::{CaState, TcpState};

/// `bbr_tso_rtt_shift` = 9: halve the min_rtt-based burst allowance per 512 us.
const TSO_RTT_SHIFT: u32 = 9;
/// `GSO_LEGACY_MAX_SIZE`: the min_rtt-based allowance is 64 KB / 2^(min_rtt/512us).
const GSO_LEGACY_MAX_SIZE: u64 = 65_536;
/// `sysctl_tcp_min_tso_segs` default (v3's floor).
const TCP_MIN_TSO_SEGS: u32 = 2;
/// v2alpha `bbr_min_tso_rate` (bit/s): one segment per burst below it.
const V2_MIN_TSO_RATE_BPS: u64 = 1_200_000;

impl Bbr3 {
    /// v3: `sysctl_tcp_min_tso_segs`; v2alpha: `bbr_min_tso_segs`.
    pub(super) fn min_tso_segs_for(&self, tcp: &TcpState) -> u32 {
        match self.p.version {
            Version::V3 => TCP_MIN_TSO_SEGS,
            Version::V2Alpha if tcp.pacing_rate_bytes_per_sec < V2_MIN_TSO_RATE_BPS >> 3 => 1,
            Version::V2Alpha => 2,
        }
    }

    /// `bbr_tso_segs_goal` (`bbr_tso_segs_generic` at GSO_LEGACY_MAX_SIZE):
    /// ~1 ms at the pacing rate, plus a burst allowance on short paths.
    pub(super) fn tso_segs_goal(&self, tcp: &TcpState) -> u32 {
        let mut bytes = tcp.pacing_rate_bytes_per_sec >> PACING_SHIFT;
        let r = self.min_rtt_us >> TSO_RTT_SHIFT;
        if r < 32 {
            bytes += GSO_LEGACY_MAX_SIZE >> r;
        }
        let bytes = bytes.min(TSO_MAX_BYTES);
        ((bytes / tcp.mss_bytes as u64) as u32).max(self.min_tso_segs_for(tcp))
    }

    /// `bbr_bdp`: ceil(bw x min_rtt x gain); the initial cwnd without an RTT.
    pub(super) fn bdp(&self, bw: u64, gain: u32) -> u32 {
        if self.min_rtt_us == NO_MIN_RTT_US {
            return self.init_cwnd;
        }
        let w = bw * self.min_rtt_us;
        ((w * gain as u64) >> BBR_SCALE).div_ceil(BW_UNIT) as u32
    }

    /// `bbr_quantization_budget`: at least three TSO bursts and the minimum
    /// cwnd, and two more packets while probing up so small BDPs still probe.
    pub(super) fn quantization_budget(&self, tcp: &TcpState, cwnd: u32) -> u32 {
        let mut cwnd = cwnd.max(3 * self.tso_segs_goal(tcp)).max(self.p.cwnd_min_target);
        if self.mode == Mode::ProbeBw && self.cycle_idx == Phase::Up {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`.
    pub(super) fn inflight(&self, tcp: &TcpState, bw: u64, gain: u32) -> u32 {
        self.quantization_budget(tcp, self.bdp(bw, gain))
    }

    /// `bbr_target_inflight`: the BDP, unless congestion cut cwnd below it.
    pub(super) fn target_inflight(&self, tcp: &TcpState) -> u32 {
        self.inflight(tcp, self.bw(), BBR_UNIT).min(tcp.snd_cwnd)
    }

    /// `bbr_packets_in_net_at_edt`: packets still in the network when the
    /// next paced packet leaves, counting it when probing up.
    pub(super) fn packets_in_net_at_edt(&self, tcp: &TcpState, inflight_now: u32) -> u32 {
        let edt = tcp.next_send_time.max(tcp.now);
        let interval_us = (edt - tcp.now).as_micros();
        let interval_delivered = ((self.bw() * interval_us) >> BW_SCALE) as u32;
        let mut inflight_at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            inflight_at_edt += self.tso_segs_goal(tcp);
        }
        inflight_at_edt.saturating_sub(interval_delivered)
    }

    /// `bbr_save_cwnd`.
    pub(super) fn save_cwnd(&mut self, tcp: &TcpState) {
        if ca_rank(self.prev_ca_state) < ca_rank(CaState::Recovery) && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = tcp.snd_cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(tcp.snd_cwnd);
        }
    }

    /// `bbr_probe_rtt_cwnd`: half the BDP, at least the minimum cwnd.
    pub(super) fn probe_rtt_cwnd(&self) -> u32 {
        self.bdp(self.bw(), self.p.probe_rtt_cwnd_gain).max(self.p.cwnd_min_target)
    }

    /// `bbr_set_cwnd`: slow-start toward gain x BDP + allowances, or snap down
    /// to it once the pipe is full; PROBE_RTT caps it.
    pub(super) fn set_cwnd(&mut self, tcp: &mut TcpState, acked: u32, bw: u64, gain: u32) {
        let mut cwnd = tcp.snd_cwnd;
        if acked > 0 {
            let mut target = self.bdp(bw, gain);
            target += self.ack_agg.cwnd(self.bw());
            target = self.quantization_budget(tcp, target);
            self.try_fast_path = false;
            if self.full_bw_reached {
                cwnd += acked;
                if cwnd >= target {
                    cwnd = target;
                    self.try_fast_path = true;
                }
            } else if cwnd < target || cwnd < 2 * self.init_cwnd {
                cwnd += acked;
            } else {
                self.try_fast_path = true;
            }
            cwnd = cwnd.max(self.p.cwnd_min_target);
        }
        tcp.snd_cwnd = cwnd.min(tcp.snd_cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            tcp.snd_cwnd = tcp.snd_cwnd.min(self.probe_rtt_cwnd());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Harness;
    use super::super::Params;
    use super::*;

    #[test]
    fn v3_bursts_hold_at_least_two_segments_and_grow_on_short_paths() {
        let mut h = Harness::cruising(Params::V3);
        h.tcp.pacing_rate_bytes_per_sec = 100_000; // 0.8 Mbit/s
        assert_eq!(h.bbr.tso_segs_goal(&h.tcp), 2, "sysctl_tcp_min_tso_segs, not v1's 1");
        let mut v2 = Harness::cruising(Params::V2ALPHA);
        v2.tcp.pacing_rate_bytes_per_sec = 100_000;
        assert_eq!(v2.bbr.tso_segs_goal(&v2.tcp), 1);
        // 12.5 MB/s >> 10 = 12207 B; min_rtt 100 ms adds nothing: 12 x 1000 B.
        h.tcp.pacing_rate_bytes_per_sec = 12_500_000;
        assert_eq!(h.bbr.tso_segs_goal(&h.tcp), 12);
        // min_rtt 1 ms: + 65536 >> 1 = 32768 B more.
        h.bbr.min_rtt_us = 1_000;
        assert_eq!(h.bbr.tso_segs_goal(&h.tcp), 44);
    }

    #[test]
    fn probe_rtt_holds_cwnd_at_half_the_bdp() {
        let mut h = Harness::cruising(Params::V3);
        // bw 1 packet/ms, min_rtt 100 ms: BDP 100, half of it 50.
        assert_eq!(h.bbr.probe_rtt_cwnd(), 50);
        h.bbr.mode = Mode::ProbeRtt;
        h.tcp.snd_cwnd = 300;
        h.bbr.set_cwnd(&mut h.tcp, 1, h.bbr.bw(), BBR_UNIT);
        assert_eq!(h.tcp.snd_cwnd, 50);
    }
}
