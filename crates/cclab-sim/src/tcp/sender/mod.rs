//! The sending end of one TCP connection, following Linux `tcp_input.c` /
//! `tcp_output.c` / `tcp_timer.c`: SACK scoreboard, RACK-TLP loss detection
//! (RFC 8985), the Open/Disorder/Recovery/Loss state machine with PRR
//! (RFC 6937), RTO (RFC 6298 with Linux's floor), internal pacing for CCs
//! that ask for it, and delivery-rate sampling for the CC.
//!
//! Cost per ACK is O(log n) in the packets in flight: SACKed ranges live in
//! an interval set, loss detection walks a time-ordered queue from its head
//! and drops what it has decided, and lost packets wait in a min-heap.
//!
//! Deliberate simplifications (no effect on a single FIFO bottleneck, where
//! nothing is reordered): no undo of spurious recovery (DSACK/F-RTO), no
//! reordering-degree adaptation, no slow-start-after-idle. GSO skbs of ~1 ms at
//! the (paced or skb-sizing) pacing rate leave back to back; unpaced senders hold
//! back a short first skb as `tcp_tso_should_defer` does (transmit.rs).

mod ack;
#[cfg(test)]
mod ecn_tests;
mod recovery;
#[cfg(test)]
mod timestamp_tests;
#[cfg(test)]
mod scoreboard_tests;
mod timers;
mod transmit;

use crate::tcp::interval_set::IntervalSet;
use crate::tcp::prr::Prr;
use crate::tcp::rack::Rack;
use crate::tcp::rate::{self, RateSampler, TxRecord};
use crate::tcp::send_buffer::SendBuffer;
use crate::tcp::rtt::{RttEstimator, TsClock, TCP_RTO_MAX};
use crate::event::{Event, EventQueue, LazyTimer, TimerKind};
use cclab_aqm::Ecn;
use cclab_cc::{AckSample, AnyCc, CcConfig, CongestionControl, RateSample, SimDuration, SimTime, TcpState};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// `TCP_TIMEOUT_MIN` (2 jiffies at HZ=1000): slack Linux adds to the
/// reorder timer and to the loss probe timeout.
pub const TCP_TIMEOUT_MIN: SimDuration = SimDuration::from_millis(2);
/// `tp->reordering`: `net.ipv4.tcp_reordering`'s default (TCP_FASTRETRANS_THRESH, 3); the
/// simulator does not adapt it, as its paths do not reorder.
pub const TCP_REORDERING: u32 = 3;
/// Linux `tcp_update_skb_after_send`: sch_fq's habit of not pacing the first 10 packets.
pub const UNPACED_INITIAL_SEGMENTS: u64 = 10;
/// `TCPOLEN_TSTAMP_ALIGNED`: the timestamp option each segment carries, which the peer's MSS
/// option (`mss_clamp`) does not count.
const TCPOLEN_TSTAMP_ALIGNED_BYTES: u64 = 12;

// Per-segment state bits (Linux TCPCB_SACKED_ACKED, TCPCB_LOST, TCPCB_EVER_RETRANS, TCPCB_SACKED_RETRANS).
const SACKED: u8 = 1;
const LOST: u8 = 2;
const EVER_RETRANS: u8 = 4;
const RETRANS_IN_FLIGHT: u8 = 8;

#[derive(Clone, Copy, Debug)]
struct Segment {
    /// Time of the latest (re)transmission.
    xmit_time: SimTime,
    tx: TxRecord,
    flags: u8,
}

/// What the single retransmission timer is armed for (Linux `icsk_pending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum XmitTimer {
    Rto,
    LossProbe,
    ReoTimeout,
}

/// A segment handed to the network.
#[derive(Clone, Copy, Debug)]
pub struct Transmission {
    pub seq: u64,
    pub payload_bytes: u32,
    pub is_retransmission: bool,
    /// ECT(0) on new data of an ECN connection; retransmissions go Not-ECT.
    pub ecn: Ecn,
    /// The TCP header's CWR flag: the sender reduced its window for an ECE.
    pub cwr: bool,
    /// The TCP header's PSH flag: the last segment of an skb of two or more
    /// (`__tcp_transmit_skb` sets it on every such skb "to expedite GRO flush at
    /// receiver", and `tcp_gso_segment` leaves it on the last segment only).
    pub psh: bool,
}

