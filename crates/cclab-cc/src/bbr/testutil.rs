//! A hand-cranked sender for BBR's unit tests: each call builds the TcpState
//! and RateSample of one ACK, with numbers chosen so results can be worked
//! out by hand (MSS 1000 B, 100 ms RTT, 1 packet/ms = bw 16777 at the end of
//! STARTUP).

use super::{Bbr, BbrConfig};
use crate::{CongestionControl, RateSample, SimDuration, TcpState};

pub const MSS: u32 = 1000;
pub const RTT_US: u64 = 100_000;

/// One ACK. `prior_delivered: None` means the acked packet was sent
/// `prior_in_flight` packets ago (mid-round, as in a steady flow).
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    pub advance_us: u64,
    pub prior_delivered: Option<u64>,
    pub delivered: u64,
    pub interval_us: u64,
    pub rtt_us: Option<u64>,
    pub losses: u32,
    pub prior_in_flight: u32,
    pub in_flight: u32,
    pub app_limited: bool,
}

impl Ack {
    /// One packet acked 1 ms after the last, at 1 packet/ms, RTT = min_rtt.
    pub fn one_packet(prior_in_flight: u32) -> Ack {
        Ack {
            advance_us: 1_000,
            prior_delivered: None,
            delivered: 1,
            interval_us: 1_000,
            rtt_us: Some(RTT_US),
            losses: 0,
            prior_in_flight,
            in_flight: prior_in_flight.saturating_sub(1),
            app_limited: false,
        }
    }
}

pub struct Harness {
    pub bbr: Bbr,
    pub tcp: TcpState,
}

impl Harness {
    /// A connection whose handshake measured a 100 ms RTT, BBR initialised at t = 0.
    pub fn with_config(config: BbrConfig, seed: u64) -> Harness {
        let mut tcp = TcpState::new(MSS);
        tcp.srtt = SimDuration::from_micros(RTT_US);
        let mut bbr = Bbr::new(config, seed);
        bbr.init(&mut tcp);
        Harness { bbr, tcp }
    }

    pub fn new(seed: u64) -> Harness {
        Harness::with_config(BbrConfig::default(), seed)
    }

    /// Driven through STARTUP (rounds of 10, 20, 40, 80 and then 100 packets
    /// per 100 ms) into PROBE_BW at bw 16777 (1 packet/ms), min_rtt 100 ms.
    pub fn with_config_in_probe_bw(config: BbrConfig, seed: u64) -> Harness {
        let mut h = Harness::with_config(config, seed);
        for pkts in [10, 20, 40, 80, 100, 100, 100] {
            h.round(pkts, 250);
        }
        h.round(100, 104);
        assert_eq!(h.bbr.mode(), super::Mode::ProbeBw);
        h
    }

    pub fn in_probe_bw(seed: u64) -> Harness {
        Harness::with_config_in_probe_bw(BbrConfig::default(), seed)
    }

    /// A PROBE_BW flow in cruise phase 3 with an empty aggregation filter.
    pub fn cruising() -> Harness {
        let mut h = Harness::in_probe_bw(1);
        h.set_phase(3);
        h.bbr.ack_agg = super::ack_aggregation::AckAggregation::new(h.tcp.delivered_time);
        h
    }

    /// Deliver `ack`, updating the TcpState as the sender would, and run BBR.
    pub fn ack(&mut self, ack: Ack) {
        let tcp = &mut self.tcp;
        let delivered_before = tcp.delivered;
        tcp.now += SimDuration::from_micros(ack.advance_us);
        tcp.delivered += ack.delivered;
        if ack.delivered > 0 {
            tcp.delivered_time = tcp.now;
        }
        tcp.lost += ack.losses as u64;
        tcp.packets_in_flight = ack.in_flight;
        // tcp_rate_gen: an app-limited period ends once its data is delivered.
        if tcp.app_limited != 0 && tcp.delivered > tcp.app_limited {
            tcp.app_limited = 0;
        }
        if tcp.next_send_time < tcp.now {
            tcp.next_send_time = tcp.now;
        }
        let prior_delivered = ack
            .prior_delivered
            .unwrap_or((delivered_before + ack.delivered).saturating_sub(ack.prior_in_flight as u64));
        let rs = RateSample {
            prior_delivered,
            delivered: ack.delivered,
            interval: Some(SimDuration::from_micros(ack.interval_us)),
            rtt: ack.rtt_us.map(SimDuration::from_micros),
            losses: ack.losses,
            acked_sacked: ack.delivered as u32,
            prior_in_flight: ack.prior_in_flight,
            is_app_limited: ack.app_limited,
            is_retrans: false,
            is_ack_delayed: false,
            ..RateSample::default()
        };
        assert!(self.bbr.cong_control(&mut self.tcp, &rs));
    }

    /// One round trip as a single ACK: `pkts` delivered over one RTT, for a
    /// packet sent when the previous round ended; `in_flight` left afterwards.
    pub fn round(&mut self, pkts: u64, in_flight: u32) {
        self.round_with(pkts, in_flight, false);
    }

    pub fn round_app_limited(&mut self, pkts: u64, in_flight: u32) {
        self.round_with(pkts, in_flight, true);
    }

    fn round_with(&mut self, pkts: u64, in_flight: u32, app_limited: bool) {
        self.ack(Ack {
            advance_us: RTT_US,
            prior_delivered: Some(self.tcp.delivered),
            delivered: pkts,
            interval_us: RTT_US,
            prior_in_flight: in_flight + pkts as u32,
            in_flight,
            app_limited,
            ..Ack::one_packet(0)
        });
    }

    /// A mid-round ACK for a packet sent when `delivered` was `prior`.
    pub fn ack_with_prior(&mut self, prior: u64, pkts: u64, interval_us: u64, in_flight: u32) {
        self.ack(Ack {
            prior_delivered: Some(prior),
            delivered: pkts,
            interval_us,
            prior_in_flight: in_flight + pkts as u32,
            in_flight,
            ..Ack::one_packet(0)
        });
    }

    /// One packet acked 1 ms later, leaving `in_flight`; departures are not backlogged.
    pub fn small_ack(&mut self, in_flight: u32) {
        self.tcp.next_send_time = self.tcp.now;
        self.small_ack_keep_edt(in_flight);
    }

    /// As [`small_ack`](Self::small_ack) but keeping a future `next_send_time`.
    pub fn small_ack_keep_edt(&mut self, in_flight: u32) {
        self.ack(Ack { in_flight, ..Ack::one_packet(in_flight + 1) });
    }

    /// Jump to gain-cycle phase `idx`, starting now, as if just advanced there.
    pub fn set_phase(&mut self, idx: usize) {
        self.bbr.cycle_idx = idx;
        self.bbr.cycle_mstamp = self.tcp.delivered_time;
        self.bbr.update_gains();
    }
}
