//! cwnd: gain x BDP plus allowances, the TSO quantization budget, and packet
//! conservation in recovery (Linux `bbr_bdp`, `bbr_quantization_budget`,
//! `bbr_inflight`, `bbr_packets_in_net_at_edt`, `bbr_set_cwnd` and friends).

use super::{ca_rank, probe_rtt, Bbr, Mode, BBR_SCALE, BBR_UNIT, BW_SCALE, BW_UNIT, NO_MIN_RTT_US};
use crate::{CaState, RateSample, TcpState, INITIAL_CWND_PKTS};

/// `bbr_min_tso_rate`: below this rate (bit/s) the TSO goal is one segment.
const MIN_TSO_RATE_BPS: u64 = 1_200_000;
/// `sk->sk_pacing_shift` default (`sock_init_data`): TSO bursts of ~1 ms of data.
pub(crate) const PACING_SHIFT: u32 = 10;
/// `GSO_LEGACY_MAX_SIZE - 1 - MAX_TCP_HEADER` (65536 - 1 - 192 on an x86-64
/// kernel without tunnels or Wi-Fi, like the kernel testbed's). Other configs
/// have MAX_TCP_HEADER up to 320 B; at MSS 1448 either gives 45 segments.
pub(crate) const TSO_MAX_BYTES: u64 = 65_536 - 1 - 192;
/// `bbr_tso_segs_goal` caps the goal at 0x7F segments.
const TSO_MAX_SEGS: u32 = 0x7f;

impl Bbr {
    /// `bbr_min_tso_segs`: one segment per burst below 1.2 Mbit/s, else two.
    pub(super) fn min_tso_segs(tcp: &TcpState) -> u32 {
        if tcp.pacing_rate_bytes_per_sec < MIN_TSO_RATE_BPS >> 3 {
            1
        } else {
            2
        }
    }

    /// `bbr_tso_segs_goal`: segments per burst, ~1 ms at the pacing rate
    /// (`sk_pacing_rate >> sk_pacing_shift`). Linux's BBR computes this from
    /// the pacing rate whether or not GSO is on, so we do too.
    pub(super) fn tso_segs_goal(tcp: &TcpState) -> u32 {
        let bytes = (tcp.pacing_rate_bytes_per_sec >> PACING_SHIFT).min(TSO_MAX_BYTES);
        let segs = ((bytes / tcp.mss_bytes as u64) as u32).max(Self::min_tso_segs(tcp));
        segs.min(TSO_MAX_SEGS)
    }

    /// `bbr_bdp`: ceil(bw x min_rtt x gain) in packets; the initial cwnd
    /// before any RTT sample.
    pub(super) fn bdp(&self, bw: u64, gain: u32) -> u32 {
        if self.min_rtt_us == NO_MIN_RTT_US {
            return INITIAL_CWND_PKTS;
        }
        let w = bw * self.min_rtt_us;
        // Round up so that an estimate never shrinks itself (negative feedback).
        (((w * gain as u64) >> BBR_SCALE).div_ceil(BW_UNIT)) as u32
    }

