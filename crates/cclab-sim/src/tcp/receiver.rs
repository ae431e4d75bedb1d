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
//! grows the window. With the window model (receive_window.rs, model 9 on) the
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
mod tests {
    use super::*;

    /// The kernel's input-path ACK rule alone (no ACK from the application's reads).
    fn receiver_past_quickacks() -> TcpReceiver {
        let mut rx = TcpReceiver::new(SimDuration::from_millis(20));
        rx.ack_each_read_segment = false;
        for seq in 0..TCP_MAX_QUICKACKS as u64 {
            assert_eq!(rx.on_segment(SimTime::ZERO, seq, Ecn::NotEct, false, false).0, AckAction::SendNow);
            rx.make_ack(SimTime::ZERO);
        }
        rx
    }

    #[test]
    fn a_dctcp_receiver_echoes_the_last_segments_ce_and_acks_each_change_with_the_old_state_first() {
        let mut rx = receiver_past_quickacks();
        rx.ecn_ok = true;
        rx.dctcp_echo = true;
        let n = TCP_MAX_QUICKACKS as u64;
        // ECT(0) with nothing changed: the usual delayed ACK, no ECE.
        assert!(matches!(rx.on_segment(SimTime::ZERO, n, Ecn::Ect0, false, false).0, AckAction::Delay(_)));
        assert!(rx.take_dctcp_ack().is_none());
        // CE while that ACK is pending: first an ACK of the data before it with the old
        // state (no ECE), then one at once for all of it with ECE.
        assert_eq!(rx.on_segment(SimTime::ZERO, n + 1, Ecn::Ce, false, false).0, AckAction::SendNow);
        let old = rx.take_dctcp_ack().expect("the old state's ACK");
        assert_eq!((old.cum_ack, old.ece), (n + 1, false));
        let new = rx.make_ack(SimTime::ZERO);
        assert_eq!((new.cum_ack, new.ece), (n + 2, true));
        // More CE: no change, no extra ACK; ECE stays, a CWR does not clear it.
        assert!(matches!(rx.on_segment(SimTime::ZERO, n + 2, Ecn::Ce, true, false).0, AckAction::SendNow));
        assert!(rx.take_dctcp_ack().is_none());
        assert!(rx.make_ack(SimTime::ZERO).ece);
        // Back to ECT with nothing pending: an immediate ACK without ECE, no extra one.
        assert_eq!(rx.on_segment(SimTime::ZERO, n + 3, Ecn::Ect0, false, false).0, AckAction::SendNow);
        assert!(rx.take_dctcp_ack().is_none());
        assert!(!rx.make_ack(SimTime::ZERO).ece);
    }

    #[test]
    fn an_accecn_receiver_counts_every_ce_and_acks_at_once_when_ce_follows_a_clean_packet() {
        let mut rx = receiver_past_quickacks();
        rx.ecn_ok = true;
        rx.accecn = true;
        let n = TCP_MAX_QUICKACKS as u64;
        assert!(matches!(rx.on_segment(SimTime::ZERO, n, Ecn::Ect1, false, false).0, AckAction::Delay(_)));
        // RFC 9768 3.2.2.5.1: CE after a packet that was not CE is ACKed at once.
        assert_eq!(rx.on_segment(SimTime::ZERO, n + 1, Ecn::Ce, false, false).0, AckAction::SendNow);
        let ack = rx.make_ack(SimTime::ZERO);
        assert_eq!((ack.ce_count, ack.ece), (1, false), "the count, not the RFC 3168 latch");
        // A second CE in a row waits for the usual rule; the count keeps every mark.
        assert!(matches!(rx.on_segment(SimTime::ZERO, n + 2, Ecn::Ce, false, false).0, AckAction::Delay(_)));
        rx.on_segment(SimTime::ZERO, n + 3, Ecn::Ect1, false, false);
        assert_eq!(rx.make_ack(SimTime::ZERO).ce_count, 2);
    }

    #[test]
    fn an_rfc3168_receiver_latches_ece_until_cwr() {
        let mut rx = receiver_past_quickacks();
        rx.ecn_ok = true;
        let n = TCP_MAX_QUICKACKS as u64;
        rx.on_segment(SimTime::ZERO, n, Ecn::Ce, false, false);
        assert!(rx.make_ack(SimTime::ZERO).ece);
        rx.on_segment(SimTime::ZERO, n + 1, Ecn::Ect0, false, false);
        assert!(rx.make_ack(SimTime::ZERO).ece, "latched");
        rx.on_segment(SimTime::ZERO, n + 2, Ecn::Ect0, true, false);
        assert!(!rx.make_ack(SimTime::ZERO).ece, "cleared by CWR");
    }

