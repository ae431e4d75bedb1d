//! The receiving end: in-order delivery, out-of-order ranges and SACK blocks
//! (RFC 2018), and Linux's ACK policy (`__tcp_ack_snd_check`): an ACK for
//! every second full segment, quick-ACKs at the start, a delayed-ACK timer,
//! immediate ACKs for duplicates and filled holes, and SACK compression
//! while out-of-order data is queued.
//!
//! On top of that rule, the receiving application (a bulk reader, as iperf3)
//! drains the socket as each segment arrives, and Linux then ACKs from
//! `tcp_cleanup_rbuf`: since 6.6 (commit 4720852ed9af, "tcp: fix delayed ACKs
//! for MSS boundary condition") a full-sized segment with PSH marks the ACK
//! as pushed, so the read sends it at once. Measured on the kernel engine
//! (Linux 6.18, 10 Mbit/s, 200 ms, CUBIC slow start): 360 of 383 segments that
//! arrived spaced by the bottleneck were ACKed alone, 12 us after arrival,
//! with or without PSH. So [`TcpReceiver::ack_each_read_segment`] is on by
//! default: the sender sees one ACK per segment, spaced by the bottleneck,
//! which is what HyStart's ACK-train detector keys on (docs/history/FIDELITY-investigations.md,
//! "Calibration: CUBIC slow-start exit").
//!
//! But only while the flow's delivery per RTT is reaching new highs. In steady
//! state the same kernel receiver ACKs every second segment (0.50-0.55 ACKs
//! per segment at 10, 20 and 50 Mbit/s, receiver namespace's TcpOutSegs over
//! TcpInSegs), and switches to one per segment in the phases where CUBIC's
//! window climbs past its previous peak. That is when receive-buffer
//! autotuning (`tcp_rcv_space_adjust`: a new maximum of bytes copied per RTT)
//! grows the window. With the window model (receive_window.rs) the
//! mechanism itself runs: while `tcp_grow_window` can still raise `rcv_ssthresh`
//! (the clamp grew with the buffer), it sets `icsk_ack.quick`, and
//! `__tcp_ack_snd_check` ACKs that segment at once; once `rcv_ssthresh` meets
//! the clamp, the every-second-segment rule is left. Without it (a receiver that
//! never limits its sender) the model keeps that rule's trigger: per-RTT
//! delivered segments above the highest count seen so far.

use super::interval_set::IntervalSet;
use super::receive_window::ReceiveWindow;
use super::rtt::TsClock;
use crate::jitter::AckJitter;
use cclab_aqm::Ecn;
use cclab_cc::{SimDuration, SimTime};

/// `TCP_MAX_QUICKACKS`: ACK every segment for the first 16 (Linux `tcp_incr_quickack`).
pub const TCP_MAX_QUICKACKS: u32 = 16;
/// `TCP_DELACK_MIN` / `TCP_ATO_MIN`: the delayed-ACK timeout (HZ/25).
pub const TCP_DELACK: SimDuration = SimDuration::from_millis(40);
/// `TCP_FASTRETRANS_THRESH`: duplicate ACKs sent at once before SACK compression starts.
pub const TCP_FASTRETRANS_THRESH: u32 = 3;
/// `net.ipv4.tcp_comp_sack_nr` default: at most 44 ACKs compressed into one.
pub const TCP_COMP_SACK_NR: u32 = 44;
/// `net.ipv4.tcp_comp_sack_delay_ns` default: 1 ms cap on the compression delay.
pub const TCP_COMP_SACK_DELAY_MAX: SimDuration = SimDuration::from_millis(1);
/// Linux sends at most 3 SACK blocks beside the timestamps option
/// (`TCP_SACK_BLOCKS_EXPECTED`).
pub const MAX_SACK_BLOCKS: usize = 3;
/// `TCP_NUM_SACKS`: blocks the receiver remembers.
pub const TCP_NUM_SACKS: usize = 4;
/// From data arriving in order to the application having read it: the kernel engine's
/// receiver ACKed segments from `tcp_cleanup_rbuf`, which runs after the read, 12 us after
/// they arrived (module comment). Data arriving meanwhile (a burst) is read with it.
pub const READER_WAKEUP: SimDuration = SimDuration::from_micros(12);
/// Data after this long without any finds the reader asleep: the machine's idle threshold.
pub const READER_IDLE: SimDuration = SimDuration(crate::wake::IDLE_NS);
/// The kernel engine's reader after [`READER_IDLE`]: 45-297 us from a burst's first segment
/// to its first read, median about 90 (`bench/kernel_receiver_trace.py`, 8 runs; docs/
/// FIDELITY.md, "Tried, not landed: a reader that wakes late after idle"), drawn as this
/// floor (12 us plus 33) and an exponential of [`READER_IDLE_WAKE_MEAN_NS`] (median 95 us).
pub const READER_IDLE_WAKE_FLOOR_NS: u64 = 45_000;
pub const READER_IDLE_WAKE_MEAN_NS: u64 = 72_000;

