//! DRAIN: pace below the estimate until the queue STARTUP built is gone
//! (Linux `bbr_check_drain`).

use super::{Bbr, Mode, BBR_UNIT};
use crate::TcpState;

/// `bbr_drain_gain` = 1/high_gain, truncated (88/256): drains STARTUP's queue
/// in about one round.
pub(super) const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;

impl Bbr {
    /// `bbr_check_drain`: enter DRAIN once the pipe is full (setting ssthresh to
    /// the BDP-based in-flight target, as Linux reports it), and leave for
    /// PROBE_BW once the packets in the network at the next departure fit in it.
    pub(super) fn check_drain(&mut self, tcp: &mut TcpState) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            tcp.snd_ssthresh = self.inflight(tcp, self.max_bw(), BBR_UNIT);
        }
        // Fall through: in-flight may already be small enough.
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(tcp, tcp.packets_in_flight) <= self.inflight(tcp, self.max_bw(), BBR_UNIT)
        {
            self.reset_probe_bw_mode(tcp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::Harness;
    use super::super::Mode;
    use super::*;
    use crate::SimDuration;

    /// Startup rounds that fill the pipe at 1 packet/ms (bw 16777) with a
    /// large in-flight, so the flow stays in DRAIN after the last one.
    fn fill_pipe(h: &mut Harness) {
        for pkts in [10, 20, 40, 80, 100, 100, 100] {
            h.round(pkts, 250);
        }
        assert_eq!(h.bbr.mode(), Mode::Startup);
        h.round(100, 250);
    }

    #[test]
    fn drain_gain_is_the_truncated_inverse_of_high_gain() {
        assert_eq!(DRAIN_GAIN, 88);
    }

    #[test]
    fn a_full_pipe_moves_startup_to_drain_and_sets_ssthresh_to_the_bdp_target() {
        let mut h = Harness::new(1);
        fill_pipe(&mut h);
        assert_eq!(h.bbr.mode(), Mode::Drain);
        // BDP = ceil(16777 * 100000 / 2^24) = 100; + 3 TSO bursts of 2 = 106 (even).
        assert_eq!(h.tcp.snd_ssthresh, 106);
        assert_eq!(h.bbr.pacing_gain, DRAIN_GAIN);
        assert_eq!(h.bbr.cwnd_gain, super::super::startup::HIGH_GAIN);
    }

    #[test]
    fn drain_ends_when_in_flight_falls_to_the_bdp_target() {
        let mut h = Harness::new(1);
        fill_pipe(&mut h);
        h.small_ack(107);
        assert_eq!(h.bbr.mode(), Mode::Drain);
        h.small_ack(106);
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
    }

    #[test]
    fn drain_counts_packets_already_scheduled_for_later_departure_as_gone() {
        let mut h = Harness::new(1);
        fill_pipe(&mut h);
        // The next paced departure is 10 ms away: 16777 * 10000 >> 24 = 9 packets
        // (9.9998, truncated) leave the network by then, so 115 in flight is 106 at EDT.
        h.tcp.next_send_time = h.tcp.now + SimDuration::from_millis(10) + SimDuration::from_millis(1);
        h.small_ack_keep_edt(115);
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
    }

    #[test]
    fn a_pipe_that_is_already_drained_goes_straight_from_startup_to_probe_bw() {
        let mut h = Harness::new(1);
        for pkts in [10, 20, 40, 80, 100, 100, 100] {
            h.round(pkts, 250);
        }
        // At the STARTUP->DRAIN ACK the pacing gain is still high, so the EDT
        // estimate adds one TSO burst (2): 104 + 2 <= 106.
        h.round(100, 104);
        assert_eq!(h.bbr.mode(), Mode::ProbeBw);
    }
}