    /// One segment sent at `sent_ms` arriving now, its TSval kept as Linux keeps it.
    fn arrive(rx: &mut TcpReceiver, seq: u64, sent_ms: u64) -> AckAction {
        rx.on_data_timestamp(seq, SimTime(sent_ms * 1_000_000));
        rx.on_segment(SimTime::ZERO, seq, Ecn::NotEct, false, false).0
    }

    #[test]
    fn a_delayed_ack_echoes_its_first_segment_and_the_hole_filler_echoes_the_retransmission() {
        let mut rx = receiver_past_quickacks();
        let n = TCP_MAX_QUICKACKS as u64;
        assert!(matches!(arrive(&mut rx, n, 100), AckAction::Delay(_)));
        assert_eq!(arrive(&mut rx, n + 1, 101), AckAction::SendNow);
        assert_eq!(rx.make_ack(SimTime::ZERO).tsecr, Some(SimTime(100_000_000)), "RFC 7323: the earliest unacknowledged");
        // n + 2 is lost; n + 3 and n + 4 arrive out of order and change nothing.
        arrive(&mut rx, n + 3, 103);
        assert_eq!(rx.make_ack(SimTime::ZERO).tsecr, Some(SimTime(100_000_000)));
        arrive(&mut rx, n + 4, 104);
        assert_eq!(rx.make_ack(SimTime::ZERO).tsecr, Some(SimTime(100_000_000)));
        // The retransmission fills the hole: its TSval is echoed.
        assert_eq!(arrive(&mut rx, n + 2, 150), AckAction::SendNow);
        let ack = rx.make_ack(SimTime::ZERO);
        assert_eq!((ack.cum_ack, ack.tsecr), (n + 5, Some(SimTime(150_000_000))));
    }

    #[test]
    fn after_the_quickacks_every_second_segment_is_acked() {
        let mut rx = receiver_past_quickacks();
        let n = TCP_MAX_QUICKACKS as u64;
        assert!(matches!(rx.on_segment(SimTime::ZERO, n, Ecn::NotEct, false, false).0, AckAction::Delay(_)));
        assert_eq!(rx.on_segment(SimTime::ZERO, n + 1, Ecn::NotEct, false, false).0, AckAction::SendNow);
        assert_eq!(rx.make_ack(SimTime::ZERO).cum_ack, n + 2);
    }

    /// Delivers `per_rtt[k]` segments, evenly spread, in each following RTT of
    /// 20 ms (`round` counts RTTs across calls), each echoing a timestamp one RTT
    /// old (so a receiver with Linux's window knows its RTT), sending an ACK
    /// whenever the receiver asks; returns ACKs per segment of the last RTT.
    fn acks_per_segment_of_last_rtt(rx: &mut TcpReceiver, next_seq: &mut u64, round: &mut u64, per_rtt: &[u64]) -> f64 {
        let rtt_ns = 20_000_000u64;
        let mut acks = 0;
        for &count in per_rtt {
            *round += 1;
            acks = 0;
            for i in 0..count {
                let now = SimTime(*round * rtt_ns + i * rtt_ns / count);
                rx.on_timestamp(now, SimTime(now.as_nanos().saturating_sub(rtt_ns)));
                if rx.on_segment(now, *next_seq, Ecn::NotEct, false, false).0 == AckAction::SendNow {
                    rx.make_ack(now);
                    acks += 1;
                }
                rx.application_read(now);
                *next_seq += 1;
            }
        }
        acks as f64 / *per_rtt.last().unwrap() as f64
    }

    #[test]
    fn reads_are_acked_one_by_one_while_deliveries_per_rtt_grow_and_every_second_in_steady_state() {
        let mut rx = receiver_past_quickacks();
        rx.ack_each_read_segment = true;
        let (mut seq, mut round) = (TCP_MAX_QUICKACKS as u64, 0);
        // Slow start: each RTT delivers twice the last.
        assert_eq!(acks_per_segment_of_last_rtt(&mut rx, &mut seq, &mut round, &[20, 40, 80]), 1.0);
        // Steady state: the same count every RTT, no new maximum.
        let steady = acks_per_segment_of_last_rtt(&mut rx, &mut seq, &mut round, &[80, 80, 80, 80]);
        assert!((0.45..=0.55).contains(&steady), "{steady}");
        // A new high (CUBIC past its previous peak) brings one ACK per read back.
        assert_eq!(acks_per_segment_of_last_rtt(&mut rx, &mut seq, &mut round, &[90, 90]), 1.0);
    }