/// A cumulative ACK with up to three SACK blocks, most recent first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckPacket {
    pub cum_ack: u64,
    pub sack_blocks: [(u64, u64); MAX_SACK_BLOCKS],
    pub sack_count: u8,
    /// ECN-Echo: a CE-marked segment arrived and no CWR has answered it yet.
    pub ece: bool,
    /// Accurate ECN (RFC 9768): the receiver's count of CE-marked packets (`r.cep`),
    /// carried whole (the ACE field's 3 bits plus the AccECN option, never wrapping here).
    pub ce_count: u32,
    /// The advertised window's right edge in segments (`cum_ack + window / mss`);
    /// `u64::MAX` from a receiver that never limits its sender.
    pub window_end: u64,
    /// The timestamp option's TSval: when the receiver sent this ACK.
    pub tsval: SimTime,
    /// The timestamp option's TSecr: the TSval the receiver holds (`ts_recent`); `None`
    /// before any data arrived.
    pub tsecr: Option<SimTime>,
}

impl Default for AckPacket {
    fn default() -> Self {
        AckPacket { cum_ack: 0, sack_blocks: [(0, 0); MAX_SACK_BLOCKS], sack_count: 0, ece: false, ce_count: 0, window_end: u64::MAX, tsval: SimTime::ZERO, tsecr: None }
    }
}

impl AckPacket {
    pub fn sacks(&self) -> &[(u64, u64)] {
        &self.sack_blocks[..self.sack_count as usize]
    }
}

/// What the receiver wants after a segment arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckAction {
    SendNow,
    /// Arm the delayed-ACK timer for this time (if not armed).
    Delay(SimTime),
    /// Arm the SACK-compression timer for this time (if not armed).
    Compress(SimTime),
}