/// Something worth showing on a timeline: CC mode changes, recovery, RTOs.
#[derive(Clone, Debug)]
pub struct FlowEvent {
    pub time: SimTime,
    pub kind: &'static str,
    pub detail: String,
}

#[derive(Clone, Debug, Default)]
pub struct SenderStats {
    pub data_segments_sent: u64,
    pub retrans_segments: u64,
    pub bytes_sent: u64,
    pub rto_count: u64,
    pub loss_probes: u64,
    /// One RTT sample (us) per ACK that produced one.
    pub rtt_samples_us: Vec<u32>,
    /// Time new data waited for the receiver's window (`TCP_CHRONO_RWND_LIMITED`,
    /// `ss -i`'s `rwnd_limited`), and since when it has been waiting.
    pub rwnd_limited_ns: u64,
    pub rwnd_limited_since: Option<SimTime>,
    /// Time the sender had sent all it had while its writer waited for buffer memory
    /// (`TCP_CHRONO_SNDBUF_LIMITED`, `ss -i`'s `sndbuf_limited`), and since when.
    pub sndbuf_limited_ns: u64,
    pub sndbuf_limited_since: Option<SimTime>,
}

pub struct TcpSender {
    pub flow_id: u32,
    /// The state the CC reads and writes.
    pub tcp: TcpState,
    cc: AnyCc,
    /// The seed the CC was built with (differential.rs builds its two fresh CCs with it).
    cc_seed: u64,
    /// The sender's skbs leave at its pacing clock: the CC asks for pacing (BBR), or fq paces.
    pacing: bool,
    /// The CC sets `sk_pacing_rate` itself; otherwise `tcp_update_pacing_rate` does.
    cc_sets_pacing_rate: bool,
    /// True once the CC has shown it owns cwnd (`cong_control`), like BBR.
    cc_owns_cwnd: bool,
    total_segments: Option<u64>,
    last_segment_bytes: u32,
    rwnd_segments: Option<u64>,
    /// The socket's send buffer and the application writing into it.
    send_buffer: SendBuffer,
    /// `tcp_wnd_end`: `snd_una + snd_wnd` as the last ACK advertised, in segments.
    snd_wnd_end: u64,
    /// `rx_opt.ts_recent`: the TSval to echo (the last ACK's send time).
    ts_recent: SimTime,
    /// The clock this host's timestamps read (shared with the receiver: one machine).
    pub ts_clock: TsClock,

    /// Outstanding segments, index = seq - snd_una.
    segments: VecDeque<Segment>,
    sacked_ranges: IntervalSet,
    /// (send time, seq) in send order: RACK's `tsorted_sent_queue`. Entries go
    /// stale when their segment is SACKed, marked lost or re-sent.
    time_sorted: VecDeque<(SimTime, u64)>,
    /// Lost segments waiting for retransmission, lowest first (validated on pop).
    lost_queue: BinaryHeap<Reverse<u64>>,
    sacked_out: u32,
    lost_out: u32,
    retrans_out: u32,