    #[test]
    fn with_the_window_growing_the_buffer_brings_quick_acks_and_a_steady_one_every_second() {
        let mut rx = TcpReceiver::new(SimDuration::from_millis(20));
        rx.use_receive_window(ReceiveWindow::new(1448, super::super::receive_window::KERNEL_SEGMENT_TRUESIZE_BYTES, SimTime::ZERO));
        let (mut seq, mut round) = (0, 0);
        // Slow start: reads double each RTT, the buffer and clamp grow, rcv_ssthresh
        // follows them two segments per segment, and tcp_grow_window's quick flag ACKs
        // most of them (kernel engine, CUBIC slow start: 360 of 383 ACKed alone).
        let growing = acks_per_segment_of_last_rtt(&mut rx, &mut seq, &mut round, &[20, 40, 80, 160]);
        assert!(growing > 0.8, "{growing}");
        // The same reads every RTT: rcv_ssthresh meets the clamp, every second segment.
        let steady = acks_per_segment_of_last_rtt(&mut rx, &mut seq, &mut round, &[160; 8]);
        assert!((0.45..=0.55).contains(&steady), "{steady}");
    }

    #[test]
    fn an_ack_before_the_reader_runs_offers_only_the_space_its_unread_burst_leaves() {
        // Twenty segments arrive at one instant: the ACK sent then finds them all queued
        // (tcp_space of 131072 - 20 x 2288 bytes: 45 segments past rcv_nxt); once the
        // reader has run, the next ACK offers the 56 a new connection's buffer allows.
        let mut rx = TcpReceiver::new(SimDuration::from_millis(20));
        rx.use_receive_window(ReceiveWindow::new(1448, super::super::receive_window::KERNEL_SEGMENT_TRUESIZE_BYTES, SimTime::ZERO));
        for seq in 0..20 {
            rx.on_segment(SimTime::ZERO, seq, Ecn::NotEct, false, false);
        }
        let ack = rx.make_ack(SimTime::ZERO);
        assert_eq!(ack.window_end - ack.cum_ack, 45);
        let ack = rx.make_ack(SimTime::ZERO + READER_WAKEUP);
        assert_eq!(ack.window_end - ack.cum_ack, 56);
    }

    #[test]
    fn the_acks_tsval_and_the_rtt_its_echo_measures_read_the_same_phased_clock() {
        let mut rx = TcpReceiver::new(SimDuration::from_millis(20));
        rx.use_receive_window(ReceiveWindow::new(1448, super::super::receive_window::KERNEL_SEGMENT_TRUESIZE_BYTES, SimTime::ZERO));
        rx.ts_clock = TsClock { phase: SimDuration::from_micros(950) };
        // An ACK at 10.1 ms reads 11.05 ms: TSval tick 11.
        let sent = SimTime(10_100_000);
        let tsval = rx.make_ack(sent).tsval;
        assert_eq!(tsval, SimTime(11_050_000));
        // Data echoing it 20.0 ms later, at a reading of 31.05 ms: 20 ticks. Read
        // unphased, the arrival (30.1 ms, tick 30) would give 19.
        rx.on_timestamp(sent + SimDuration::from_millis(20), tsval);
        assert_eq!(rx.window.as_ref().unwrap().rcv_rtt_us(), 20_000);
    }

    #[test]
    fn a_segment_being_received_is_charged_so_a_new_connection_offers_56_segments() {
        // Kernel engine (tcp_probe): a new connection's window holds at 56 segments until
        // its buffer grows; with the ACKed segment already read it would offer 67.
        let mut rx = TcpReceiver::new(SimDuration::from_millis(20));
        rx.use_receive_window(ReceiveWindow::new(1448, super::super::receive_window::KERNEL_SEGMENT_TRUESIZE_BYTES, SimTime::ZERO));
        let mut offered = Vec::new();
        for seq in 0..30 {
            // One segment a millisecond: the reader runs between arrivals.
            let now = SimTime(seq * 1_000_000);
            rx.catch_up_reads(now);
            if rx.on_segment(now, seq, Ecn::NotEct, false, false).0 == AckAction::SendNow {
                let ack = rx.make_ack(now);
                offered.push(ack.window_end - ack.cum_ack);
            }
        }
        assert_eq!(offered.last(), Some(&56), "{offered:?}");
        assert!(offered.iter().all(|&w| w <= 56), "{offered:?}");
        // The reader runs READER_WAKEUP after the data: a timer's ACK after it sees
        // nothing unread (the window never moves back, so it still offers 56).
        let later = SimTime(30 * 1_000_000);
        assert_eq!(rx.make_ack(later).window_end - rx.rcv_nxt(), 56);
        assert_eq!(rx.charged_segments(), 0);
    }