pub struct TcpReceiver {
    /// When the last data segment arrived: a burst after [`READER_IDLE`] wakes the reader late.
    last_arrival: Option<SimTime>,
    /// The reader's seeded wake-up after idle; `None` (the noiseless model): always [`READER_WAKEUP`].
    pub idle_reader_wake: Option<AckJitter>,
    /// Next expected segment.
    rcv_nxt: u64,
    /// `rcv_wup`: rcv_nxt when the last ACK was sent.
    rcv_wup: u64,
    /// `rx_opt.ts_recent`: the data's TSval the ACKs echo.
    ts_recent: Option<SimTime>,
    /// The clock this host's timestamps read.
    pub ts_clock: TsClock,
    out_of_order: IntervalSet,
    /// `tp->selective_acks`: SACK blocks, most recently changed first.
    sack_blocks: Vec<(u64, u64)>,
    quickacks_left: u32,
    /// SACK compression state (`tp->compressed_ack`, `dup_ack_counter`, `compressed_ack_rcv_nxt`).
    compressed_acks: u32,
    dup_ack_counter: u32,
    compressed_ack_rcv_nxt: u64,
    comp_sack_delay: SimDuration,
    /// The application reads each in-order segment as it arrives and Linux
    /// ACKs it from `tcp_cleanup_rbuf` (see the module comment). Off: the
    /// kernel's input-path rule alone, an ACK for every second segment.
    pub ack_each_read_segment: bool,
    /// `rcvq_space`: the window over which deliveries are counted (the
    /// receiver's RTT estimate), its start, its count, the highest count of a
    /// finished window, and whether the last finished window beat it.
    rcv_space_window: SimDuration,
    rcv_space_window_start: SimTime,
    rcv_space_window_segments: u64,
    rcv_space_max_segments: u64,
    rcv_space_growing: bool,
    /// `TCP_ECN_OK`: ECN was negotiated (RFC 3168).
    pub ecn_ok: bool,
    /// `TCP_ECN_DEMAND_CWR`: echo ECE on every ACK until a CWR arrives.
    demand_cwr: bool,
    /// `TCP_ECN_SEEN`: an ECT or CE segment has arrived.
    ecn_seen: bool,
    /// Accurate ECN negotiated: ACKs carry the CE count instead of the ECE latch.
    pub accecn: bool,
    /// Was the last data segment CE-marked (AccECN's change-triggered ACK)?
    last_segment_ce: bool,
    /// The receiving socket's CC needs ECN (DCTCP, `tcp_ca_needs_ecn`): ECE echoes
    /// the last data segment's CE bit (tcp_dctcp.h `dctcp_ece_ack_update`).
    pub dctcp_echo: bool,
    /// DCTCP's `ce_state` (was the last data segment CE?) and `prior_rcv_nxt`.
    dctcp_ce_state: bool,
    dctcp_prior_rcv_nxt: u64,
    /// The ACK DCTCP sends for the data before a CE change, with the old state's ECE;
    /// taken by the caller before this segment's own ACK.
    dctcp_ack: Option<AckPacket>,
    /// Data segments that arrived CE-marked.
    pub ce_segments: u64,
    /// Segments received, duplicates included.
    pub segments_received: u64,
    /// Segments delivered in order.
    pub segments_delivered: u64,
    /// ACKs sent (pure ACKs: the receiver sends no data).
    pub acks_sent: u64,
    /// Linux's receive-buffer autotuning and advertised window; `None`: the receiver
    /// never limits its sender.
    window: Option<ReceiveWindow>,
    /// Segments queued out of order (their memory is charged to the buffer).
    ooo_segments: u64,
    /// In-order segments queued and not read yet, and when the application reads them
    /// ([`READER_WAKEUP`] after the first arrives). The read changes only this
    /// receiver, so it is made when the receiver is next touched, at its own time.
    unread_segments: u64,
    read_at: Option<SimTime>,
    /// `ICSK_ACK_PUSHED`: an in-order full-sized segment carried PSH since the last ACK
    /// (`tcp_measure_rcv_mss`, Linux 6.6+); a read that empties the socket then ACKs.
    ack_pushed: bool,
}

impl TcpReceiver {
    /// `base_rtt` stands in for the receiver's own RTT estimate (`rcv_rtt_est`),
    /// which sets the SACK-compression delay: min(1 ms, RTT/20).
    pub fn new(base_rtt: SimDuration) -> Self {
        TcpReceiver {
            last_arrival: None,
            idle_reader_wake: None,
            rcv_nxt: 0,
            rcv_wup: 0,
            ts_recent: None,
            ts_clock: TsClock::default(),
            out_of_order: IntervalSet::default(),
            sack_blocks: Vec::with_capacity(TCP_NUM_SACKS + 1),
            quickacks_left: TCP_MAX_QUICKACKS,
            compressed_acks: 0,
            dup_ack_counter: 0,
            compressed_ack_rcv_nxt: 0,
            comp_sack_delay: TCP_COMP_SACK_DELAY_MAX.min(SimDuration(base_rtt.as_nanos() / 20)),
            ack_each_read_segment: true,
            rcv_space_window: base_rtt,
            rcv_space_window_start: SimTime::ZERO,
            rcv_space_window_segments: 0,
            rcv_space_max_segments: 0,
            // A new connection's buffer grows from its first RTT (tcp_init_buffer_space).
            rcv_space_growing: true,
            ecn_ok: false,
            demand_cwr: false,
            ecn_seen: false,
            accecn: false,
            last_segment_ce: false,
            dctcp_echo: false,
            dctcp_ce_state: false,
            dctcp_prior_rcv_nxt: 0,
            dctcp_ack: None,
            ce_segments: 0,
            segments_received: 0,
            segments_delivered: 0,
            acks_sent: 0,
            window: None,
            ooo_segments: 0,
            unread_segments: 0,
            read_at: None,
            ack_pushed: false,
        }
    }

    /// Advertise Linux's autotuned window from now on.
    pub fn use_receive_window(&mut self, window: ReceiveWindow) {
        self.window = Some(window);
    }

