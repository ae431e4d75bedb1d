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
//! reordering-degree adaptation, no TSO/GSO (hosts run with offloads off),
//! no slow-start-after-idle.

use super::interval_set::IntervalSet;
use super::prr::Prr;
use super::rack::{self, Rack};
use super::rate::{self, RateSampler, SampleBuilder, TxRecord};
use super::receiver::AckPacket;
use super::rtt::{RttEstimator, TCP_RTO_MAX, TCP_RTO_MIN, TCP_TIMEOUT_INIT};
use crate::event::{Event, EventQueue, LazyTimer, TimerKind};
use cclab_cc::{AckSample, AnyCc, CaState, CcConfig, CongestionControl, CwndEvent, SimDuration, SimTime, TcpState, INFINITE_SSTHRESH};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// `TCP_TIMEOUT_MIN` (2 jiffies at HZ=1000): slack Linux adds to the
/// reorder timer and to the loss probe timeout.
pub const TCP_TIMEOUT_MIN: SimDuration = SimDuration::from_millis(2);
/// Linux `tcp_update_skb_after_send`: sch_fq's habit of not pacing the first 10 packets.
pub const UNPACED_INITIAL_SEGMENTS: u64 = 10;

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
}

pub struct TcpSender {
    pub flow_id: u32,
    /// The state the CC reads and writes.
    pub tcp: TcpState,
    cc: AnyCc,
    pacing: bool,
    /// True once the CC has shown it owns cwnd (`cong_control`), like BBR.
    cc_owns_cwnd: bool,
    total_segments: Option<u64>,
    last_segment_bytes: u32,
    rwnd_segments: Option<u64>,

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
    prr: Prr,
    rack: Rack,
    rtt: RttEstimator,
    rto_backoff: u32,
    consecutive_rtos: u32,
    retransmit_timer: LazyTimer,
    xmit_timer_kind: XmitTimer,
    pacing_timer: LazyTimer,
    tlp_high_seq: Option<u64>,
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
        TcpSender {
            flow_id,
            tcp,
            cc,
            pacing,
            cc_owns_cwnd: false,
            total_segments,
            last_segment_bytes,
            rwnd_segments: rwnd_bytes.map(|b| (b / mss_bytes as u64).max(1)),
            segments: VecDeque::new(),
            sacked_ranges: IntervalSet::default(),
            time_sorted: VecDeque::new(),
            lost_queue: BinaryHeap::new(),
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            high_seq: 0,
            prr: Prr::default(),
            rack: Rack::default(),
            rtt: RttEstimator::default(),
            rto_backoff: 0,
            consecutive_rtos: 0,
            retransmit_timer: LazyTimer::default(),
            xmit_timer_kind: XmitTimer::Rto,
            pacing_timer: LazyTimer::default(),
            tlp_high_seq: None,
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

    pub fn pacing_enabled(&self) -> bool {
        self.pacing
    }

    pub fn cc(&self) -> &AnyCc {
        &self.cc
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

    pub fn start(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        self.sync_state(now);
        self.cc.init(&mut self.tcp);
        self.note_mode(now);
        self.transmit(now, queue, out);
    }

    // ---- state machine helpers ----

    fn set_ca_state(&mut self, now: SimTime, new_state: CaState) {
        if self.tcp.ca_state == new_state {
            return;
        }
        self.sync_state(now);
        self.cc.set_state(&mut self.tcp, new_state);
        self.events.push(FlowEvent { time: now, kind: "ca_state", detail: format!("{:?}", new_state).to_lowercase() });
        self.tcp.ca_state = new_state;
    }

    fn in_cwnd_reduction(&self) -> bool {
        matches!(self.tcp.ca_state, CaState::Recovery | CaState::Cwr)
    }

    /// `tcp_init_cwnd_reduction`.
    fn init_cwnd_reduction(&mut self, now: SimTime) {
        self.high_seq = self.tcp.snd_nxt;
        self.tlp_high_seq = None;
        self.tcp.snd_cwnd_cnt = 0;
        self.tcp.prior_cwnd = self.tcp.snd_cwnd;
        self.prr = Prr::start(self.tcp.snd_cwnd);
        self.sync_state(now);
        self.tcp.snd_ssthresh = self.cc.ssthresh(&self.tcp);
    }

    /// `tcp_end_cwnd_reduction`: classic CCs resume at ssthresh.
    fn end_cwnd_reduction(&mut self, now: SimTime) {
        if self.cc_owns_cwnd {
            return;
        }
        if self.tcp.snd_ssthresh < INFINITE_SSTHRESH {
            self.tcp.snd_cwnd = self.tcp.snd_ssthresh;
        }
        self.sync_state(now);
        self.cc.cwnd_event(&mut self.tcp, CwndEvent::CompleteCwr);
    }

    /// `tcp_enter_recovery`.
    fn enter_recovery(&mut self, now: SimTime) {
        if !self.in_cwnd_reduction() {
            self.init_cwnd_reduction(now);
        }
        self.set_ca_state(now, CaState::Recovery);
    }

    /// `tcp_try_to_open`.
    fn try_to_open(&mut self, now: SimTime) {
        let state = if self.sacked_out + self.lost_out + self.retrans_out > 0 { CaState::Disorder } else { CaState::Open };
        if self.tcp.ca_state != state {
            self.set_ca_state(now, state);
            self.high_seq = self.tcp.snd_nxt;
        }
    }

    /// `tcp_mark_skb_lost`: returns true if the segment was newly counted lost.
    fn mark_lost(&mut self, seq: u64) {
        let seg = self.segment_mut(seq);
        if seg.flags & SACKED != 0 {
            return;
        }
        if seg.flags & LOST != 0 {
            if seg.flags & RETRANS_IN_FLIGHT != 0 {
                // The retransmission itself was lost.
                seg.flags &= !RETRANS_IN_FLIGHT;
                self.retrans_out -= 1;
                self.tcp.lost += 1;
                self.lost_queue.push(Reverse(seq));
            }
        } else {
            seg.flags |= LOST;
            self.lost_out += 1;
            self.tcp.lost += 1;
            self.lost_queue.push(Reverse(seq));
        }
    }

    /// Is this time-sorted entry still a live transmission RACK must judge?
    fn time_sorted_entry_live(&self, xmit_time: SimTime, seq: u64) -> bool {
        if seq < self.tcp.snd_una {
            return false;
        }
        let seg = self.segment(seq);
        seg.xmit_time == xmit_time && seg.flags & SACKED == 0 && !(seg.flags & LOST != 0 && seg.flags & RETRANS_IN_FLIGHT == 0)
    }

    /// `tcp_rack_detect_loss`: marks lost every packet sent before the most
    /// recently delivered one by more than the reordering window. Returns the
    /// longest wait for packets still inside the window.
    fn rack_detect_loss(&mut self, now: SimTime) -> Option<SimDuration> {
        let in_recovery = matches!(self.tcp.ca_state, CaState::Recovery | CaState::Loss);
        let reo_wnd = rack::reo_wnd(false, in_recovery, self.sacked_out, self.rtt.min_rtt(), self.rtt.srtt());
        // Lost packets are a prefix of the live entries (remaining grows with send time).
        while let Some(&(xmit_time, seq)) = self.time_sorted.front() {
            if !self.time_sorted_entry_live(xmit_time, seq) {
                self.time_sorted.pop_front();
                continue;
            }
            if !rack::sent_after(self.rack.xmit_time, self.rack.end_seq, xmit_time, seq) {
                return None;
            }
            if self.rack.remaining(now, xmit_time, reo_wnd) > 0 {
                break;
            }
            self.mark_lost(seq);
            self.time_sorted.pop_front();
        }
        // Packets inside the window: wait for the last of them (Linux takes the max).
        let mut longest: Option<i64> = None;
        for &(xmit_time, seq) in self.time_sorted.iter() {
            if !self.time_sorted_entry_live(xmit_time, seq) {
                continue;
            }
            if !rack::sent_after(self.rack.xmit_time, self.rack.end_seq, xmit_time, seq) {
                break;
            }
            longest = Some(self.rack.remaining(now, xmit_time, reo_wnd));
        }
        longest.map(|ns| SimDuration(ns.max(1) as u64))
    }

    /// `tcp_identify_packet_loss` with RACK. Returns true if a retransmission was lost.
    fn identify_packet_loss(&mut self, now: SimTime, set_xmit_timer: &mut bool, queue: &mut EventQueue) -> bool {
        if self.packets_out() == 0 || !self.rack.advanced {
            return false;
        }
        self.rack.advanced = false;
        let prior_retrans = self.retrans_out;
        if let Some(wait) = self.rack_detect_loss(now) {
            // `tcp_rack_mark_lost`: re-check when the last packet in the window expires.
            self.arm_xmit_timer(XmitTimer::ReoTimeout, now + wait + TCP_TIMEOUT_MIN, queue);
            *set_xmit_timer = false;
        }
        self.retrans_out < prior_retrans
    }

    /// `tcp_fastretrans_alert` for a SACK connection using RACK.
    fn fastretrans_alert(&mut self, now: SimTime, set_xmit_timer: &mut bool, queue: &mut EventQueue) {
        let snd_una = self.tcp.snd_una;
        // D. Exit recovery once everything outstanding at its start is acknowledged.
        if self.tcp.ca_state == CaState::Recovery && snd_una >= self.high_seq {
            self.set_ca_state(now, CaState::Open);
            self.end_cwnd_reduction(now);
        }
        // E. Process the state.
        match self.tcp.ca_state {
            CaState::Recovery => {
                self.identify_packet_loss(now, set_xmit_timer, queue);
                return;
            }
            CaState::Loss => {
                // tcp_process_loss: recovered once snd_una passes high_seq.
                if snd_una >= self.high_seq {
                    self.set_ca_state(now, CaState::Open);
                }
                let lost_retrans = self.identify_packet_loss(now, set_xmit_timer, queue);
                if !(self.tcp.ca_state == CaState::Open || lost_retrans) {
                    return;
                }
            }
            _ => {
                self.identify_packet_loss(now, set_xmit_timer, queue);
            }
        }
        if self.lost_out == 0 {
            self.try_to_open(now);
            return;
        }
        self.enter_recovery(now);
    }

    // ---- ACK processing (tcp_ack) ----

    pub fn on_ack(&mut self, now: SimTime, ack: &AckPacket, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        let cum_ack = ack.cum_ack.min(self.tcp.snd_nxt);
        if cum_ack < self.tcp.snd_una {
            return; // old ACK
        }
        self.tcp.now = now;
        let prior_snd_una = self.tcp.snd_una;
        let prior_in_flight = self.in_flight();
        let prior_delivered = self.tcp.delivered;
        let prior_lost = self.tcp.lost;
        let min_rtt = self.rtt.min_rtt();
        let mut rs = SampleBuilder::default();
        let mut first_sackt: Option<SimTime> = None;
        let mut last_sackt: Option<SimTime> = None;
        let mut newly_sacked = 0u32;

        // tcp_sacktag_write_queue: only the parts of each block not yet SACKed.
        let mut new_ranges = std::mem::take(&mut self.scratch_ranges);
        new_ranges.clear();
        for &(start, end) in ack.sacks() {
            let (start, end) = (start.max(cum_ack), end.min(self.tcp.snd_nxt));
            if start < end {
                self.sacked_ranges.insert(start, end, |a, b| new_ranges.push((a, b)));
            }
        }
        for &(a, b) in &new_ranges {
            for seq in a..b {
                newly_sacked += 1;
                self.sack_one(now, seq, min_rtt, &mut rs, &mut first_sackt, &mut last_sackt);
            }
        }
        self.scratch_ranges = new_ranges;

        // tcp_clean_rtx_queue: the cumulative ACK.
        let mut pkts_acked = 0u32;
        let mut first_ackt: Option<SimTime> = None;
        let mut last_ackt: Option<SimTime> = None;
        let mut retrans_data_acked = false;
        while self.tcp.snd_una < cum_ack {
            let seq = self.tcp.snd_una;
            let mut seg = self.segments.pop_front().expect("outstanding segment");
            if seg.flags & SACKED != 0 {
                self.sacked_out -= 1;
            } else {
                self.tcp.delivered += 1;
                let retransmitted = seg.flags & EVER_RETRANS != 0;
                self.rack.advance(now, seg.xmit_time, seq, retransmitted, min_rtt);
                self.rate.on_delivered(&mut seg.tx, seg.xmit_time, seq, retransmitted, false, &mut rs);
                if seg.flags & LOST != 0 {
                    self.lost_out -= 1;
                }
                if retransmitted {
                    retrans_data_acked = true;
                } else {
                    first_ackt.get_or_insert(seg.xmit_time);
                    last_ackt = Some(seg.xmit_time);
                }
            }
            if seg.flags & RETRANS_IN_FLIGHT != 0 {
                self.retrans_out -= 1;
            }
            pkts_acked += 1;
            self.tcp.snd_una += 1;
        }
        self.sacked_ranges.remove_below(cum_ack);
        let snd_una_advanced = cum_ack > prior_snd_una;
        if snd_una_advanced {
            self.consecutive_rtos = 0;
        }

        // tcp_ack_update_rtt (Karn: no sample from retransmitted data).
        let seq_rtt = match first_ackt {
            Some(t) if !retrans_data_acked => Some(now - t),
            _ => first_sackt.map(|t| now - t),
        };
        let ca_rtt = last_sackt.or(if retrans_data_acked { None } else { last_ackt }).map(|t| now - t);
        if let (Some(seq_rtt), Some(ca_rtt)) = (seq_rtt, ca_rtt) {
            self.rtt.update_min_rtt(ca_rtt);
            self.rtt.on_sample(seq_rtt, self.tcp.snd_una, self.tcp.snd_nxt);
            self.rto_backoff = 0;
            self.stats.rtt_samples_us.push(ca_rtt.as_micros().min(u32::MAX as u64) as u32);
        }
        if pkts_acked > 0 || newly_sacked > 0 {
            self.sync_state(now);
            let sample = AckSample { pkts_acked, rtt: ca_rtt, in_flight: prior_in_flight };
            self.cc.pkts_acked(&mut self.tcp, &sample);
        }
        if self.tlp_high_seq.is_some_and(|h| cum_ack >= h) {
            self.tlp_high_seq = None;
        }

        // Loss detection and recovery state (only for "dubious" ACKs, as Linux).
        let mut set_xmit_timer = snd_una_advanced;
        if !snd_una_advanced || newly_sacked > 0 || self.tcp.ca_state != CaState::Open {
            self.fastretrans_alert(now, &mut set_xmit_timer, queue);
        }

        // tcp_rate_gen + tcp_cong_control.
        let newly_delivered = (self.tcp.delivered - prior_delivered) as u32;
        let newly_lost = (self.tcp.lost - prior_lost) as u32;
        if newly_delivered > 0 {
            self.tcp.delivered_time = now;
        }
        let sample = rate::generate(&rs, now, self.tcp.delivered, newly_delivered, newly_lost, prior_in_flight, self.rtt.min_rtt(), ca_rtt, &mut self.tcp.app_limited);
        self.sync_state(now);
        if self.cc.cong_control(&mut self.tcp, &sample) {
            self.cc_owns_cwnd = true;
        } else if self.in_cwnd_reduction() {
            let in_flight = self.in_flight();
            if let Some(cwnd) = self.prr.on_ack(self.tcp.snd_ssthresh, in_flight, newly_delivered, newly_lost, snd_una_advanced) {
                self.tcp.snd_cwnd = cwnd.max(1);
            }
        } else if snd_una_advanced {
            self.cc.cong_avoid(&mut self.tcp, cum_ack, newly_delivered);
        }
        self.tcp.snd_cwnd = self.tcp.snd_cwnd.clamp(1, self.tcp.snd_cwnd_clamp);

        if set_xmit_timer {
            self.set_xmit_timer(now, queue);
        }
        if self.packets_out() == 0 {
            self.retransmit_timer.cancel();
        }
        self.note_mode(now);
        self.transmit(now, queue, out);
    }

    /// `tcp_sacktag_one` for a newly SACKed segment.
    fn sack_one(&mut self, now: SimTime, seq: u64, min_rtt: Option<SimDuration>, rs: &mut SampleBuilder, first_sackt: &mut Option<SimTime>, last_sackt: &mut Option<SimTime>) {
        let idx = (seq - self.tcp.snd_una) as usize;
        let seg = &mut self.segments[idx];
        debug_assert!(seg.flags & SACKED == 0);
        let retransmitted = seg.flags & EVER_RETRANS != 0;
        self.rack.advance(now, seg.xmit_time, seq, retransmitted, min_rtt);
        if seg.flags & RETRANS_IN_FLIGHT != 0 {
            // Only a retransmission of a lost segment is known to be what arrived.
            if seg.flags & LOST != 0 {
                seg.flags &= !(LOST | RETRANS_IN_FLIGHT);
                self.lost_out -= 1;
                self.retrans_out -= 1;
            }
        } else {
            if !retransmitted {
                first_sackt.get_or_insert(seg.xmit_time);
                *last_sackt = Some(seg.xmit_time);
            }
            if seg.flags & LOST != 0 {
                seg.flags &= !LOST;
                self.lost_out -= 1;
            }
        }
        seg.flags |= SACKED;
        self.sacked_out += 1;
        self.tcp.delivered += 1;
        let xmit_time = seg.xmit_time;
        let mut tx = seg.tx;
        self.rate.on_delivered(&mut tx, xmit_time, seq, retransmitted, true, rs);
        self.segments[idx].tx = tx;
    }

    // ---- timers ----

    fn arm_xmit_timer(&mut self, kind: XmitTimer, at: SimTime, queue: &mut EventQueue) {
        self.xmit_timer_kind = kind;
        let ev = self.timer_event(TimerKind::Retransmit);
        self.retransmit_timer.arm(at, queue, ev);
    }

    /// `tcp_rearm_rto`.
    fn rearm_rto(&mut self, now: SimTime, queue: &mut EventQueue) {
        if self.packets_out() == 0 {
            self.retransmit_timer.cancel();
            return;
        }
        let rto = self.rto_backed_off();
        let at = if self.retransmit_timer.is_armed() && matches!(self.xmit_timer_kind, XmitTimer::ReoTimeout | XmitTimer::LossProbe) {
            // Count the RTO from the oldest outstanding transmission.
            (self.segments[0].xmit_time + rto).max(now + SimDuration(1))
        } else {
            now + rto
        };
        self.arm_xmit_timer(XmitTimer::Rto, at, queue);
    }

    /// `tcp_schedule_loss_probe`: a tail-loss probe 2 x srtt after the last send.
    fn schedule_loss_probe(&mut self, now: SimTime, advancing_rto: bool, queue: &mut EventQueue) -> bool {
        if self.packets_out() == 0 || !matches!(self.tcp.ca_state, CaState::Open | CaState::Cwr) {
            return false;
        }
        let srtt = self.rtt.srtt();
        let mut timeout = if srtt.as_nanos() > 0 {
            // PTO = 2 srtt, plus room for a delayed ACK when only one packet is out.
            let extra = if self.packets_out() == 1 { TCP_RTO_MIN } else { TCP_TIMEOUT_MIN };
            SimDuration(2 * srtt.as_nanos()) + extra
        } else {
            TCP_TIMEOUT_INIT
        };
        let rto_delta = if advancing_rto {
            self.rto_backed_off()
        } else {
            (self.segments[0].xmit_time + self.rto_backed_off()).saturating_since(now)
        };
        if rto_delta.as_nanos() > 0 {
            timeout = timeout.min(rto_delta);
        }
        self.arm_xmit_timer(XmitTimer::LossProbe, now + timeout, queue);
        true
    }

    /// `tcp_set_xmit_timer`.
    fn set_xmit_timer(&mut self, now: SimTime, queue: &mut EventQueue) {
        if !self.schedule_loss_probe(now, true, queue) {
            self.rearm_rto(now, queue);
        }
    }

    pub fn on_timer(&mut self, now: SimTime, kind: TimerKind, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        match kind {
            TimerKind::Retransmit => {
                let ev = self.timer_event(TimerKind::Retransmit);
                if !self.retransmit_timer.on_pop(now, queue, ev) {
                    return;
                }
                self.tcp.now = now;
                match self.xmit_timer_kind {
                    XmitTimer::Rto => self.on_rto(now, queue, out),
                    XmitTimer::LossProbe => self.on_loss_probe(now, queue, out),
                    XmitTimer::ReoTimeout => self.on_reo_timeout(now, queue, out),
                }
            }
            TimerKind::Pacing => {
                let ev = self.timer_event(TimerKind::Pacing);
                if self.pacing_timer.on_pop(now, queue, ev) {
                    self.transmit(now, queue, out);
                }
            }
            TimerKind::DelayedAck | TimerKind::CompressedAck => unreachable!("receiver timers"),
        }
    }

    /// `tcp_retransmit_timer` + `tcp_enter_loss`.
    fn on_rto(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        if self.packets_out() == 0 {
            return;
        }
        self.stats.rto_count += 1;
        self.events.push(FlowEvent { time: now, kind: "rto", detail: format!("backoff {}", self.rto_backoff) });
        // tcp_timeout_mark_lost: the head, and every packet RACK would time out.
        let snd_una = self.tcp.snd_una;
        for idx in 0..self.segments.len() {
            let seq = snd_una + idx as u64;
            let seg = self.segments[idx];
            if seg.flags & SACKED != 0 {
                continue;
            }
            if idx > 0 && self.rack.remaining(now, seg.xmit_time, SimDuration::ZERO) > 0 {
                continue;
            }
            self.mark_lost(seq);
        }
        let state = self.tcp.ca_state;
        if matches!(state, CaState::Open | CaState::Disorder) || self.high_seq <= snd_una || (state == CaState::Loss && self.consecutive_rtos == 0) {
            self.tcp.prior_cwnd = self.tcp.snd_cwnd;
            self.sync_state(now);
            self.tcp.snd_ssthresh = self.cc.ssthresh(&self.tcp);
            self.cc.cwnd_event(&mut self.tcp, CwndEvent::Loss);
        }
        self.tcp.snd_cwnd = self.in_flight() + 1;
        self.tcp.snd_cwnd_cnt = 0;
        self.set_ca_state(now, CaState::Loss);
        self.high_seq = self.tcp.snd_nxt;
        self.tlp_high_seq = None;
        self.consecutive_rtos += 1;
        // Retransmit the head regardless of cwnd, then back off.
        if self.segment(snd_una).flags & (SACKED | RETRANS_IN_FLIGHT) == 0 {
            self.send_segment(now, snd_una, true, out, queue);
        }
        self.rto_backoff += 1;
        let at = now + self.rto_backed_off();
        self.arm_xmit_timer(XmitTimer::Rto, at, queue);
        self.note_mode(now);
        self.transmit(now, queue, out);
    }

    /// `tcp_send_loss_probe`: new data if there is any, else the last segment again.
    fn on_loss_probe(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        if self.tlp_high_seq.is_none() && self.packets_out() > 0 {
            let probe = if self.has_new_data() {
                Some((self.tcp.snd_nxt, false))
            } else {
                let last = self.tcp.snd_nxt - 1;
                (self.segment(last).flags & (SACKED | RETRANS_IN_FLIGHT) == 0).then_some((last, true))
            };
            if let Some((seq, is_retrans)) = probe {
                self.send_segment(now, seq, is_retrans, out, queue);
                self.stats.loss_probes += 1;
                self.tlp_high_seq = Some(self.tcp.snd_nxt);
                self.retransmit_timer.cancel();
            }
        }
        self.rearm_rto(now, queue);
    }

    /// `tcp_rack_reo_timeout`.
    fn on_reo_timeout(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        let prior_in_flight = self.in_flight();
        let wait = self.rack_detect_loss(now);
        if self.in_flight() != prior_in_flight && self.tcp.ca_state != CaState::Recovery {
            self.enter_recovery(now);
            if !self.cc_owns_cwnd {
                let in_flight = self.in_flight();
                if let Some(cwnd) = self.prr.on_ack(self.tcp.snd_ssthresh, in_flight, 1, 0, false) {
                    self.tcp.snd_cwnd = cwnd.max(1);
                }
            }
        }
        match wait {
            Some(w) => self.arm_xmit_timer(XmitTimer::ReoTimeout, now + w + TCP_TIMEOUT_MIN, queue),
            None => self.rearm_rto(now, queue),
        }
        self.transmit(now, queue, out);
    }

    // ---- sending (tcp_write_xmit, tcp_xmit_retransmit_queue) ----

    fn has_new_data(&self) -> bool {
        self.total_segments.is_none_or(|t| self.tcp.snd_nxt < t)
            && self.rwnd_segments.is_none_or(|w| self.packets_out() < w)
    }

    /// The lowest lost segment not yet retransmitted.
    fn next_lost(&mut self) -> Option<u64> {
        while let Some(&Reverse(seq)) = self.lost_queue.peek() {
            if seq >= self.tcp.snd_una {
                let flags = self.segment(seq).flags;
                if flags & LOST != 0 && flags & (SACKED | RETRANS_IN_FLIGHT) == 0 {
                    return Some(seq);
                }
            }
            self.lost_queue.pop();
        }
        None
    }

    fn transmit(&mut self, now: SimTime, queue: &mut EventQueue, out: &mut Vec<Transmission>) {
        let mut sent_new = 0u32;
        let mut cwnd_limited = false;
        loop {
            let lost = self.next_lost();
            let new_data = self.has_new_data();
            if lost.is_none() && !new_data {
                break;
            }
            if self.in_flight() >= self.tcp.snd_cwnd {
                cwnd_limited = true;
                break;
            }
            if self.pacing && self.tcp.next_send_time > now {
                let ev = self.timer_event(TimerKind::Pacing);
                let at = self.tcp.next_send_time;
                self.pacing_timer.arm(at, queue, ev);
                break;
            }
            match lost {
                Some(seq) => {
                    self.lost_queue.pop();
                    let head = seq == self.tcp.snd_una;
                    self.send_segment(now, seq, true, out, queue);
                    if head && self.xmit_timer_kind != XmitTimer::ReoTimeout {
                        let at = now + self.rto_backed_off();
                        self.arm_xmit_timer(XmitTimer::Rto, at, queue);
                    }
                }
                None => {
                    let seq = self.tcp.snd_nxt;
                    self.send_segment(now, seq, false, out, queue);
                    sent_new += 1;
                }
            }
        }
        if sent_new > 0 || cwnd_limited {
            // tcp_cwnd_validate
            if self.tcp.snd_una >= self.cwnd_usage_seq || cwnd_limited || (!self.cwnd_limited && self.packets_out() > self.max_packets_out) {
                self.cwnd_limited = cwnd_limited;
                self.max_packets_out = self.packets_out();
                self.cwnd_usage_seq = self.tcp.snd_nxt;
            }
        }
        if sent_new > 0 {
            self.schedule_loss_probe(now, false, queue);
        }
        if !self.has_new_data() {
            self.check_app_limited();
        }
    }

    /// `tcp_rate_check_app_limited`: out of data with room in cwnd.
    fn check_app_limited(&mut self) {
        if self.in_flight() < self.tcp.snd_cwnd && self.lost_out <= self.retrans_out {
            self.tcp.app_limited = (self.tcp.delivered + self.in_flight() as u64).max(1);
        }
    }

    fn send_segment(&mut self, now: SimTime, seq: u64, is_retrans: bool, out: &mut Vec<Transmission>, queue: &mut EventQueue) {
        let prior_packets_out = self.packets_out();
        if self.in_flight() == 0 {
            self.sync_state(now);
            self.cc.cwnd_event(&mut self.tcp, CwndEvent::TxStart);
        }
        let tx = self.rate.on_send(now, prior_packets_out, &mut self.tcp);
        if is_retrans {
            let seg = self.segment_mut(seq);
            seg.flags |= RETRANS_IN_FLIGHT | EVER_RETRANS;
            seg.xmit_time = now;
            seg.tx = tx;
            self.retrans_out += 1;
            self.stats.retrans_segments += 1;
        } else {
            debug_assert_eq!(seq, self.tcp.snd_nxt);
            self.segments.push_back(Segment { xmit_time: now, tx, flags: 0 });
            self.tcp.snd_nxt += 1;
        }
        self.time_sorted.push_back((now, seq));
        if self.in_cwnd_reduction() {
            self.prr.on_send(1);
        }
        let bytes = self.segment_bytes(seq);
        self.data_segs_out += 1;
        self.stats.data_segments_sent += 1;
        self.stats.bytes_sent += bytes as u64;
        self.advance_send_clock(now, bytes);
        if !is_retrans && (prior_packets_out == 0 || (self.retransmit_timer.is_armed() && self.xmit_timer_kind == XmitTimer::LossProbe)) {
            self.rearm_rto(now, queue);
        }
        out.push(Transmission { seq, payload_bytes: bytes, is_retransmission: is_retrans });
    }

    /// `tcp_wstamp_ns` bookkeeping in `__tcp_transmit_skb` and
    /// `tcp_update_skb_after_send`: the clock never lags `now`; when pacing,
    /// the next departure is one packet's time at the pacing rate later, less
    /// up to half of it when the clock had lagged (idle).
    fn advance_send_clock(&mut self, now: SimTime, payload_bytes: u32) {
        let prior = self.tcp.next_send_time;
        self.tcp.next_send_time = prior.max(now);
        let rate = self.tcp.pacing_rate_bytes_per_sec;
        if self.pacing && rate != u64::MAX && rate > 0 && self.data_segs_out >= UNPACED_INITIAL_SEGMENTS {
            let mut len_ns = payload_bytes as u64 * 1_000_000_000 / rate;
            let credit = (self.tcp.next_send_time - prior).as_nanos();
            len_ns -= (len_ns / 2).min(credit);
            self.tcp.next_send_time += SimDuration(len_ns);
        }
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
        if self.segments.len() as u64 != self.packets_out() {
            return Err(format!("flow {}: {} segments stored, {} outstanding", self.flow_id, self.segments.len(), self.packets_out()));
        }
        Ok(())
    }
}