    #[test]
    fn after_five_ms_without_data_the_reader_wakes_late_and_within_a_stream_at_once() {
        use cclab_cc::rng::SimRng;
        let mut rx = TcpReceiver::new(SimDuration::from_millis(20));
        rx.idle_reader_wake = Some(AckJitter::new(SimRng::new(7), READER_IDLE_WAKE_MEAN_NS, READER_IDLE_WAKE_FLOOR_NS));
        let read_delay = |rx: &mut TcpReceiver, now: SimTime, seq: u64| {
            rx.catch_up_reads(now);
            rx.on_segment(now, seq, Ecn::NotEct, false, false);
            rx.read_due().unwrap() - now
        };
        // The first data, and each burst after 5 ms without data: late, each its own draw.
        let mut idle_delays = Vec::new();
        for burst in 0..20u64 {
            let now = SimTime(burst * 10_000_000);
            idle_delays.push(read_delay(&mut rx, now, 2 * burst));
            // A segment 100 us later, after that read: the reader is awake.
            let next = now + SimDuration::from_micros(400);
            assert_eq!(read_delay(&mut rx, next, 2 * burst + 1), READER_WAKEUP, "burst {burst}");
        }
        assert!(idle_delays.iter().all(|d| d.as_nanos() >= READER_IDLE_WAKE_FLOOR_NS), "{idle_delays:?}");
        let distinct: std::collections::BTreeSet<u64> = idle_delays.iter().map(|d| d.as_nanos()).collect();
        assert!(distinct.len() > 15, "seeded draws, not one delay: {idle_delays:?}");
        // Without the noise the reader always runs READER_WAKEUP after the data.
        let mut quiet = TcpReceiver::new(SimDuration::from_millis(20));
        assert_eq!(read_delay(&mut quiet, SimTime(50_000_000), 0), READER_WAKEUP);
    }

    #[test]
    fn a_reading_application_gets_every_in_order_segment_acked_at_once() {
        let mut rx = receiver_past_quickacks();
        rx.ack_each_read_segment = true;
        let n = TCP_MAX_QUICKACKS as u64;
        for seq in n..n + 4 {
            assert_eq!(rx.on_segment(SimTime::ZERO, seq, Ecn::NotEct, false, false).0, AckAction::SendNow, "segment {seq}");
            assert_eq!(rx.make_ack(SimTime::ZERO).cum_ack, seq + 1);
        }
        // Out-of-order data is not readable: the first duplicate ACKs go at
        // once, later ones are still compressed.
        for (i, seq) in (n + 5..n + 10).enumerate() {
            let action = rx.on_segment(SimTime::ZERO, seq, Ecn::NotEct, false, false).0;
            if i < TCP_FASTRETRANS_THRESH as usize {
                assert_eq!(action, AckAction::SendNow);
                rx.make_ack(SimTime::ZERO);
            } else {
                assert!(matches!(action, AckAction::Compress(_)), "segment {seq}: {action:?}");
            }
        }
    }