    /// A data segment's timestamp echo (`tcp_rcv_rtt_measure_ts`).
    pub fn on_timestamp(&mut self, now: SimTime, tsecr: SimTime) {
        if let Some(w) = &mut self.window {
            w.on_timestamp(self.ts_clock.read(now), tsecr);
        }
    }

    /// `tcp_replace_ts_recent`, before the segment is queued: keep its TSval if it starts
    /// at or before `rcv_wup` (in order after the last ACK sent, or the retransmission
    /// that fills the hole the ACKs point at) and `tcp_sequence` admits it. So a delayed
    /// ACK echoes the first of the segments it covers (RFC 7323 4.3), and the ACK that
    /// fills a hole echoes the retransmission.
    pub fn on_data_timestamp(&mut self, seq: u64, tsval: SimTime) {
        let in_window = seq + 1 >= self.rcv_wup;
        if in_window && seq <= self.rcv_wup && self.ts_recent.is_none_or(|t| tsval >= t) {
            self.ts_recent = Some(tsval);
        }
    }

    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    /// A data segment arrived. Returns the ACK action, how many segments
    /// became deliverable in order, and possibly a compressed ACK that must be
    /// sent *before* this segment is accounted (so no SACK block is lost).
    pub fn on_segment(&mut self, now: SimTime, seq: u64, ecn: Ecn, cwr: bool, psh: bool) -> (AckAction, u64, Option<AckPacket>) {
        self.segments_received += 1;
        let previous_arrival = self.last_arrival.replace(now);
        if ecn == Ecn::Ce {
            self.ce_segments += 1;
        }
        // tcp_ecn_accept_cwr (tcp_data_queue, before anything else): the sender
        // reduced; stop echoing, and ACK this data at once (its cwnd may be tiny).
        let mut ack_now = false;
        if cwr && self.ecn_ok {
            self.demand_cwr = false;
            ack_now = true;
        }
        if seq < self.rcv_nxt || self.out_of_order.contains(seq) {
            // A duplicate: Linux enters quick-ACK mode and ACKs at once (with a D-SACK).
            return (AckAction::SendNow, 0, None);
        }
        // tcp_ecn_check_ce, for in-order (tcp_event_data_recv) and out-of-order
        // (tcp_data_queue_ofo) data alike.
        if self.ecn_ok && self.accecn {
            // RFC 9768 section 3.2.2.5.1: a CE after a packet that was not CE is ACKed at once,
            // so the change reaches the sender within the ACE counter's range.
            let ce = ecn == Ecn::Ce;
            ack_now |= ce && !self.last_segment_ce;
            self.last_segment_ce = ce;
        } else if self.ecn_ok {
            if self.dctcp_echo && ecn != Ecn::NotEct {
                ack_now |= self.dctcp_ece_ack_update(now, ecn == Ecn::Ce);
            }
            self.check_ce(ecn);
        }
        let before = self.rcv_nxt;
        let mut hole_filled = false;
        let mut window_grew = false;
        let mut flushed = None;
        if seq == self.rcv_nxt {
            // tcp_event_data_recv -> tcp_measure_rcv_mss: a full-sized segment with PSH
            // marks the ACK as pushed (since 4720852ed9af, "tcp: fix delayed ACKs for MSS
            // boundary condition"; every segment here is full-sized).
            self.ack_pushed |= psh;
            self.rcv_nxt += 1;
            let rcv_nxt_of_segment = self.rcv_nxt;
            // Queued before tcp_event_data_recv runs: this segment is charged too.
            let charged_on_arrival = self.ooo_segments + self.unread_segments + 1;
            if let Some((start, end)) = self.out_of_order.first() {
                if start == self.rcv_nxt {
                    self.ooo_segments -= end - start;
                    self.rcv_nxt = end;
                }
                self.out_of_order.remove_below(self.rcv_nxt);
                // RFC 5681 4.2: ACK at once when a gap is filled.
                hole_filled = self.out_of_order.is_empty();
            }
            self.unread_segments += self.rcv_nxt - before;
            if self.read_at.is_none() {
                let after_idle = previous_arrival.is_none_or(|t| now.saturating_since(t) >= READER_IDLE);
                let wake = match &mut self.idle_reader_wake {
                    Some(idle_wake) if after_idle => idle_wake.draw(),
                    _ => READER_WAKEUP,
                };
                self.read_at = Some(now + wake);
            }
            if let Some(w) = &mut self.window {
                window_grew = w.on_in_order_data(now, rcv_nxt_of_segment, charged_on_arrival);
            }
            // tcp_sack_remove: blocks now below rcv_nxt are gone.
            let rcv_nxt = self.rcv_nxt;
            self.sack_blocks.retain(|&(start, _)| start > rcv_nxt);
        } else {
            flushed = self.sack_new_ofo(now, seq, seq + 1);
            self.out_of_order.insert(seq, seq + 1, |_, _| {});
            self.ooo_segments += 1;
            if let Some(w) = &mut self.window {
                let ooo_end = self.out_of_order.last().map_or(seq + 1, |(_, end)| end);
                window_grew = w.on_out_of_order_data(self.ooo_segments, ooo_end - self.rcv_nxt);
            }
        }
        let delivered = self.rcv_nxt - before;
        self.segments_delivered += delivered;
        // dctcp_ece_ack_update runs after tcp_queue_rcv: prior_rcv_nxt includes this segment.
        self.dctcp_prior_rcv_nxt = self.rcv_nxt;
        // The per-RTT stand-in for autotuning, needed only without the window model.
        if delivered > 0 && self.window.is_none() {
            self.count_for_rcv_space(now, delivered);
        }

        // tcp_grow_window: a segment that raised rcv_ssthresh sets `icsk_ack.quick |= 1`.
        if window_grew {
            self.quickacks_left |= 1;
        }
        // __tcp_ack_snd_check: more than one full segment unacked (unless the window
        // would shrink), quick-ACK mode, or a one-time immediate ACK.
        let charged = self.charged_segments();
        let two_segments = self.rcv_nxt - self.rcv_wup > 1 && self.window.as_ref().is_none_or(|w| !w.window_would_shrink(charged));
        if two_segments || self.quickacks_left > 0 || hole_filled || ack_now {
            return (AckAction::SendNow, delivered, flushed);
        }
        // Without the window model, its effect: in order with nothing queued out of
        // order, the application reads it at once and tcp_cleanup_rbuf ACKs it.
        if self.window.is_none() && self.ack_each_read_segment && self.rcv_space_growing && delivered > 0 && self.out_of_order.is_empty() {
            return (AckAction::SendNow, delivered, flushed);
        }
        if self.out_of_order.is_empty() {
            return (AckAction::Delay(now + TCP_DELACK), delivered, flushed);
        }
        // Out-of-order data queued: send the first duplicate ACKs at once, then
        // compress further SACKs (tcp_comp_sack_*).
        if self.compressed_acks >= TCP_COMP_SACK_NR {
            return (AckAction::SendNow, delivered, flushed);
        }
        if self.compressed_ack_rcv_nxt != self.rcv_nxt {
            self.compressed_ack_rcv_nxt = self.rcv_nxt;
            self.dup_ack_counter = 0;
        }
        if self.dup_ack_counter < TCP_FASTRETRANS_THRESH {
            self.dup_ack_counter += 1;
            return (AckAction::SendNow, delivered, flushed);
        }
        self.compressed_acks += 1;
        (AckAction::Compress(now + self.comp_sack_delay), delivered, flushed)
    }

