//! RTT estimation and the retransmission timeout: RFC 6298 as Linux
//! `tcp_rtt_estimator` / `tcp_set_rto` implement it (fixed point in
//! microseconds, srtt scaled by 8, mdev by 4, and the 200 ms floor applied to
//! the variance term rather than to the whole RTO).

use cclab_cc::{SimDuration, SimTime};

/// `TCP_RTO_MIN`: Linux's floor on the variance term of the RTO.
pub const TCP_RTO_MIN: SimDuration = SimDuration::from_millis(200);
/// `TCP_RTO_MAX`.
pub const TCP_RTO_MAX: SimDuration = SimDuration::from_secs(120);
/// `TCP_TIMEOUT_INIT`: RTO before the first sample (RFC 6298 2.1).
pub const TCP_TIMEOUT_INIT: SimDuration = SimDuration::from_secs(1);
/// `TCP_TS_HZ`: timestamps tick in milliseconds (`tcp_usec_ts` is off by default).
pub const TS_TICK_NS: u64 = 1_000_000;

/// The clock the timestamp option reads (`tcp_clock_ms`), as simulation time plus a phase:
/// the kernel's millisecond clock ticks wherever it was when a run began, so a run's
/// events sit at a random offset from the tick edges, one for the whole run since every
/// namespace reads the same clock. Phase 0 puts the edges at the simulation's whole
/// milliseconds (the run without noise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TsClock {
    pub phase: SimDuration,
}

impl TsClock {
    /// The clock's reading at `now`; its whole ticks are the TSval.
    pub fn read(&self, now: SimTime) -> SimTime {
        now + self.phase
    }
}

/// `tcp_rtt_tsopt_us(tp, 1)`: the RTT the timestamp option gives, in whole ticks of the
/// millisecond TS clock (`tcp_time_stamp_ts(tp) - rcv_tsecr`), at least one tick. Linux
/// falls back to it (`tcp_ack_update_rtt`) when an ACK newly acknowledges data but none of
/// it timed by Karn's rule: only retransmitted or already-SACKed segments, as the ACK that
/// fills a hole. Its sample is floored to the tick, so it can be below every RTT the path
/// ever has: BBR's min_rtt filter takes it as a new minimum (net/ipv4/tcp_input.c).
pub fn tsopt_rtt(now: SimTime, tsecr: SimTime) -> SimDuration {
    let ticks = (now.as_nanos() / TS_TICK_NS).saturating_sub(tsecr.as_nanos() / TS_TICK_NS);
    SimDuration(ticks.max(1) * TS_TICK_NS)
}

#[derive(Clone, Debug)]
pub struct RttEstimator {
    /// `srtt_us`: smoothed RTT in us, scaled by 8; 0 before the first sample.
    srtt_us_x8: u64,
    /// `mdev_us`: mean deviation in us, scaled by 4.
    mdev_us_x4: u64,
    /// `mdev_max_us`: largest mdev in the current window of data.
    mdev_max_us: u64,
    /// `rttvar_us`: the variance term used for the RTO, at least TCP_RTO_MIN.
    rttvar_us: u64,
    /// `rtt_seq`: rttvar decays once per window (when snd_una passes this).
    rtt_seq: u64,
    rto: SimDuration,
    /// Lowest RTT seen (Linux keeps a 5-minute windowed min; runs are shorter).
    min_rtt: Option<SimDuration>,
}

impl Default for RttEstimator {
    fn default() -> Self {
        RttEstimator {
            srtt_us_x8: 0,
            mdev_us_x4: 0,
            mdev_max_us: 0,
            rttvar_us: 0,
            rtt_seq: 0,
            rto: TCP_TIMEOUT_INIT,
            min_rtt: None,
        }
    }
}

impl RttEstimator {
    pub fn srtt(&self) -> SimDuration {
        SimDuration::from_micros(self.srtt_us_x8 >> 3)
    }

    pub fn rto(&self) -> SimDuration {
        self.rto
    }

    pub fn min_rtt(&self) -> Option<SimDuration> {
        self.min_rtt
    }

    /// `tcp_update_rtt_min`.
    pub fn update_min_rtt(&mut self, sample: SimDuration) {
        if self.min_rtt.is_none_or(|m| sample < m) {
            self.min_rtt = Some(sample.max(SimDuration::from_micros(1)));
        }
    }