    high_seq: u64,
    /// `TCP_ECN_QUEUE_CWR`: set CWR on the next new data segment.
    ecn_queue_cwr: bool,
    /// Accurate ECN (RFC 9768) negotiated: ACKs carry the receiver's count of CE-marked
    /// packets, whose increase is the ACK's `ece_delta`; no ECE latch, no CWR flag.
    pub accecn: bool,
    /// The last CE count an ACK carried (the sender's copy of the ACE counter).
    last_ce_count: u32,
    /// The ECT codepoint of this socket's data: ECT(1) for a CC that wants it (Prague), else ECT(0).
    ect: Ecn,
    prr: Prr,
    rack: Rack,
    rtt: RttEstimator,
    rto_backoff: u32,
    consecutive_rtos: u32,
    retransmit_timer: LazyTimer,
    xmit_timer_kind: XmitTimer,
    pacing_timer: LazyTimer,
    tlp_high_seq: Option<u64>,
    /// `net.ipv4.tcp_recovery & TCP_RACK_LOSS_DETECTION` (`tcp_is_rack`): RACK marks losses;
    /// false: the duplicate-ACK scoreboard does (recovery.rs `update_scoreboard`).
    rack_loss_detection: bool,
    /// Classic recovery: every segment below this that is not SACKed is already marked lost
    /// (what `tp->lost_skb_hint` saves Linux from walking again).
    scoreboard_marked_upto: u64,
    rate: RateSampler,
    cwnd_limited: bool,
    max_packets_out: u64,
    cwnd_usage_seq: u64,
    data_segs_out: u64,

    pub stats: SenderStats,
    pub events: Vec<FlowEvent>,
    last_mode: &'static str,
    scratch_ranges: Vec<(u64, u64)>,
}

impl TcpSender {
    pub fn new(flow_id: u32, cc_config: &CcConfig, mss_bytes: u32, size_bytes: Option<u64>, rwnd_bytes: Option<u64>, cc_seed: u64) -> Self {
        let cc = cc_config.build(cc_seed);
        let pacing = cc.needs_pacing();
        let cc_sets_pacing_rate = pacing || cc.has_cong_control();
        // Both ends run the flow's CC, so one that asks for Accurate ECN gets it.
        let accecn = cc.needs_accecn();
        let (total_segments, last_segment_bytes) = match size_bytes {
            Some(size) => {
                let full = size / mss_bytes as u64;
                let rest = (size % mss_bytes as u64) as u32;
                if rest == 0 {
                    (Some(full), mss_bytes)
                } else {
                    (Some(full + 1), rest)
                }
            }
            None => (None, mss_bytes),
        };
        let mut tcp = TcpState::new(mss_bytes);
        tcp.app_limited = rate::APP_LIMITED_UNTIL_FIRST_DELIVERY;
        tcp.paced = pacing;
        let send_buffer = SendBuffer::new(mss_bytes as u64, mss_bytes as u64 + TCPOLEN_TSTAMP_ALIGNED_BYTES, cc.sndbuf_expand(), None, total_segments);
        TcpSender {
            flow_id,
            tcp,
            cc,
            cc_seed,
            pacing,
            cc_sets_pacing_rate,
            cc_owns_cwnd: false,
            total_segments,
            last_segment_bytes,
            rwnd_segments: rwnd_bytes.map(|b| (b / mss_bytes as u64).max(1)),
            send_buffer,
            snd_wnd_end: u64::MAX,
            ts_recent: SimTime::ZERO,
            ts_clock: TsClock::default(),
            segments: VecDeque::new(),
            sacked_ranges: IntervalSet::default(),
            time_sorted: VecDeque::new(),
            lost_queue: BinaryHeap::new(),
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            high_seq: 0,
            ecn_queue_cwr: false,
            accecn,
            last_ce_count: 0,
            ect: if accecn { Ecn::Ect1 } else { Ecn::Ect0 },
            prr: Prr::default(),
            rack: Rack::default(),
            rtt: RttEstimator::default(),
            rto_backoff: 0,
            consecutive_rtos: 0,
            retransmit_timer: LazyTimer::default(),
            xmit_timer_kind: XmitTimer::Rto,
            pacing_timer: LazyTimer::default(),
            tlp_high_seq: None,
            rack_loss_detection: true,
            scoreboard_marked_upto: 0,
            rate: RateSampler::default(),
            cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: 0,
            data_segs_out: 0,
            stats: SenderStats::default(),
            events: Vec::new(),
            last_mode: "",
            scratch_ranges: Vec::new(),
        }
    }

    /// fq on the sender's interface: every skb waits for its departure time at the pacing rate,
    /// whichever CC set that rate (`SK_PACING_FQ`).
    pub fn use_fq_pacing(&mut self) {
        self.pacing = true;
        self.tcp.paced = true;
    }

