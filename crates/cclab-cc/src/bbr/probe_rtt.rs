//! The min-RTT filter and PROBE_RTT: when min_rtt is 10 s old, cut in-flight
//! to 4 packets for 200 ms and one round to re-measure the path's base RTT
//! (Linux `bbr_update_min_rtt`, `bbr_check_probe_rtt_done`).
//!
//! Throughout PROBE_RTT BBR marks the connection app-limited
//! (`tp->app_limited = delivered + in_flight`), so that the low delivery rates
//! of packets sent then don't count against the bandwidth model.

use super::{Bbr, Mode};
use crate::{RateSample, TcpState};

/// `bbr_min_rtt_win_sec`: lifetime of a min-RTT sample.
pub(super) const MIN_RTT_WIN_SEC: u64 = 10;
/// `bbr_probe_rtt_mode_ms`: least time spent at the minimum cwnd.
pub(super) const PROBE_RTT_MODE_MS: u64 = 200;
/// `bbr_cwnd_min_target`: the minimum cwnd, and PROBE_RTT's cwnd. Two
/// two-packet flights keep the pipe going under ACK-every-other-packet.
pub(super) const CWND_MIN_TARGET_PKTS: u32 = 4;

impl Bbr {
    /// `bbr_update_min_rtt`.
    pub(super) fn update_min_rtt(&mut self, tcp: &mut TcpState, rs: &RateSample) {
        let now = self.jiffies(tcp.now);
        let filter_expired = now > self.min_rtt_stamp + MIN_RTT_WIN_SEC * self.config.hz as u64;
        if let Some(rtt) = rs.rtt {
            let rtt_us = rtt.as_micros();
            // Strictly lower (Linux >= 5.10): equal samples, e.g. the ms-granular
            // RTTs of retransmissions, must not postpone PROBE_RTT forever.
            if rtt_us < self.min_rtt_us || (filter_expired && !rs.is_ack_delayed) {
                self.min_rtt_us = rtt_us;
                self.min_rtt_stamp = now;
            }
        }

        if filter_expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            // Linux saves after switching mode, so this keeps the larger of the
            // saved and current cwnd.
            self.save_cwnd(tcp);
            self.probe_rtt_done_stamp = None;
        }