    /// `tcp_rtt_estimator` followed by `tcp_set_rto`.
    pub fn on_sample(&mut self, sample: SimDuration, snd_una: u64, snd_nxt: u64) {
        let rto_min_us = TCP_RTO_MIN.as_micros();
        let m = sample.as_micros().max(1) as i64;
        if self.srtt_us_x8 != 0 {
            let mut err = m - (self.srtt_us_x8 >> 3) as i64;
            // srtt = 7/8 srtt + 1/8 sample
            self.srtt_us_x8 = (self.srtt_us_x8 as i64 + err) as u64;
            if err < 0 {
                err = -err - (self.mdev_us_x4 >> 2) as i64;
                // RTT falling: a finer gain so the RTO does not shrink too fast (Linux's Eifel-like tweak).
                if err > 0 {
                    err >>= 3;
                }
            } else {
                err -= (self.mdev_us_x4 >> 2) as i64;
            }
            // mdev = 3/4 mdev + 1/4 |err|
            self.mdev_us_x4 = (self.mdev_us_x4 as i64 + err).max(0) as u64;
            if self.mdev_us_x4 > self.mdev_max_us {
                self.mdev_max_us = self.mdev_us_x4;
                self.rttvar_us = self.rttvar_us.max(self.mdev_max_us);
            }
            if snd_una > self.rtt_seq {
                // Once per window, let rttvar decay towards the window's mdev.
                if self.mdev_max_us < self.rttvar_us {
                    self.rttvar_us -= (self.rttvar_us - self.mdev_max_us) >> 2;
                }
                self.rtt_seq = snd_nxt;
                self.mdev_max_us = rto_min_us;
            }
        } else {
            self.srtt_us_x8 = (m as u64) << 3;
            // mdev = sample/2 (scaled by 4), so the first RTO is about 3 x RTT.
            self.mdev_us_x4 = (m as u64) << 1;
            self.rttvar_us = self.mdev_us_x4.max(rto_min_us);
            self.mdev_max_us = self.rttvar_us;
            self.rtt_seq = snd_nxt;
        }
        self.srtt_us_x8 = self.srtt_us_x8.max(1);
        // RTO = srtt + rttvar, rttvar >= TCP_RTO_MIN (RFC 6298 2.3 with Linux's floor).
        let rto_us = (self.srtt_us_x8 >> 3) + self.rttvar_us;
        self.rto = SimDuration::from_micros(rto_us).min(TCP_RTO_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sample_sets_srtt_and_an_rto_of_srtt_plus_at_least_200ms() {
        let mut est = RttEstimator::default();
        assert_eq!(est.rto(), TCP_TIMEOUT_INIT);
        est.on_sample(SimDuration::from_millis(100), 0, 10);
        assert_eq!(est.srtt(), SimDuration::from_millis(100));
        // mdev = 50 ms, x4 = 200 ms: rttvar = max(200 ms, 200 ms).
        assert_eq!(est.rto(), SimDuration::from_millis(300));
    }

    #[test]
    fn the_timestamp_rtt_counts_whole_ticks_of_the_millisecond_clock_and_at_least_one() {
        let ms = |us: u64| SimTime(us * 1_000);
        // Sent at 10.9 ms, echoed at 50.95 ms: 40.05 ms, but ticks 10 -> 50.
        assert_eq!(tsopt_rtt(ms(50_950), ms(10_900)), SimDuration::from_millis(40));
        // Sent at 10.1 ms, echoed at 51.0 ms: 40.9 ms, ticks 10 -> 51.
        assert_eq!(tsopt_rtt(ms(51_000), ms(10_100)), SimDuration::from_millis(41));
        // Inside one tick: Linux's min_delta of 1 (tcp_ack_update_rtt).
        assert_eq!(tsopt_rtt(ms(10_400), ms(10_100)), SimDuration::from_millis(1));
    }

    #[test]
    fn the_clocks_phase_decides_which_tick_edges_an_rtt_crosses() {
        let ms = |us: u64| SimTime(us * 1_000);
        let (sent, echoed) = (ms(10_100), ms(50_150)); // 40.05 ms
        let read = |phase_us: u64| {
            let clock = TsClock { phase: SimDuration::from_micros(phase_us) };
            tsopt_rtt(clock.read(echoed), clock.read(sent))
        };
        // Edges at whole milliseconds: ticks 10 -> 50.
        assert_eq!(read(0), SimDuration::from_millis(40));
        // Moved 0.88 ms: the readings are 10.98 and 51.03 ms, ticks 10 -> 51.
        assert_eq!(read(880), SimDuration::from_millis(41));
    }

    #[test]
    fn a_short_rtt_still_gets_the_200ms_floor() {
        let mut est = RttEstimator::default();
        est.on_sample(SimDuration::from_millis(5), 0, 10);
        assert_eq!(est.rto(), SimDuration::from_millis(205));
    }

    #[test]
    fn steady_samples_converge_srtt_to_the_sample() {
        let mut est = RttEstimator::default();
        est.on_sample(SimDuration::from_millis(20), 0, 1);
        for i in 0..200 {
            est.on_sample(SimDuration::from_millis(40), i + 1, i + 2);
        }
        let srtt_ms = est.srtt().as_micros() as f64 / 1000.0;
        assert!((srtt_ms - 40.0).abs() < 0.1, "srtt {srtt_ms}");
        assert_eq!(est.rto(), SimDuration::from_micros(est.srtt().as_micros() + 200_000));
    }
}