    /// `net.ipv4.tcp_recovery = 0`: losses are marked by the duplicate-ACK scoreboard
    /// (RFC 6675's DupThresh of 3 SACKed segments above), not by RACK.
    pub fn use_classic_loss_recovery(&mut self) {
        self.rack_loss_detection = false;
    }

    /// The handshake's outcome: the SYN-ACK's window (right edge, segments) and TSval.
    pub fn set_peer_window(&mut self, window_end: u64, syn_ack_tsval: SimTime) {
        self.snd_wnd_end = window_end;
        self.ts_recent = syn_ack_tsval;
        self.note_peer_window();
    }

    /// The application set SO_SNDBUF to `requested_bytes` (None: autotuned), and the host's
    /// `tcp_wmem[2]` is `tcp_wmem_max_bytes`.
    pub fn set_send_buffer(&mut self, requested_bytes: Option<u64>, tcp_wmem_max_bytes: u64) {
        let mss = self.tcp.mss_bytes as u64;
        self.send_buffer = SendBuffer::new(mss, mss + TCPOLEN_TSTAMP_ALIGNED_BYTES, self.cc.sndbuf_expand(), requested_bytes, self.total_segments)
            .with_tcp_wmem_max(tcp_wmem_max_bytes);
        self.note_peer_window();
    }

    /// `tp->max_window` for the send buffer's skb sizing.
    fn note_peer_window(&mut self) {
        let window_segments = self.snd_wnd_end.saturating_sub(self.tcp.snd_una).min(self.rwnd_segments.unwrap_or(u64::MAX));
        self.send_buffer.on_peer_window(window_segments.saturating_mul(self.tcp.mss_bytes as u64));
    }

    /// `sk_sndbuf` now.
    pub fn sndbuf_bytes(&self) -> u64 {
        self.send_buffer.sndbuf_bytes()
    }

    /// Time new data has waited for the receiver's window up to `now`.
    pub fn rwnd_limited_ns_at(&self, now: SimTime) -> u64 {
        self.stats.rwnd_limited_ns + self.stats.rwnd_limited_since.map_or(0, |since| (now - since).as_nanos())
    }

    /// Time the send buffer has held the sender back up to `now`.
    pub fn sndbuf_limited_ns_at(&self, now: SimTime) -> u64 {
        self.stats.sndbuf_limited_ns + self.stats.sndbuf_limited_since.map_or(0, |since| (now - since).as_nanos())
    }

    /// The TSecr a segment sent now carries.
    pub fn ts_recent(&self) -> SimTime {
        self.ts_recent
    }

    pub fn total_segments(&self) -> Option<u64> {
        self.total_segments
    }

    pub fn segment_bytes(&self, seq: u64) -> u32 {
        match self.total_segments {
            Some(total) if seq + 1 == total => self.last_segment_bytes,
            _ => self.tcp.mss_bytes,
        }
    }

    pub fn packets_out(&self) -> u64 {
        self.tcp.snd_nxt - self.tcp.snd_una
    }

    /// `tcp_packets_in_flight`.
    pub fn in_flight(&self) -> u32 {
        (self.packets_out() as u32 + self.retrans_out).saturating_sub(self.sacked_out + self.lost_out)
    }

    pub fn srtt(&self) -> SimDuration {
        self.rtt.srtt()
    }

    pub fn cc(&self) -> &AnyCc {
        &self.cc
    }

    pub fn cc_seed(&self) -> u64 {
        self.cc_seed
    }

    /// Hands every state-changing hook call of this flow's CC to `comparator` too
    /// (`cclab cc compare`); the flow runs as it would without.
    pub fn compare_cc_with(&mut self, comparator: cclab_cc::differential::Comparator) {
        let cc = std::mem::replace(&mut self.cc, AnyCc::Reno(Default::default()));
        self.cc = AnyCc::Recorded(Box::new(cclab_cc::differential::Recorder::new(cc, comparator)));
    }

    /// All data sent and acknowledged.
    pub fn is_finished(&self) -> bool {
        self.total_segments.is_some_and(|t| self.tcp.snd_una >= t)
    }

