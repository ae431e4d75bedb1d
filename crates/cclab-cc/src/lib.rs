//! Congestion controls behind one small trait, shaped like Linux's
//! `struct tcp_congestion_ops` because Linux is what cclab must be faithful to.
//!
//! The TCP sender owns a [`TcpState`] (the fields of Linux `struct tcp_sock`
//! that CC modules read and write) and calls the hooks below at the same
//! points Linux `tcp_input.c` does. A hook never reads a clock or a global
//! random source: time arrives in `TcpState::now`, randomness from a
//! generator seeded by the simulator.
//!
//! One file per algorithm: [`reno`], [`cubic`], [`dctcp`], [`prague`], [`bbr`] (BBRv1) and
//! [`bbr3`] (BBRv3 and BBRv2alpha), one file per BBR state or mechanism; [`native`] runs a
//! user's BPF struct_ops source, built natively; [`differential`] records one CC's hook calls
//! and drives two others through them. [`AnyCc`] is the single dispatch enum.

pub mod bbr;
pub mod bbr3;
pub mod cubic;
pub mod dctcp;
pub mod differential;
pub mod hystart;
pub mod native;
pub mod prague;
pub mod reno;
pub mod rng;
pub mod time;

pub use time::{Bandwidth, SimDuration, SimTime};

/// Linux `enum tcp_ca_state`: where the sender is in loss recovery.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CaState {
    #[default]
    Open,
    /// SACKed or duplicate-ACKed data seen, no loss marked yet.
    Disorder,
    /// cwnd reduced for an ECN echo (`tcp_enter_cwr`), once per window.
    Cwr,
    /// Fast recovery after loss detected by SACK/RACK.
    Recovery,
    /// After a retransmission timeout.
    Loss,
}

/// Linux `enum tcp_ca_event`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CwndEvent {
    /// First transmission when nothing was in flight (restart after idle).
    TxStart,
    /// cwnd restarted after idle (`tcp_cwnd_restart`).
    CwndRestart,
    /// End of a CWR/Recovery reduction (`tcp_end_cwnd_reduction`).
    CompleteCwr,
    /// Retransmission timeout (`tcp_enter_loss`).
    Loss,
}

/// The connection state a CC sees: the subset of Linux `struct tcp_sock`
/// (and `struct sock`) that `tcp_cong.c`, `tcp_cubic.c` and `tcp_bbr.c` use.
/// Sequence numbers count segments, not bytes; cwnd counts packets, as in Linux.
#[derive(Clone, Debug)]
pub struct TcpState {
    /// `tp->tcp_mstamp`: the time of the event being processed.
    pub now: SimTime,
    /// `tp->mss_cache`: payload bytes per full segment.
    pub mss_bytes: u32,
    /// `tp->snd_cwnd`, packets.
    pub snd_cwnd: u32,
    /// `tp->snd_cwnd_cnt`: additive-increase counter.
    pub snd_cwnd_cnt: u32,
    /// `tp->snd_cwnd_clamp`: upper bound on cwnd.
    pub snd_cwnd_clamp: u32,
    /// `tp->snd_ssthresh`, packets; [`INFINITE_SSTHRESH`] before the first loss.
    pub snd_ssthresh: u32,
    /// `tp->prior_cwnd`: cwnd when the current reduction began.
    pub prior_cwnd: u32,
    /// `icsk_ca_state`.
    pub ca_state: CaState,
    /// `tcp_packets_in_flight()`: packets_out - (sacked_out + lost_out) + retrans_out.
    pub packets_in_flight: u32,
    /// `tcp_is_cwnd_limited()`: the sender used (most of) its cwnd recently, or is in slow
    /// start below twice what it had out (what `tcp_cong_avoid` asks: CUBIC, Reno).
    pub is_cwnd_limited: bool,
    /// `tp->is_cwnd_limited` itself, as `tcp_cwnd_validate` keeps it, without slow start's
    /// clause: what BBRv2/v3 read (`bbr_probe_inflight_hi_upward`, PROBE_UP's exit).
    pub is_cwnd_limited_raw: bool,
    /// `tp->snd_nxt` in segments.
    pub snd_nxt: u64,
    /// `tp->snd_una` in segments.
    pub snd_una: u64,
    /// `tp->srtt_us >> 3`; zero until the first RTT sample.
    pub srtt: SimDuration,
    /// `tp->delivered`: packets delivered (cumulatively or selectively acked).
    pub delivered: u64,
    /// `tp->delivered_mstamp`: when `delivered` last grew.
    pub delivered_time: SimTime,
    /// `tp->lost`: packets ever marked lost.
    pub lost: u64,
    /// `tp->delivered_ce`: packets delivered by ACKs that carried ECE
    /// (`tcp_count_delivered`); the TCP's ECN path increments it.
    pub delivered_ce: u64,
    /// `tp->ecn_flags & TCP_ECN_OK`: ECN was negotiated on this connection.
    pub ecn_ok: bool,
    /// `tp->app_limited`: 0, or the `delivered` count that ends the current
    /// app-limited period (`tcp_rate_check_app_limited`; BBR sets it on
    /// entering PROBE_RTT).
    pub app_limited: u64,
    /// `sk->sk_pacing_rate`, payload bytes per second; only enforced when
    /// the CC [`needs_pacing`](CongestionControl::needs_pacing) or fq paces.
    pub pacing_rate_bytes_per_sec: u64,
    /// `sk->sk_pacing_status != SK_PACING_NONE`: something paces this socket (the CC asked TCP
    /// to, or fq on the sender's interface does).
    pub paced: bool,
    /// `tp->tcp_wstamp_ns`: earliest departure time of the next paced packet.
    pub next_send_time: SimTime,
}