    /// `__tcp_ecn_check_ce`: the first CE after the last CWR starts the echo
    /// and ACKs at once (`tcp_enter_quickack_mode(sk, 2)`: the sender may have
    /// a tiny cwnd); Not-ECT after ECT was seen is likely a retransmission,
    /// which is ACKed at once too.
    fn check_ce(&mut self, ecn: Ecn) {
        match ecn {
            Ecn::NotEct => {
                if self.ecn_seen {
                    self.enter_quickack_mode(2);
                }
            }
            Ecn::Ce => {
                if !self.demand_cwr {
                    self.enter_quickack_mode(2);
                    self.demand_cwr = true;
                }
                self.ecn_seen = true;
            }
            Ecn::Ect0 | Ecn::Ect1 => self.ecn_seen = true,
        }
    }

    /// `dctcp_ece_ack_update`: on a change of CE state, first ACK the data before this
    /// segment with the old state's ECE if a delayed ACK was pending, then ACK at once
    /// (`ICSK_ACK_NOW`); from now on every ACK echoes the new state. Returns whether an
    /// immediate ACK is due.
    fn dctcp_ece_ack_update(&mut self, now: SimTime, ce: bool) -> bool {
        let changed = self.dctcp_ce_state != ce;
        // ICSK_ACK_TIMER: data arrived since the last ACK, so one is being delayed.
        if changed && self.dctcp_prior_rcv_nxt > self.rcv_wup {
            let mut ack = self.ack_fields(now);
            ack.cum_ack = self.dctcp_prior_rcv_nxt;
            ack.ece = self.dctcp_ce_state;
            // tcp_event_ack_sent returns early for it: the delayed-ACK state stays.
            self.acks_sent += 1;
            self.dctcp_ack = Some(ack);
        }
        self.dctcp_ce_state = ce;
        // dctcp_ece_ack_cwr: TCP_ECN_DEMAND_CWR follows the state. The generic check
        // after it then finds it set and adds no quick ACKs of its own.
        self.demand_cwr = ce;
        changed
    }