    /// `bbr_quantization_budget`: room for three TSO bursts (qdisc, TSO engine,
    /// receiver GRO), an even cwnd for delayed ACKs, and two extra packets in
    /// the probing phase so that small BDPs still probe.
    fn quantization_budget(&self, tcp: &TcpState, cwnd: u32) -> u32 {
        let mut cwnd = cwnd + 3 * Self::tso_segs_goal(tcp);
        cwnd = (cwnd + 1) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd += 2;
        }
        cwnd
    }

    /// `bbr_inflight`: the in-flight target for a gain.
    pub(super) fn inflight(&self, tcp: &TcpState, bw: u64, gain: u32) -> u32 {
        let bdp = self.bdp(bw, gain);
        self.quantization_budget(tcp, bdp)
    }

    /// `bbr_packets_in_net_at_edt`: packets still in the network when the next
    /// paced packet departs (`tcp_wstamp_ns`), counting that packet when probing up.
    pub(super) fn packets_in_net_at_edt(&self, tcp: &TcpState, inflight_now: u32) -> u32 {
        let edt = tcp.next_send_time.max(tcp.now);
        let interval_us = (edt - tcp.now).as_micros();
        let interval_delivered = ((self.bw() * interval_us) >> BW_SCALE) as u32;
        let mut inflight_at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            inflight_at_edt += Self::tso_segs_goal(tcp);
        }
        inflight_at_edt.saturating_sub(interval_delivered)
    }

    /// `bbr_save_cwnd`: remember the last good cwnd before recovery or PROBE_RTT.
    pub(super) fn save_cwnd(&mut self, tcp: &TcpState) {
        if ca_rank(self.prev_ca_state) < ca_rank(CaState::Recovery) && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = tcp.snd_cwnd;
        } else {
            // Recovery or PROBE_RTT has cut cwnd: keep the larger one.
            self.prior_cwnd = self.prior_cwnd.max(tcp.snd_cwnd);
        }
    }

    /// `bbr_set_cwnd_to_recover_or_restore`: packet conservation in the first
    /// round of recovery, cwnd restore on leaving it. Returns the new cwnd and
    /// whether packet conservation decides it.
    fn set_cwnd_to_recover_or_restore(&mut self, tcp: &TcpState, rs: &RateSample, acked: u32) -> (u32, bool) {
        let prev_state = self.prev_ca_state;
        let state = tcp.ca_state;
        let mut cwnd = tcp.snd_cwnd;
        // An ACK for P packets releases at most 2P: take the losses off here,
        // slow-start back toward the target in set_cwnd.
        if rs.losses > 0 {
            cwnd = (cwnd as i64 - rs.losses as i64).max(1) as u32;
        }
        if state == CaState::Recovery && prev_state != CaState::Recovery {
            // First round of recovery: packet conservation, starting a round now.
            self.packet_conservation = true;
            self.next_rtt_delivered = tcp.delivered;
            cwnd = tcp.packets_in_flight + acked;
        } else if ca_rank(prev_state) >= ca_rank(CaState::Recovery) && ca_rank(state) < ca_rank(CaState::Recovery) {
            // Leaving recovery: restore the cwnd saved when it began.
            cwnd = cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_ca_state = state;
        if self.packet_conservation {
            return (cwnd.max(tcp.packets_in_flight + acked), true);
        }
        (cwnd, false)
    }

    /// `bbr_set_cwnd`: slow-start toward gain x BDP + allowances, or snap down to it.
    pub(super) fn set_cwnd(&mut self, tcp: &mut TcpState, rs: &RateSample, acked: u32, bw: u64, gain: u32) {
        let mut cwnd = tcp.snd_cwnd;
        if acked > 0 {
            let (recover_cwnd, conserving) = self.set_cwnd_to_recover_or_restore(tcp, rs, acked);
            cwnd = recover_cwnd;
            if !conserving {
                let mut target = self.bdp(bw, gain);
                target += self.ack_aggregation_cwnd();
                target = self.quantization_budget(tcp, target);
                if self.full_bw_reached {
                    // Only cut cwnd once the pipe is known to be full.
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || tcp.delivered < INITIAL_CWND_PKTS as u64 {
                    cwnd += acked;
                }
                cwnd = cwnd.max(probe_rtt::CWND_MIN_TARGET_PKTS);
            }
        }
        tcp.snd_cwnd = cwnd.min(tcp.snd_cwnd_clamp);
        if self.mode == Mode::ProbeRtt {
            tcp.snd_cwnd = tcp.snd_cwnd.min(probe_rtt::CWND_MIN_TARGET_PKTS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness, RTT_US};
    use super::*;
    use crate::CongestionControl;


    #[test]
    fn steady_state_cwnd_is_two_bdp_plus_aggregation_and_tso_allowances() {
        let mut h = Harness::cruising();
        h.tcp.snd_cwnd = 300;
        h.ack(Ack::one_packet(200));
        h.ack(Ack::one_packet(200));
        // 2 x BDP = ceil(16777 * 100000 * 512 / 256 / 2^24) = 200; ACKs at the
        // estimated rate leave extra_acked = 2; three TSO bursts of 2 = 6:
        // 208, already even. Above target, cwnd snaps down to it.
        assert_eq!(h.bbr.ack_agg.extra_acked(), 2);
        assert_eq!(h.tcp.snd_cwnd, 208);
        // Below target it grows by the packets acked (1 per ACK).
        h.tcp.snd_cwnd = 150;
        h.ack(Ack::one_packet(200));
        assert_eq!(h.tcp.snd_cwnd, 151);
    }

    #[test]
    fn the_probing_phase_gets_two_more_packets_of_cwnd() {
        let mut h = Harness::cruising();
        h.tcp.snd_cwnd = 300;
        h.set_phase(0);
        h.ack(Ack::one_packet(200));
        h.ack(Ack::one_packet(200));
        assert_eq!(h.bbr.cycle_idx, 0);
        assert_eq!(h.tcp.snd_cwnd, 210);
    }

    #[test]
    fn aggregated_acks_raise_the_cwnd_target() {
        let mut h = Harness::cruising();
        h.tcp.snd_cwnd = 300;
        h.ack(Ack::one_packet(200));
        // 20 ms of silence then a 40-packet stretch ACK: extra_acked = 40.
        h.ack(Ack { advance_us: 20_000, delivered: 40, interval_us: RTT_US, ..Ack::one_packet(200) });
        // 200 + 40 + 6 = 246.
        assert_eq!(h.tcp.snd_cwnd, 246);
    }

    #[test]
    fn the_first_round_of_recovery_conserves_packets_then_cwnd_is_restored() {
        let mut h = Harness::cruising();
        h.ack(Ack::one_packet(200));
        h.ack(Ack::one_packet(200));
        assert_eq!(h.tcp.snd_cwnd, 208);
        // Entering recovery: ssthresh saves cwnd and leaves ssthresh alone.
        let ssthresh = h.tcp.snd_ssthresh;
        assert_eq!(h.bbr.ssthresh(&h.tcp), ssthresh);
        assert_eq!(h.bbr.prior_cwnd, 208);
        h.tcp.ca_state = CaState::Recovery;
        // 3 losses, 1 acked, 150 left in flight: cwnd = in_flight + acked = 151.
        h.ack(Ack { losses: 3, in_flight: 150, ..Ack::one_packet(154) });
        assert!(h.bbr.packet_conservation);
        assert_eq!(h.tcp.snd_cwnd, 151);
        let round_end = h.tcp.delivered;
        // Same round: one packet out per packet acked; a loss takes one off.
        h.ack(Ack { prior_delivered: Some(round_end - 1), losses: 1, in_flight: 149, ..Ack::one_packet(151) });
        assert_eq!(h.tcp.snd_cwnd, 150);
        // Next round: conservation ends, cwnd slow-starts toward the target.
        h.ack(Ack { prior_delivered: Some(round_end), in_flight: 149, ..Ack::one_packet(150) });
        assert!(!h.bbr.packet_conservation);
        assert_eq!(h.tcp.snd_cwnd, 151);
        // Recovery ends: the saved cwnd (208) comes back (the target is still 208).
        h.tcp.ca_state = CaState::Open;
        h.ack(Ack::one_packet(150));
        assert_eq!(h.tcp.snd_cwnd, 208);
    }

    #[test]
    fn probe_rtt_saves_the_larger_of_the_recovery_and_current_cwnd() {
        let mut h = Harness::cruising();
        h.bbr.prior_cwnd = 500;
        h.bbr.mode = Mode::ProbeRtt;
        h.bbr.save_cwnd(&h.tcp);
        assert_eq!(h.bbr.prior_cwnd, 500);
    }

    #[test]
    fn the_tso_goal_is_a_millisecond_of_pacing_within_its_bounds() {
        let mut tcp = TcpState::new(1448);
        tcp.pacing_rate_bytes_per_sec = 149_999; // below 1.2 Mbit/s
        assert_eq!(Bbr::tso_segs_goal(&tcp), 1);
        tcp.pacing_rate_bytes_per_sec = 150_000;
        assert_eq!(Bbr::tso_segs_goal(&tcp), 2);
        // 12.5 MB/s (100 Mbit/s) >> 10 = 12207 B = 8 segments of 1448 B.
        tcp.pacing_rate_bytes_per_sec = 12_500_000;
        assert_eq!(Bbr::tso_segs_goal(&tcp), 8);
        // 125 MB/s >> 10 = 122070 B, capped at 65343 B = 45 segments.
        tcp.pacing_rate_bytes_per_sec = 125_000_000;
        assert_eq!(Bbr::tso_segs_goal(&tcp), 45);
        tcp.mss_bytes = 100;
        assert_eq!(Bbr::tso_segs_goal(&tcp), 127);
    }
}