/// `TCP_INFINITE_SSTHRESH` in Linux `include/net/tcp.h`.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
/// `TCP_INIT_CWND` (RFC 6928).
pub const INITIAL_CWND_PKTS: u32 = 10;

impl TcpState {
    pub fn new(mss_bytes: u32) -> Self {
        TcpState {
            now: SimTime::ZERO,
            mss_bytes,
            snd_cwnd: INITIAL_CWND_PKTS,
            snd_cwnd_cnt: 0,
            snd_cwnd_clamp: u32::MAX / 2,
            snd_ssthresh: INFINITE_SSTHRESH,
            prior_cwnd: 0,
            ca_state: CaState::Open,
            packets_in_flight: 0,
            is_cwnd_limited: false,
            is_cwnd_limited_raw: false,
            snd_nxt: 0,
            snd_una: 0,
            srtt: SimDuration::ZERO,
            delivered: 0,
            delivered_time: SimTime::ZERO,
            lost: 0,
            delivered_ce: 0,
            ecn_ok: false,
            app_limited: 0,
            pacing_rate_bytes_per_sec: u64::MAX,
            paced: false,
            next_send_time: SimTime::ZERO,
        }
    }

    /// `tcp_in_slow_start()`.
    pub fn in_slow_start(&self) -> bool {
        self.snd_cwnd < self.snd_ssthresh
    }
}

/// Linux `struct ack_sample`, passed to [`CongestionControl::pkts_acked`].
#[derive(Clone, Copy, Debug)]
pub struct AckSample {
    /// Packets newly cumulatively acknowledged.
    pub pkts_acked: u32,
    /// RTT of this ACK (from the newest acked packet that was never retransmitted).
    pub rtt: Option<SimDuration>,
    /// Packets in flight before this ACK.
    pub in_flight: u32,
}

/// Linux `struct rate_sample` (`tcp_rate.c`, draft-cheng-iccrg-delivery-rate-estimation).
#[derive(Clone, Copy, Debug, Default)]
pub struct RateSample {
    /// `tp->delivered` when the sampled packet was sent.
    pub prior_delivered: u64,
    /// Packets delivered over `interval`.
    pub delivered: u64,
    /// Time over which `delivered` grew; `None` when there is no valid sample
    /// (Linux `interval_us = -1`).
    pub interval: Option<SimDuration>,
    /// RTT of the most recently (S)ACKed packet, if it was never retransmitted.
    pub rtt: Option<SimDuration>,
    /// Packets newly marked lost on this ACK.
    pub losses: u32,
    /// Packets newly (S)ACKed on this ACK.
    pub acked_sacked: u32,
    /// Packets in flight before this ACK.
    pub prior_in_flight: u32,
    /// The sample came from a packet sent with a bubble in the pipe.
    pub is_app_limited: bool,
    /// The sample came from a retransmitted packet.
    pub is_retrans: bool,
    /// This ACK was (likely) delayed by the receiver.
    pub is_ack_delayed: bool,
    /// `rs->tx_in_flight` (google/bbr v3 `tcp_rate.c`): packets in flight when
    /// the sampled packet was sent (`scb->tx.in_flight`).
    pub tx_in_flight: u32,
    /// `rs->lost`: packets marked lost since the sampled packet was sent
    /// (`tp->lost - scb->tx.lost`).
    pub lost: u64,
    /// `rs->delivered_ce`: packets delivered with ECE since the sampled packet
    /// was sent (`tp->delivered_ce - scb->tx.delivered_ce`).
    pub delivered_ce: u64,
    /// `rs->ece_delta` (L4STeam's AccECN tree): packets this ACK reported CE-marked,
    /// exactly with Accurate ECN, all it delivered with RFC 3168's ECE.
    pub ece_delta: u32,
}