    #[test]
    fn the_read_acks_segments_a_shrinking_window_held_back_and_a_lone_one_still_waits() {
        // A new connection at its 56-segment window, past its quick ACKs: the buffer's
        // limit, not rcv_ssthresh, sets the window, so enough unread data shrinks it.
        let mut rx = TcpReceiver::new(SimDuration::from_millis(20));
        rx.use_receive_window(ReceiveWindow::new(1448, super::super::receive_window::KERNEL_SEGMENT_TRUESIZE_BYTES, SimTime::ZERO));
        let mut now = SimTime::ZERO;
        for seq in 0..40 {
            now = SimTime(seq * 1_000_000);
            rx.catch_up_reads(now);
            if rx.on_segment(now, seq, Ecn::NotEct, false, false).0 == AckAction::SendNow {
                rx.make_ack(now);
            }
        }
        rx.make_ack(now);
        assert_eq!(rx.quickacks_left, 0);
        // One segment: delayed, and its read sends nothing (one MSS is not "more than one").
        let now = SimTime(50_000_000);
        rx.catch_up_reads(now);
        assert!(matches!(rx.on_segment(now, 40, Ecn::NotEct, false, false).0, AckAction::Delay(_)));
        assert!(!rx.read_will_ack(true));
        // A burst before the reader runs: every second segment is ACKed until the unread
        // ones would shrink the window; then __tcp_ack_snd_check holds the ACK back ...
        let mut held_back = 0;
        for seq in 41..60 {
            match rx.on_segment(now, seq, Ecn::NotEct, false, false).0 {
                AckAction::SendNow => {
                    rx.make_ack(now);
                }
                AckAction::Delay(_) => held_back = rx.rcv_nxt() - rx.rcv_wup,
                other => panic!("segment {seq}: {other:?}"),
            }
        }
        assert!(held_back > 1 && rx.rcv_nxt() - rx.rcv_wup > 1, "{held_back}");
        // ... and the read sends it (__tcp_cleanup_rbuf), covering the whole burst.
        assert_eq!(rx.read_due(), Some(now + READER_WAKEUP));
        assert!(rx.read_will_ack(true));
        assert_eq!(rx.make_ack(now + READER_WAKEUP).cum_ack, 60);
        assert!(!rx.read_will_ack(false));
    }

    #[test]
    fn a_pushed_segment_is_acked_by_the_read_that_empties_the_socket_and_a_lone_unpushed_one_waits() {
        let mut rx = receiver_past_quickacks();
        let n = TCP_MAX_QUICKACKS as u64;
        // Without PSH a lone segment waits for the delayed-ACK timer, read or not.
        assert!(matches!(rx.on_segment(SimTime::ZERO, n, Ecn::NotEct, false, false).0, AckAction::Delay(_)));
        assert!(!rx.read_will_ack(true));
        rx.make_ack(SimTime::ZERO);
        // With PSH (ICSK_ACK_PUSHED) the read sends the ACK the timer was holding ...
        assert!(matches!(rx.on_segment(SimTime::ZERO, n + 1, Ecn::NotEct, false, true).0, AckAction::Delay(_)));
        assert!(rx.read_will_ack(true));
        // ... only if an ACK is pending at all (inet_csk_ack_scheduled).
        assert!(!rx.read_will_ack(false));
        // An ACK sent clears the mark: the next lone segment waits again.
        assert_eq!(rx.make_ack(SimTime::ZERO).cum_ack, n + 2);
        assert!(matches!(rx.on_segment(SimTime::ZERO, n + 2, Ecn::NotEct, false, false).0, AckAction::Delay(_)));
        assert!(!rx.read_will_ack(true));
        rx.make_ack(SimTime::ZERO);
        // Data queued out of order keeps memory charged after the read: no pushed ACK.
        rx.on_segment(SimTime::ZERO, n + 5, Ecn::NotEct, false, false);
        rx.make_ack(SimTime::ZERO);
        rx.on_segment(SimTime::ZERO, n + 3, Ecn::NotEct, false, true);
        assert!(!rx.read_will_ack(true));
    }

    #[test]
    fn a_lone_segment_waits_for_the_delayed_ack_timer() {
        let mut rx = receiver_past_quickacks();
        let now = SimTime(1_000);
        assert_eq!(rx.on_segment(now, TCP_MAX_QUICKACKS as u64, Ecn::NotEct, false, false).0, AckAction::Delay(now + TCP_DELACK));
    }

    #[test]
    fn out_of_order_data_is_sacked_most_recent_block_first() {
        let mut rx = receiver_past_quickacks();
        let base = TCP_MAX_QUICKACKS as u64;
        rx.on_segment(SimTime::ZERO, base + 2, Ecn::NotEct, false, false); // hole at base, base+1
        rx.on_segment(SimTime::ZERO, base + 5, Ecn::NotEct, false, false); // hole at base+3, base+4
        let ack = rx.make_ack(SimTime::ZERO);
        assert_eq!(ack.cum_ack, base);
        assert_eq!(ack.sacks(), &[(base + 5, base + 6), (base + 2, base + 3)]);
    }