    /// `tcp_is_cwnd_limited`.
    fn is_cwnd_limited(&self) -> bool {
        self.cwnd_limited || (self.tcp.in_slow_start() && (self.tcp.snd_cwnd as u64) < 2 * self.max_packets_out)
    }

    /// Refreshes the derived fields the CC reads.
    fn sync_state(&mut self, now: SimTime) {
        self.tcp.now = now;
        self.tcp.packets_in_flight = self.in_flight();
        self.tcp.is_cwnd_limited = self.is_cwnd_limited();
        self.tcp.is_cwnd_limited_raw = self.cwnd_limited;
        self.tcp.srtt = self.rtt.srtt();
    }

    fn rto_backed_off(&self) -> SimDuration {
        SimDuration(self.rtt.rto().as_nanos().saturating_mul(1 << self.rto_backoff.min(16))).min(TCP_RTO_MAX)
    }

    fn segment(&self, seq: u64) -> &Segment {
        &self.segments[(seq - self.tcp.snd_una) as usize]
    }

    fn segment_mut(&mut self, seq: u64) -> &mut Segment {
        let idx = (seq - self.tcp.snd_una) as usize;
        &mut self.segments[idx]
    }

    fn timer_event(&self, kind: TimerKind) -> Event {
        Event::Timer(self.flow_id, kind)
    }

    /// The handshake completed at `now`, having measured `syn_rtt`. Like Linux
    /// (`tcp_synack_rtt_meas`), that RTT seeds srtt, the RTO and min_rtt before the
    /// CC's `init` runs, so BBR's first pacing rate is 2.89 x IW / RTT.
    pub fn start(&mut self, now: SimTime, syn_rtt: SimDuration, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        self.rtt.update_min_rtt(syn_rtt);
        self.rtt.on_sample(syn_rtt, self.tcp.snd_una, self.tcp.snd_nxt);
        self.sync_state(now);
        self.cc.init(&mut self.tcp);
        // A CC may ask for pacing in init, as tcp_bbr.c's bbr_init sets SK_PACING_NEEDED (a C
        // source's does just that); TCP reads sk_pacing_status at each transmit.
        if !self.pacing && self.cc.needs_pacing() {
            self.pacing = true;
            self.tcp.paced = true;
        }
        // The SYN-ACK's tcp_ack ends in tcp_cong_control, which sets the first rate.
        self.update_unpaced_pacing_rate();
        self.send_buffer.on_established(self.tcp.snd_cwnd, TCP_REORDERING, self.tcp.snd_una, self.tcp.snd_nxt);
        self.deliver_app_cookie(now, syn_rtt);
        self.note_mode(now);
        self.transmit(now, queue, out);
    }

    /// The application's first write, acknowledged before the data: iperf3's 37-byte
    /// cookie (`COOKIE_SIZE`, src/iperf_api.h), which `iperf_tcp_connect` writes right after
    /// connect(), before `iperf_create_streams` sets TCP_CONGESTION. One RTT later its ACK
    /// is the chosen CC's first: `tcp_rate_gen` makes an app-limited sample of one packet
    /// over that RTT, and BBR (v1-v3) grows cwnd by it, as `bbr_set_cwnd` does while
    /// `tp->delivered < TCP_INIT_CWND`: its data starts with 11 packets, not 10 (the kernel
    /// engine's BPF trace, bench/kernel_bbr_trace.py). Reno and CUBIC do not grow, since one
    /// packet out of ten is not cwnd-limited (`tcp_cong_avoid`); CUBIC takes its first
    /// delay sample. The data starts when the ACK arrives, as the kernel engine's first data
    /// segment follows it (paired starts line up on that segment).
    fn deliver_app_cookie(&mut self, now: SimTime, rtt: SimDuration) {
        // Sent with nothing else to send (tcp_rate_check_app_limited: delivered + in
        // flight = 0 + 1), so the first window's samples are app-limited too, until the
        // data's first delivery.
        self.tcp.app_limited = 1;
        self.data_segs_out += 1;
        self.rtt.on_sample(rtt, self.tcp.snd_una, self.tcp.snd_nxt);
        self.tcp.delivered += 1;
        self.tcp.delivered_time = now;
        self.sync_state(now);
        self.cc.pkts_acked(&mut self.tcp, &AckSample { pkts_acked: 1, rtt: Some(rtt), in_flight: 1 });
        let sample = RateSample {
            prior_delivered: 0,
            delivered: 1,
            interval: Some(rtt),
            rtt: Some(rtt),
            acked_sacked: 1,
            prior_in_flight: 1,
            is_app_limited: true,
            tx_in_flight: 1,
            ..RateSample::default()
        };
        if self.cc.cong_control(&mut self.tcp, &sample) {
            self.cc_owns_cwnd = true;
        }
        self.update_unpaced_pacing_rate();
    }