/// What the TCP tells a CC about a packet it just marked lost (google/bbr v3
/// `tcp_notify_skb_loss_event` -> `ca_ops->skb_marked_lost`): the packet's
/// `TCP_SKB_CB(skb)->tx` snapshot. `tcp.lost` already counts it.
#[derive(Clone, Copy, Debug, Default)]
pub struct LostPacket {
    /// `scb->tx.in_flight`.
    pub tx_in_flight: u32,
    /// `scb->tx.lost`.
    pub tx_lost: u64,
    /// `scb->tx.delivered_ce`.
    pub tx_delivered_ce: u64,
    /// `scb->tx.is_app_limited`.
    pub is_app_limited: bool,
    /// `scb->tx.delivered_mstamp != 0` (cleared once the packet was SACKed).
    pub has_delivered_time: bool,
}

impl RateSample {
    /// Delivery rate in packets per second, if the sample is valid.
    pub fn delivery_rate_pkts_per_sec(&self) -> Option<f64> {
        match self.interval {
            Some(i) if i.as_nanos() > 0 => Some(self.delivered as f64 / i.as_secs_f64()),
            _ => None,
        }
    }
}

/// What a CC publishes for time series and events; `None` where it has no such notion.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CcTelemetry {
    /// The CC's mode, e.g. "startup", "probe_bw" (BBR) or "slow_start".
    pub mode: &'static str,
    /// BBR's bottleneck bandwidth estimate, payload bits per second.
    pub bw_estimate_bps: Option<u64>,
    /// BBR's min-RTT estimate.
    pub min_rtt: Option<SimDuration>,
    /// BBR's current pacing gain.
    pub pacing_gain: Option<f64>,
    /// The ECN-marked fraction a scalable CC estimates (DCTCP's alpha), in [0, 1].
    pub ecn_alpha: Option<f64>,
}

impl CcTelemetry {
    /// A window-based CC's: its mode is slow start below ssthresh, else congestion avoidance.
    pub fn window_based(tcp: &TcpState) -> Self {
        CcTelemetry { mode: if tcp.in_slow_start() { "slow_start" } else { "congestion_avoidance" }, ..CcTelemetry::default() }
    }
}