        if self.mode == Mode::ProbeRtt {
            // Ignore the low-rate samples of this mode.
            tcp.app_limited = (tcp.delivered + tcp.packets_in_flight as u64).max(1);
            // Hold the minimum in-flight for max(200 ms, one round).
            if self.probe_rtt_done_stamp.is_none() && tcp.packets_in_flight <= CWND_MIN_TARGET_PKTS {
                self.probe_rtt_done_stamp = Some(now + self.msecs_to_jiffies(PROBE_RTT_MODE_MS));
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = tcp.delivered;
            } else if self.probe_rtt_done_stamp.is_some() {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(tcp);
                }
            }
        }
        // An idle restart ends with the first ACK that delivers data.
        if rs.delivered > 0 {
            self.idle_restart = false;
        }
    }

    /// `bbr_check_probe_rtt_done`: after the 200 ms, restore cwnd and go back
    /// to STARTUP or PROBE_BW.
    pub(super) fn check_probe_rtt_done(&mut self, tcp: &mut TcpState) {
        let now = self.jiffies(tcp.now);
        match self.probe_rtt_done_stamp {
            Some(done) if now > done => {}
            _ => return,
        }
        self.min_rtt_stamp = now; // the next PROBE_RTT is 10 s away
        tcp.snd_cwnd = tcp.snd_cwnd.max(self.prior_cwnd);
        self.reset_mode(tcp);
    }

    /// `bbr_reset_mode`.
    fn reset_mode(&mut self, tcp: &TcpState) {
        if self.full_bw_reached {
            self.reset_probe_bw_mode(tcp);
        } else {
            self.reset_startup_mode();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{Ack, Harness, RTT_US};
    use super::*;
    use crate::{CongestionControl, CwndEvent, SimTime};

    /// A PROBE_BW flow whose min_rtt (100 ms) was taken at t = 0 and is never
    /// beaten, with ACKs whose RTT is 120 ms.
    fn steady() -> Harness {
        let h = Harness::in_probe_bw(1);
        assert_eq!(h.bbr.min_rtt_stamp, 0);
        h
    }

    /// An ACK at time `t` (RTT 120 ms) for a packet sent after the current
    /// round began, so it starts a new round.
    fn ack_at(h: &mut Harness, t: SimTime, in_flight: u32) {
        let advance_us = (t - h.tcp.now).as_micros();
        let prior_delivered = Some(h.tcp.delivered);
        h.ack(Ack { advance_us, prior_delivered, rtt_us: Some(120_000), ..Ack::one_packet(in_flight + 1) });
    }

    #[test]
    fn probe_rtt_starts_when_min_rtt_is_more_than_ten_seconds_old() {
        let mut h = steady();
        // HZ = 250: 10 s is 2500 jiffies, and the filter expires when jiffies > 2500.
        ack_at(&mut h, SimTime(10_003_999_999), 150);
        assert_eq!(h.bbr.mode(), Mode::ProbeBw, "jiffy 2500 is not yet past the window");
        assert_eq!(h.bbr.min_rtt_us, 100_000);
        let cwnd_before = h.tcp.snd_cwnd;
        ack_at(&mut h, SimTime(10_004_000_000), 150);
        assert_eq!(h.bbr.mode(), Mode::ProbeRtt);
        // The expired filter takes the current sample and restarts its clock.
        assert_eq!(h.bbr.min_rtt_us, 120_000);
        assert_eq!(h.bbr.min_rtt_stamp, 2501);
        assert_eq!(h.tcp.snd_cwnd, CWND_MIN_TARGET_PKTS);
        assert!(h.bbr.prior_cwnd >= cwnd_before);
        assert_eq!(h.bbr.pacing_gain, 256);
    }

    #[test]
    fn a_lower_rtt_sample_postpones_probe_rtt_but_an_equal_one_does_not() {
        let mut h = steady();
        h.ack(Ack { advance_us: 5_000_000, rtt_us: Some(RTT_US), ..Ack::one_packet(150) });
        assert_eq!(h.bbr.min_rtt_stamp, 0, "equal RTT does not refresh the filter");
        h.ack(Ack { advance_us: 1_000, rtt_us: Some(RTT_US - 1), ..Ack::one_packet(150) });
        // PROBE_BW began at 0.8 s, so this is t = 5.801 s: jiffy 1450 at 250 Hz.
        assert_eq!(h.tcp.now, SimTime(5_801_000_000));
        assert_eq!(h.bbr.min_rtt_stamp, 1450);
        ack_at(&mut h, SimTime(10_004_000_000), 150);
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
    }

    #[test]
    fn probe_rtt_lasts_200_ms_at_four_packets_and_at_least_one_round() {
        let mut h = steady();
        let saved = h.tcp.snd_cwnd;
        ack_at(&mut h, SimTime(10_004_000_000), 150);
        assert_eq!(h.bbr.mode(), Mode::ProbeRtt);
        assert_eq!(h.bbr.probe_rtt_done_stamp, None, "the clock starts once in-flight is down to 4");
        // In-flight drains to 4 at t = 10.1 s (jiffy 2525): done after jiffy 2575,
        // and a new round starts now.
        ack_at(&mut h, SimTime(10_100_000_000), 4);
        assert_eq!(h.bbr.probe_rtt_done_stamp, Some(2575));
        let round_end = h.tcp.delivered;
        // At jiffy 2576 the 200 ms are over, but this ACK is for a packet sent
        // before the round began: stay at 4 packets.
        let t = SimTime(10_304_000_000);
        let advance_us = (t - h.tcp.now).as_micros();
        h.ack(Ack { advance_us, prior_delivered: Some(round_end - 1), ..Ack::one_packet(5) });
        assert!(!h.bbr.probe_rtt_round_done);
        assert_eq!(h.bbr.mode(), Mode::ProbeRtt);
        assert_eq!(h.tcp.snd_cwnd, CWND_MIN_TARGET_PKTS);
        // The next ACK ends the round: PROBE_RTT is over, cwnd restored.
        ack_at(&mut h, SimTime(10_304_000_001), 4);
        assert!(h.bbr.probe_rtt_round_done);
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
        assert!(h.tcp.snd_cwnd >= saved, "cwnd {} is restored to at least {saved}", h.tcp.snd_cwnd);
        assert_eq!(h.bbr.min_rtt_stamp, 2576);
    }

    #[test]
    fn probe_rtt_does_not_end_before_200_ms_even_after_a_round() {
        let mut h = steady();
        ack_at(&mut h, SimTime(10_004_000_000), 150);
        ack_at(&mut h, SimTime(10_100_000_000), 4); // done at jiffy 2575 (10.300 s)
        ack_at(&mut h, SimTime(10_200_000_000), 4); // round ends
        assert!(h.bbr.probe_rtt_round_done);
        ack_at(&mut h, SimTime(10_303_999_999), 4); // jiffy 2575: not past it
        assert_eq!(h.bbr.mode(), Mode::ProbeRtt);
        ack_at(&mut h, SimTime(10_304_000_000), 4); // jiffy 2576
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
    }

    #[test]
    fn probe_rtt_without_a_full_pipe_returns_to_startup() {
        let mut h = Harness::new(1);
        h.round(10, 10);
        ack_at(&mut h, SimTime(10_004_000_000), 4);
        assert_eq!(h.bbr.mode(), Mode::ProbeRtt);
        ack_at(&mut h, SimTime(10_300_000_000), 4);
        assert_eq!(h.bbr.mode(), Mode::Startup);
    }

    #[test]
    fn probe_rtt_marks_the_connection_app_limited_up_to_its_in_flight() {
        let mut h = steady();
        ack_at(&mut h, SimTime(10_000_000_000), 150);
        assert_eq!(h.tcp.app_limited, 0);
        ack_at(&mut h, SimTime(10_004_000_000), 150);
        assert_eq!(h.bbr.mode(), Mode::ProbeRtt);
        assert_eq!(h.tcp.app_limited, h.tcp.delivered + 150);
    }

    #[test]
    fn an_idle_restart_postpones_probe_rtt_until_data_is_acked() {
        let mut h = steady();
        h.tcp.app_limited = h.tcp.delivered; // the sender ran out of data
        h.tcp.now = SimTime(10_004_000_000);
        h.bbr.cwnd_event(&mut h.tcp, CwndEvent::TxStart);
        assert!(h.bbr.idle_restart);
        // ACKs without RTT samples, so the expired filter stays expired.
        h.ack(Ack { advance_us: 0, delivered: 0, rtt_us: None, ..Ack::one_packet(2) });
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
        assert!(h.bbr.idle_restart, "an ACK that delivers nothing does not end the idle restart");
        h.ack(Ack { advance_us: 0, rtt_us: None, ..Ack::one_packet(2) });
        assert_eq!(h.bbr.mode(), Mode::ProbeBw, "the ACK that ends the idle restart still skips it");
        assert!(!h.bbr.idle_restart);
        h.ack(Ack { advance_us: 0, rtt_us: None, ..Ack::one_packet(2) });
        assert_eq!(h.bbr.mode(), Mode::ProbeRtt);
    }
}