    /// DCTCP's ACK for the data before a CE change, to be sent before anything else.
    pub fn take_dctcp_ack(&mut self) -> Option<AckPacket> {
        self.dctcp_ack.take()
    }

    /// `tcp_enter_quickack_mode` / `tcp_incr_quickack`: at least `max_quickacks`
    /// immediate ACKs (the receive window is never the smaller bound here).
    fn enter_quickack_mode(&mut self, max_quickacks: u32) {
        self.quickacks_left = self.quickacks_left.max(max_quickacks);
    }

    /// `tcp_rcv_space_adjust`, reduced to its trigger: once per receiver RTT,
    /// did the segments delivered in the last RTT beat every earlier RTT's?
    fn count_for_rcv_space(&mut self, now: SimTime, delivered: u64) {
        if now >= self.rcv_space_window_start + self.rcv_space_window {
            self.rcv_space_growing = self.rcv_space_window_segments > self.rcv_space_max_segments;
            self.rcv_space_max_segments = self.rcv_space_max_segments.max(self.rcv_space_window_segments);
            self.rcv_space_window_start = now;
            self.rcv_space_window_segments = 0;
        }
        self.rcv_space_window_segments += delivered;
    }

    /// `tcp_sack_new_ofo_skb`: extend the block this segment touches (or start
    /// a new one) and move it to the front. Before a block would fall out of
    /// the three that fit in an ACK, a pending compressed ACK is sent first
    /// (`tcp_sack_compress_send_ack`), so the sender never misses a block.
    fn sack_new_ofo(&mut self, now: SimTime, start: u64, end: u64) -> Option<AckPacket> {
        let touches = |b: &(u64, u64)| b.0 <= end && start <= b.1;
        let mut flushed = None;
        if let Some(idx) = self.sack_blocks.iter().position(touches) {
            if idx >= MAX_SACK_BLOCKS {
                flushed = self.flush_compressed_ack(now);
            }
            let mut block = self.sack_blocks.remove(idx);
            block = (block.0.min(start), block.1.max(end));
            // tcp_sack_maybe_coalesce: the grown block may now touch others.
            self.sack_blocks.retain(|b| {
                let merge = b.0 <= block.1 && block.0 <= b.1;
                if merge {
                    block = (block.0.min(b.0), block.1.max(b.1));
                }
                !merge
            });
            self.sack_blocks.insert(0, block);
        } else {
            if self.sack_blocks.len() >= MAX_SACK_BLOCKS {
                flushed = self.flush_compressed_ack(now);
            }
            self.sack_blocks.insert(0, (start, end));
            self.sack_blocks.truncate(TCP_NUM_SACKS);
        }
        flushed
    }

    /// The segments whose memory the socket holds: out of order, or in order and unread.
    fn charged_segments(&self) -> u64 {
        self.ooo_segments + self.unread_segments
    }

    /// When the application will read the data waiting in order, if any.
    pub fn read_due(&self) -> Option<SimTime> {
        self.read_at
    }