/// One congestion control algorithm: the hooks of Linux `tcp_congestion_ops`.
/// All have default no-op bodies except `ssthresh`.
pub trait CongestionControl {
    /// `.init`: called once when the connection starts.
    fn init(&mut self, _tcp: &mut TcpState) {}
    /// `.ssthresh`: slow-start threshold after a loss (recovery entry or RTO).
    fn ssthresh(&mut self, tcp: &TcpState) -> u32;
    /// `.cong_avoid`: grow cwnd on an ACK while not in cwnd reduction.
    /// Not called when `cong_control` handles the ACK.
    fn cong_avoid(&mut self, _tcp: &mut TcpState, _ack_seq: u64, _acked_pkts: u32) {}
    /// `.pkts_acked`: per ACK that acknowledged new data, with its RTT sample.
    fn pkts_acked(&mut self, _tcp: &mut TcpState, _sample: &AckSample) {}
    /// `.set_state`: the recovery state is about to become `new_state`
    /// (`tcp.ca_state` still holds the old one, as in `tcp_set_ca_state`).
    fn set_state(&mut self, _tcp: &mut TcpState, _new_state: CaState) {}
    /// `.cwnd_event`.
    fn cwnd_event(&mut self, _tcp: &mut TcpState, _event: CwndEvent) {}
    /// `.in_ack_event`: every ACK, after its deliveries (and CE echoes) are counted
    /// in `delivered` / `delivered_ce` and before loss recovery acts on it.
    fn in_ack_event(&mut self, _tcp: &mut TcpState) {}
    /// `TCP_CONG_NEEDS_ECN`: negotiate ECN whatever the host's `tcp_ecn` says, send
    /// every packet ECT (retransmissions and ACKs too) and echo CE as DCTCP does.
    fn needs_ecn(&self) -> bool {
        false
    }
    /// `TCP_CONG_NEEDS_ACCECN | TCP_CONG_WANTS_ECT_1` (L4STeam's flags): negotiate Accurate
    /// ECN (RFC 9768), whose exact CE counts reach `RateSample::ece_delta`, and send ECT(1),
    /// the L4S identifier (RFC 9331).
    fn needs_accecn(&self) -> bool {
        false
    }
    /// `.cong_control`: model-based control of cwnd and pacing rate on every ACK.
    /// Returns `false` if this CC has none; TCP then runs PRR or `cong_avoid`.
    fn cong_control(&mut self, _tcp: &mut TcpState, _rs: &RateSample) -> bool {
        false
    }
    /// `.skb_marked_lost` (google/bbr v3): the TCP just marked `pkt` lost.
    fn skb_marked_lost(&mut self, _tcp: &TcpState, _pkt: &LostPacket) {}
    /// The CC's floor on segments per GSO skb (`.min_tso_segs`, or what
    /// `.tso_segs` implies); `None` for `sysctl_tcp_min_tso_segs`.
    fn min_tso_segs(&self, _tcp: &TcpState) -> Option<u32> {
        None
    }
    /// `.tso_segs` (L4STeam's tree): segments per GSO skb in place of `tcp_tso_autosize`;
    /// `None` for TCP's own sizing.
    fn tso_segs(&self, _tcp: &TcpState) -> Option<u32> {
        None
    }
    /// Whether TCP must pace at `pacing_rate_bytes_per_sec`
    /// (Linux: the CC sets `sk_pacing_status = SK_PACING_NEEDED`, as BBR does).
    fn needs_pacing(&self) -> bool {
        false
    }
    /// Whether `.cong_control` is set, so that TCP leaves the pacing rate to the CC
    /// (`tcp_cong_control` skips `tcp_update_pacing_rate`): BBR's and Prague's, and a
    /// user's source that sets it.
    fn has_cong_control(&self) -> bool {
        false
    }
    /// `.sndbuf_expand`: how many congestion windows of memory send-buffer autotuning
    /// provisions (`tcp_sndbuf_expand`); `None` for TCP's 2 ("CUBIC needs 1.7").
    fn sndbuf_expand(&self) -> Option<u32> {
        None
    }
    /// Internal estimates for time series.
    fn telemetry(&self, tcp: &TcpState) -> CcTelemetry {
        CcTelemetry::window_based(tcp)
    }
}

/// How to build a CC: the part of a scenario that names the algorithm.
#[derive(Clone, Debug, PartialEq)]
pub enum CcConfig {
    Reno,
    Cubic(cubic::CubicConfig),
    Dctcp,
    /// TCP Prague as L4STeam's tree has it.
    Prague,
    Bbr(bbr::BbrConfig),
    /// BBRv2 as google/bbr branch v2alpha `tcp_bbr2.c` has it.
    Bbr2(bbr3::Bbr3Config),
    /// BBRv3 as google/bbr branch v3 `tcp_bbr.c` has it.
    Bbr3(bbr3::Bbr3Config),
    /// A user's BPF struct_ops source, built natively (native.rs).
    Native(native::NativeCcConfig),
}

impl CcConfig {
    /// Builds the algorithm; `seed` feeds any randomness it needs (BBR's start phase).
    pub fn build(&self, seed: u64) -> AnyCc {
        match self {
            CcConfig::Reno => AnyCc::Reno(reno::Reno::default()),
            CcConfig::Cubic(cfg) => AnyCc::Cubic(cubic::Cubic::new(cfg.clone())),
            CcConfig::Dctcp => AnyCc::Dctcp(dctcp::Dctcp::default()),
            CcConfig::Prague => AnyCc::Prague(Box::default()),
            CcConfig::Bbr(cfg) => AnyCc::Bbr(Box::new(bbr::Bbr::new(cfg.clone(), seed))),
            CcConfig::Bbr2(cfg) => AnyCc::Bbr3(Box::new(bbr3::Bbr3::new(bbr3::Params::V2ALPHA, cfg.clone(), seed))),
            CcConfig::Bbr3(cfg) => AnyCc::Bbr3(Box::new(bbr3::Bbr3::new(bbr3::Params::V3, cfg.clone(), seed))),
            CcConfig::Native(cfg) => AnyCc::Native(Box::new(native::NativeCc::new(cfg, seed))),
        }
    }
}

