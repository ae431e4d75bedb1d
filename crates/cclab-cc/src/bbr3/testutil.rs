//! A test harness: a BBRv2/v3 flow and the TcpState it reads, driven by
//! hand-made ACKs on a 100 ms path of 1000-byte packets.

use super::{Bbr3, Bbr3Config, Mode, Params, Phase};
use crate::{CongestionControl, RateSample, SimDuration, SimTime, TcpState};

pub const MSS: u32 = 1_000;
pub const RTT_US: u64 = 100_000;
/// 1 packet per ms in BW_UNIT (2^24 / 1000).
pub const BW_1_PKT_PER_MS: u64 = 16_777;

pub struct Harness {
    pub bbr: Bbr3,
    pub tcp: TcpState,
}

/// One ACK: what it delivered and the rate sample it carries.
#[derive(Clone, Copy, Debug)]
pub struct Ack {
    pub advance_us: u64,
    /// Packets (S)ACKed by this ACK.
    pub acked: u32,
    /// The sample's delivered count and interval.
    pub delivered: u64,
    pub interval_us: u64,
    /// Packets in flight before the ACK.
    pub in_flight: u32,
    /// `rs.prior_delivered`; by default the packet sent one flight ago.
    pub prior_delivered: Option<u64>,
    pub losses: u32,
    pub lost: u64,
    pub tx_in_flight: u32,
    pub rtt_us: Option<u64>,
    pub app_limited: bool,
}

impl Ack {
    /// One packet ACKed, with a sample at 1 packet/ms (100 over 100 ms).
    pub fn one_packet(in_flight: u32) -> Ack {
        Ack {
            advance_us: 0,
            acked: 1,
            delivered: 100,
            interval_us: RTT_US,
            in_flight,
            prior_delivered: None,
            losses: 0,
            lost: 0,
            tx_in_flight: in_flight,
            rtt_us: Some(RTT_US),
            app_limited: false,
        }
    }

    /// The rate sample this ACK gives, against `tcp` after the ACK.
    pub fn rate_sample(&self, tcp: &TcpState) -> RateSample {
        RateSample {
            prior_delivered: self.prior_delivered.unwrap_or(tcp.delivered.saturating_sub(self.in_flight as u64)),
            delivered: self.delivered,
            interval: Some(SimDuration::from_micros(self.interval_us)),
            rtt: self.rtt_us.map(SimDuration::from_micros),
            losses: self.losses,
            acked_sacked: self.acked,
            prior_in_flight: self.in_flight,
            is_app_limited: self.app_limited,
            tx_in_flight: self.tx_in_flight,
            lost: self.lost,
            ..RateSample::default()
        }
    }
}

impl Harness {
    /// A flow just past the handshake (srtt 100 ms) in STARTUP.
    pub fn new(p: Params) -> Harness {
        Harness::with(Bbr3::new(p, Bbr3Config::default(), 1), RTT_US)
    }

    pub fn with(mut bbr: Bbr3, rtt_us: u64) -> Harness {
        let mut tcp = TcpState::new(MSS);
        tcp.now = SimTime(1_000_000_000);
        tcp.srtt = SimDuration::from_micros(rtt_us);
        bbr.init(&mut tcp);
        Harness { bbr, tcp }
    }

    /// A flow cruising in PROBE_BW at 1 packet/ms, min_rtt 100 ms, cwnd 200.
    pub fn cruising(p: Params) -> Harness {
        let mut h = Harness::new(p);
        h.bbr.full_bw_reached = true;
        h.bbr.mode = Mode::ProbeBw;
        h.bbr.max_bw = [BW_1_PKT_PER_MS, BW_1_PKT_PER_MS];
        h.tcp.snd_cwnd = 200;
        h.tcp.delivered = 1_000;
        h.bbr.start_bw_probe_down(&h.tcp);
        h.bbr.start_bw_probe_cruise();
        h.bbr.cycle_idx = Phase::Cruise;
        h
    }

    /// REFILL then UP, as at the start of a bandwidth probe.
    pub fn start_probe_up(&mut self) {
        self.bbr.start_bw_probe_refill(&self.tcp, 0);
        let round_end = self.bbr.next_rtt_delivered;
        self.ack(Ack { prior_delivered: Some(round_end), ..Ack::one_packet(100) });
        assert_eq!(self.bbr.mode_name(), "probe_bw_up");
    }

    /// Delivers one ACK through `cong_control`.
    pub fn ack(&mut self, ack: Ack) {
        self.tcp.now += SimDuration::from_micros(ack.advance_us);
        self.tcp.delivered += ack.acked as u64;
        self.tcp.delivered_time = self.tcp.now;
        self.tcp.lost += ack.losses as u64;
        self.tcp.packets_in_flight = ack.in_flight;
        let rs = ack.rate_sample(&self.tcp);
        self.bbr.cong_control(&mut self.tcp, &rs);
    }

    /// One ACK that ends a round, with a sample of `delivered` packets over `interval_ms`.
    pub fn round(&mut self, delivered: u64, interval_ms: u64) {
        let round_end = self.bbr.next_rtt_delivered;
        self.ack(Ack {
            advance_us: interval_ms * 1_000,
            delivered,
            interval_us: interval_ms * 1_000,
            prior_delivered: Some(round_end),
            ..Ack::one_packet(10)
        });
    }
}