    /// Records a CC mode change as an event.
    fn note_mode(&mut self, now: SimTime) {
        let mode = self.cc.telemetry(&self.tcp).mode;
        if !std::ptr::eq(mode, self.last_mode) && mode != self.last_mode {
            self.events.push(FlowEvent { time: now, kind: "cc_mode", detail: mode.to_string() });
            self.last_mode = mode;
        }
    }

    /// Invariants of the scoreboard (checked by tests after every event).
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut sacked = 0;
        let mut lost = 0;
        let mut retrans = 0;
        for seg in &self.segments {
            sacked += (seg.flags & SACKED != 0) as u32;
            lost += (seg.flags & LOST != 0) as u32;
            retrans += (seg.flags & RETRANS_IN_FLIGHT != 0) as u32;
        }
        if sacked != self.sacked_out || lost != self.lost_out || retrans != self.retrans_out {
            return Err(format!(
                "flow {}: counters sacked {}/{} lost {}/{} retrans {}/{}",
                self.flow_id, self.sacked_out, sacked, self.lost_out, lost, self.retrans_out, retrans
            ));
        }
        if self.tcp.snd_nxt > self.snd_wnd_end {
            return Err(format!("flow {}: sent up to {} past the receiver's window end {}", self.flow_id, self.tcp.snd_nxt, self.snd_wnd_end));
        }
        if self.segments.len() as u64 != self.packets_out() {
            return Err(format!("flow {}: {} segments stored, {} outstanding", self.flow_id, self.segments.len(), self.packets_out()));
        }
        // Data leaves only once written, and is written only while the buffer has room: what
        // is in flight fits in the buffer, but for the one skb the last write began under it.
        let in_flight_bytes = self.packets_out() * self.tcp.mss_bytes as u64;
        if in_flight_bytes > self.send_buffer.sndbuf_bytes() + self.send_buffer.largest_skb_bytes() {
            return Err(format!("flow {}: {} bytes in flight past a send buffer of {}", self.flow_id, in_flight_bytes, self.send_buffer.sndbuf_bytes()));
        }
        Ok(())
    }
}

/// Tests: a CUBIC sender (flow 0, seed 1), ECN negotiated or not, whose initial window left
/// at 20 ms over a path of `path_rtt`. Returns it, its queue, the start and what it sent.
#[cfg(test)]
fn started_cubic_sender(path_rtt: SimDuration, ecn: bool) -> (TcpSender, EventQueue, SimTime, Vec<Transmission>) {
    started_sender("cubic", path_rtt, ecn)
}

/// Tests: as [`started_cubic_sender`], with congestion control `cc`.
#[cfg(test)]
fn started_sender(cc: &str, path_rtt: SimDuration, ecn: bool) -> (TcpSender, EventQueue, SimTime, Vec<Transmission>) {
    let cc = crate::config::FlowConfig::bulk(0, cc).cc_config().unwrap();
    let mut s = TcpSender::new(0, &cc, 1448, None, None, 1);
    s.tcp.ecn_ok = ecn;
    let (mut q, mut out) = (EventQueue::default(), Vec::new());
    let t0 = SimTime(20_000_000);
    s.start(t0, path_rtt, &mut q, &mut out);
    (s, q, t0, out)
}