    #[test]
    fn filling_the_last_hole_acks_everything_at_once() {
        let mut rx = receiver_past_quickacks();
        let base = TCP_MAX_QUICKACKS as u64;
        rx.on_segment(SimTime::ZERO, base + 1, Ecn::NotEct, false, false);
        rx.on_segment(SimTime::ZERO, base + 2, Ecn::NotEct, false, false);
        rx.make_ack(SimTime::ZERO);
        let (action, delivered, _) = rx.on_segment(SimTime::ZERO, base, Ecn::NotEct, false, false);
        assert_eq!(action, AckAction::SendNow);
        assert_eq!(delivered, 3);
        assert_eq!(rx.make_ack(SimTime::ZERO).cum_ack, base + 3);
    }

    #[test]
    fn sack_compression_starts_after_three_immediate_dupacks() {
        let mut rx = receiver_past_quickacks();
        let base = TCP_MAX_QUICKACKS as u64;
        let mut actions = Vec::new();
        for i in 1..=6 {
            let (a, _, _) = rx.on_segment(SimTime::ZERO, base + i, Ecn::NotEct, false, false);
            if a == AckAction::SendNow {
                rx.make_ack(SimTime::ZERO);
            }
            actions.push(a);
        }
        assert_eq!(&actions[..3], &[AckAction::SendNow; 3]);
        assert!(actions[3..].iter().all(|a| matches!(a, AckAction::Compress(_))));
    }

    #[test]
    fn a_compressed_ack_is_flushed_before_a_sack_block_would_be_forgotten() {
        let mut rx = receiver_past_quickacks();
        let base = TCP_MAX_QUICKACKS as u64;
        // Four immediate dupACKs' worth of holes, then compressed ones.
        let mut last_ack = None;
        for i in 0..8u64 {
            let (action, _, flushed) = rx.on_segment(SimTime::ZERO, base + 1 + 2 * i, Ecn::NotEct, false, false);
            if let Some(ack) = flushed {
                // The flushed ACK still reports the three newest blocks before this one.
                assert_eq!(ack.sack_count, 3);
                last_ack = Some(ack);
            }
            if action == AckAction::SendNow {
                rx.make_ack(SimTime::ZERO);
            }
        }
        assert!(last_ack.is_some(), "a pending compressed ACK must be flushed");
    }

    #[test]
    fn a_duplicate_segment_is_acked_at_once() {
        let mut rx = receiver_past_quickacks();
        assert_eq!(rx.on_segment(SimTime::ZERO, 3, Ecn::NotEct, false, false).0, AckAction::SendNow);
    }

    #[test]
    fn a_ce_mark_is_acked_at_once_and_echoed_on_every_ack_until_a_cwr_arrives() {
        let mut rx = receiver_past_quickacks();
        rx.ecn_ok = true;
        let n = TCP_MAX_QUICKACKS as u64;
        assert!(matches!(rx.on_segment(SimTime::ZERO, n, Ecn::Ect0, false, false).0, AckAction::Delay(_)));
        // CE: no delayed ACK (tcp_enter_quickack_mode), and ECE set.
        assert_eq!(rx.on_segment(SimTime::ZERO, n + 1, Ecn::Ce, false, false).0, AckAction::SendNow);
        assert!(rx.make_ack(SimTime::ZERO).ece);
        // Later ACKs keep echoing though their segments are not marked.
        for seq in n + 2..n + 6 {
            if rx.on_segment(SimTime::ZERO, seq, Ecn::Ect0, false, false).0 == AckAction::SendNow {
                assert!(rx.make_ack(SimTime::ZERO).ece);
            }
        }
        // The sender's CWR stops the echo and is ACKed at once.
        assert_eq!(rx.on_segment(SimTime::ZERO, n + 6, Ecn::Ect0, true, false).0, AckAction::SendNow);
        assert!(!rx.make_ack(SimTime::ZERO).ece);
        assert_eq!(rx.ce_segments, 1);
    }

    #[test]
    fn without_negotiated_ecn_a_ce_mark_is_counted_but_not_echoed() {
        let mut rx = receiver_past_quickacks();
        let n = TCP_MAX_QUICKACKS as u64;
        assert!(matches!(rx.on_segment(SimTime::ZERO, n, Ecn::Ce, false, false).0, AckAction::Delay(_)));
        assert!(!rx.make_ack(SimTime::ZERO).ece);
        assert_eq!(rx.ce_segments, 1);
    }
}