    /// `__tcp_cleanup_rbuf`, after the read that is due: would it send an ACK?
    /// `ack_scheduled` (`inet_csk_ack_scheduled`): a delayed ACK is pending. Either more
    /// than one full segment is unacknowledged (the input path held that ACK back because
    /// the unread data would have shrunk the window; "tcp_recvmsg() will send ACK
    /// otherwise", as `__tcp_ack_snd_check` says), or the freed memory at least doubles a
    /// window that has shrunk to half the clamp or less. Evaluated on arrival with the
    /// memory the read will free, which nothing but the read changes until then. Or, third,
    /// a pushed segment arrived (`ICSK_ACK_PUSHED`) and the read empties the socket: nothing
    /// queued out of order (`sk_rmem_alloc` 0 after the copy; a bulk receiver is never in
    /// pingpong mode).
    pub fn read_will_ack(&self, ack_scheduled: bool) -> bool {
        if self.read_at.is_none() {
            return false;
        }
        if ack_scheduled && (self.rcv_nxt - self.rcv_wup > 1 || (self.ack_pushed && self.ooo_segments == 0)) {
            return true;
        }
        self.window.as_ref().is_some_and(|w| w.read_doubles_window(self.rcv_nxt, self.ooo_segments))
    }

    /// Makes the application's read if it was due by `now`.
    pub fn catch_up_reads(&mut self, now: SimTime) {
        if let Some(at) = self.read_at.filter(|&at| at <= now) {
            self.application_read(at);
        }
    }

    /// The application, woken after the arrival's ACK decision (`tcp_data_ready` comes
    /// last in `tcp_rcv_established`), reads all in-order data at `now`.
    fn application_read(&mut self, now: SimTime) {
        self.read_at = None;
        if self.unread_segments == 0 {
            return;
        }
        self.unread_segments = 0;
        if let Some(w) = &mut self.window {
            w.on_read(now, self.rcv_nxt);
        }
    }

    fn flush_compressed_ack(&mut self, now: SimTime) -> Option<AckPacket> {
        (self.compressed_acks > 0).then(|| self.make_ack(now))
    }

    /// The out-of-order data fits the buffer the window promised: its memory stays
    /// within `sk_rcvbuf` plus one window-scale unit of rounding.
    pub fn check_invariants(&self) -> Result<(), String> {
        if let Some(w) = &self.window {
            let (used, allowed) = (self.ooo_segments * w.truesize_bytes(), w.rcvbuf_bytes() + w.rounding_slack_bytes());
            if used > allowed {
                return Err(format!("receiver: {used} bytes queued out of order in a {allowed}-byte buffer"));
            }
        }
        Ok(())
    }

    /// True while a compressed ACK is pending.
    pub fn has_compressed_ack(&self) -> bool {
        self.compressed_acks > 0
    }

    /// The fields of an ACK sent now: cumulative ACK, ECE while the echo is demanded
    /// (`tcp_ecn_send`), the window, SACK blocks and timestamps.
    fn ack_fields(&mut self, now: SimTime) -> AckPacket {
        let mut ack = AckPacket { cum_ack: self.rcv_nxt, ece: self.demand_cwr, tsval: self.ts_clock.read(now), tsecr: self.ts_recent, ..AckPacket::default() };
        if self.accecn {
            ack.ce_count = self.ce_segments as u32;
        }
        let charged = self.charged_segments();
        if let Some(w) = &mut self.window {
            ack.window_end = w.select_window_end(self.rcv_nxt, charged);
        }
        for &block in self.sack_blocks.iter().take(MAX_SACK_BLOCKS) {
            ack.sack_blocks[ack.sack_count as usize] = block;
            ack.sack_count += 1;
        }
        ack
    }

    /// Builds the ACK to send now and resets the ACK-policy state
    /// (`tcp_event_ack_sent`).
    pub fn make_ack(&mut self, now: SimTime) -> AckPacket {
        self.catch_up_reads(now);
        let ack = self.ack_fields(now);
        self.rcv_wup = self.rcv_nxt;
        // tcp_event_ack_sent -> inet_csk_clear_xmit_timer(ICSK_TIME_DACK): pending flags go.
        self.ack_pushed = false;
        self.acks_sent += 1;
        self.compressed_acks = 0;
        self.quickacks_left = self.quickacks_left.saturating_sub(1);
        ack
    }
}

#[cfg(test)]
#[path = "receiver_tests.rs"]
mod tests;