/// The one dispatch enum over every algorithm (static dispatch, no vtables in the hot path).
pub enum AnyCc {
    Reno(reno::Reno),
    Cubic(cubic::Cubic),
    Dctcp(dctcp::Dctcp),
    Prague(Box<prague::Prague>),
    Bbr(Box<bbr::Bbr>),
    /// BBRv2 or BBRv3: one implementation, the version in its parameters.
    Bbr3(Box<bbr3::Bbr3>),
    /// A user's BPF source (its hooks run through the library's bridge).
    Native(Box<native::NativeCc>),
    /// Any of the above, its state-changing hook calls kept (differential.rs).
    Recorded(Box<differential::Recorder>),
}

macro_rules! dispatch {
    ($self:ident, $cc:ident => $body:expr) => {
        match $self {
            AnyCc::Reno($cc) => $body,
            AnyCc::Cubic($cc) => $body,
            AnyCc::Dctcp($cc) => $body,
            AnyCc::Prague($cc) => $body,
            AnyCc::Bbr($cc) => $body,
            AnyCc::Bbr3($cc) => $body,
            AnyCc::Native($cc) => $body,
            AnyCc::Recorded($cc) => $body,
        }
    };
}

impl CongestionControl for AnyCc {
    fn init(&mut self, tcp: &mut TcpState) {
        dispatch!(self, cc => cc.init(tcp))
    }
    fn ssthresh(&mut self, tcp: &TcpState) -> u32 {
        dispatch!(self, cc => cc.ssthresh(tcp))
    }
    fn cong_avoid(&mut self, tcp: &mut TcpState, ack_seq: u64, acked_pkts: u32) {
        dispatch!(self, cc => cc.cong_avoid(tcp, ack_seq, acked_pkts))
    }
    fn pkts_acked(&mut self, tcp: &mut TcpState, sample: &AckSample) {
        dispatch!(self, cc => cc.pkts_acked(tcp, sample))
    }
    fn set_state(&mut self, tcp: &mut TcpState, new_state: CaState) {
        dispatch!(self, cc => cc.set_state(tcp, new_state))
    }
    fn cwnd_event(&mut self, tcp: &mut TcpState, event: CwndEvent) {
        dispatch!(self, cc => cc.cwnd_event(tcp, event))
    }
    fn in_ack_event(&mut self, tcp: &mut TcpState) {
        dispatch!(self, cc => cc.in_ack_event(tcp))
    }
    fn needs_ecn(&self) -> bool {
        dispatch!(self, cc => cc.needs_ecn())
    }
    fn needs_accecn(&self) -> bool {
        dispatch!(self, cc => cc.needs_accecn())
    }
    fn tso_segs(&self, tcp: &TcpState) -> Option<u32> {
        dispatch!(self, cc => cc.tso_segs(tcp))
    }
    fn cong_control(&mut self, tcp: &mut TcpState, rs: &RateSample) -> bool {
        dispatch!(self, cc => cc.cong_control(tcp, rs))
    }
    fn skb_marked_lost(&mut self, tcp: &TcpState, pkt: &LostPacket) {
        dispatch!(self, cc => cc.skb_marked_lost(tcp, pkt))
    }
    fn min_tso_segs(&self, tcp: &TcpState) -> Option<u32> {
        dispatch!(self, cc => cc.min_tso_segs(tcp))
    }
    fn needs_pacing(&self) -> bool {
        dispatch!(self, cc => cc.needs_pacing())
    }
    fn has_cong_control(&self) -> bool {
        dispatch!(self, cc => cc.has_cong_control())
    }
    fn sndbuf_expand(&self) -> Option<u32> {
        dispatch!(self, cc => cc.sndbuf_expand())
    }
    fn telemetry(&self, tcp: &TcpState) -> CcTelemetry {
        dispatch!(self, cc => cc.telemetry(tcp))
    }
}
