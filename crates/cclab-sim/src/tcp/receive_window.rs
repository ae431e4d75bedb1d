//! The receiver's buffer and the window it advertises, as Linux 6.18 tunes them
//! (net/ipv4/tcp_input.c, tcp_output.c; include/net/tcp.h). docs/RECEIVE_WINDOW.md
//! records the source and what the kernel engine measured.
//!
//! Why it matters: while a hole sits at `rcv_nxt`, nothing is read, so the buffer stops
//! growing for that RTT, and out-of-order data eats the free space. The right edge
//! then stays where one RTT of reads put it, and a long-RTT flow in STARTUP or slow
//! start meets it whatever its cwnd says (kernel engine: 2 BBR flows at 20 and 80 ms,
//! the long one `rwnd_limited` at 565-577 segments).
//!
//! Units: the window quantities are bytes, as in Linux; sequence numbers are segments
//! of `mss_bytes` (the simulator's unit), turned into bytes where Linux compares them.
//! The application reads every in-order byte soon after it arrives (a bulk reader:
//! iperf3), but only after the softirq that queued it has sent its ACK
//! (`tcp_rcv_established` queues, grows the window, ACKs, then wakes the reader). So
//! the memory charged to the socket is the out-of-order queue's plus, while a segment
//! is being received, the in-order data not read yet.

use cclab_cc::SimTime;
use super::rtt::TS_TICK_NS;

/// `tcp_rmem[1]`: the buffer a connection starts with. The kernel engine sets
/// `net.ipv4.tcp_rmem = 4096 131072 536870912` in its namespaces
/// (python/cclab/engines/kernel/topology.py).
pub const TCP_RMEM_DEFAULT_BYTES: u64 = 131_072;
/// `tcp_rmem[2]`: the most autotuning grows the buffer to (same setting; the spec's
/// `[host] tcp_rmem_max` replaces it, `with_tcp_rmem_max`).
pub const TCP_RMEM_MAX_BYTES: u64 = 536_870_912;
/// `net.core.rmem_max` in the kernel engine's namespaces, which cannot change it (read-only
/// there): 4 MiB on its host (docs/RECEIVE_WINDOW.md; Linux's own default `SK_RMEM_MAX` is
/// 212,992). The window scale is chosen for the larger of it and `tcp_rmem[2]`
/// (`tcp_select_initial_window`), and SO_RCVBUF is clamped to it.
pub const NET_CORE_RMEM_MAX_BYTES: u64 = 4_194_304;
/// `SOCK_MIN_RCVBUF` (include/net/sock.h: `TCP_SKB_MIN_TRUESIZE`, 2048 + the aligned
/// `struct sk_buff`, 256 bytes): the least SO_RCVBUF leaves.
const SOCK_MIN_RCVBUF_BYTES: u64 = 2_304;
/// Memory charged for one full-sized segment of 1448 bytes (`skb->truesize`). Measured on
/// the kernel engine with the `tcp:tcp_rcvbuf_grow` tracepoint: `scaling_ratio = len * 256 /
/// truesize` was 162 on every connection of a traced 2-flow run (and 142 on one
/// connection of an earlier run, from `ss -tmi`), so 1448 * 256 / 162 = 2288 bytes.
pub const KERNEL_SEGMENT_TRUESIZE_BYTES: u64 = 2288;
/// What a segment costs beyond its payload: the kernel engine's senders run with TSO and GSO
/// off (python/cclab/engines/kernel/topology.py), so each segment is an skb of its own, a head
/// of fixed size holding the headers with the payload in page frags (`truesize` = head +
/// `data_len`), and the head's share is the same at any MSS: 2288 - 1448 bytes. Checked at
/// a 9000-byte MTU: a 512 KiB buffer held CUBIC to 38.2 Mbit/s on the kernel engine, this
/// model's window 38.3 (tests/kernel/test_kernel_mtu.py).
const SEGMENT_HEAD_TRUESIZE_BYTES: u64 = KERNEL_SEGMENT_TRUESIZE_BYTES - 1448;

/// `skb->truesize` of one full-sized segment of `mss_bytes` at the receiver.
pub fn segment_truesize_bytes(mss_bytes: u64) -> u64 {
    mss_bytes + SEGMENT_HEAD_TRUESIZE_BYTES
}
/// `TCP_RMEM_TO_WIN_SCALE`: `scaling_ratio` is a fraction of 256.
const TCP_RMEM_TO_WIN_SCALE: u32 = 8;
/// `TCP_DEFAULT_SCALING_RATIO`: 50%, until the first full segment is measured.
const TCP_DEFAULT_SCALING_RATIO: u64 = 1 << (TCP_RMEM_TO_WIN_SCALE - 1);
/// `TCP_INIT_CWND`: `tcp_init_buffer_space` sizes the first measurement by it.
const TCP_INIT_CWND: u64 = 10;
/// `TCP_MAX_WSCALE` (RFC 7323).
const TCP_MAX_WSCALE: u32 = 14;
/// The largest unscaled window (`U16_MAX`): what a SYN-ACK can carry.
const MAX_UNSCALED_WINDOW: u64 = 65_535;
/// `tcp_event_data_recv` grows the window only for segments of at least 128 bytes.
const GROW_WINDOW_MIN_LEN: u64 = 128;
/// iperf3's `COOKIE_SIZE`: a data connection's first bytes, sent and read one RTT before
/// its data (the kernel engine's `tcp:tcp_rcvbuf_grow`: the first measurement is
/// `copied` 14517 = 37 + 10 segments, over 41-62 ms from the socket's setup at 40-60 ms
/// RTT).
pub const IPERF3_COOKIE_BYTES: u64 = 37;

/// Receive-buffer autotuning and window selection for one connection.
#[derive(Clone, Debug)]
pub struct ReceiveWindow {
    mss_bytes: u64,
    truesize_bytes: u64,
    /// `tp->scaling_ratio`: payload per byte of memory, in 1/256.
    scaling_ratio: u64,
    /// `rx_opt.rcv_wscale`: the advertised window is in units of `2^wscale` bytes.
    wscale: u32,
    /// `sk_rcvbuf`.
    rcvbuf_bytes: u64,
    /// `tp->window_clamp`: the largest window ever advertised.
    window_clamp_bytes: u64,
    /// `tp->rcv_ssthresh`: the window's slow-start threshold, grown per segment.
    rcv_ssthresh_bytes: u64,
    /// `tp->rcv_wnd` and `tp->rcv_wup` (in segments): the last advertised window and
    /// `rcv_nxt` when it was sent.
    rcv_wnd_bytes: u64,
    rcv_wup: u64,
    /// `tp->rcvq_space`: bytes read in the last measured RTT, and where and when the
    /// current measurement started (`seq` in segments).
    space_bytes: u64,
    space_seq: u64,
    space_time: SimTime,
    /// Bytes read before the data's first sequence number (the cookie), counted in the
    /// first measurement.
    read_before_data_bytes: u64,
    /// `tp->rcv_rtt_est`: the receiver's RTT estimate (us, scaled by 8), the window-based
    /// measurement's target (`seq`, segments) and start, and the last TSecr used.
    rcv_rtt_us_x8: u64,
    rtt_seq: u64,
    rtt_time: Option<SimTime>,
    last_tsecr_tick: Option<u64>,
    /// The scaling ratio is measured from the first full segment (`tcp_measure_rcv_mss`).
    ratio_measured: bool,
    /// `tcp_rmem[2]`.
    tcp_rmem_max_bytes: u64,
    /// `SOCK_RCVBUF_LOCK`: the application set SO_RCVBUF, and autotuning leaves the buffer be.
    rcvbuf_locked: bool,
}

impl ReceiveWindow {
    /// The state once the handshake is done (`tcp_select_initial_window`,
    /// `tcp_init_buffer_space`), with `established` the time it was.
    pub fn new(mss_bytes: u64, truesize_bytes: u64, established: SimTime) -> Self {
        let mut window = ReceiveWindow {
            mss_bytes,
            truesize_bytes,
            scaling_ratio: TCP_DEFAULT_SCALING_RATIO,
            wscale: 0,
            rcvbuf_bytes: TCP_RMEM_DEFAULT_BYTES,
            window_clamp_bytes: 0,
            rcv_ssthresh_bytes: 0,
            rcv_wnd_bytes: 0,
            rcv_wup: 0,
            space_bytes: 0,
            space_seq: 0,
            space_time: established,
            read_before_data_bytes: 0,
            rcv_rtt_us_x8: 0,
            rtt_seq: 0,
            rtt_time: None,
            last_tsecr_tick: None,
            ratio_measured: false,
            tcp_rmem_max_bytes: TCP_RMEM_MAX_BYTES,
            rcvbuf_locked: false,
        };
        window.handshake();
        window
    }

    /// `tcp_openreq_init_rwin`, `tcp_select_initial_window` and `tcp_init_buffer_space` for the
    /// buffer and `tcp_rmem[2]` set now: the first window (whole segments; the SYN-ACK's is not
    /// scaled), the scale the largest buffer needs (`ilog2(max(space, tcp_rmem[2], rmem_max)) -
    /// 15`), bounded by the clamp a locked buffer sets (its full space), and the clamp with one
    /// segment kept back (`tcp_app_win = 1`).
    fn handshake(&mut self) {
        let mss = self.mss_bytes;
        let full_space = win_from_space(TCP_DEFAULT_SCALING_RATIO, self.rcvbuf_bytes);
        let handshake_clamp = if self.rcvbuf_locked { full_space } else { u64::MAX };
        let space = if full_space > mss { full_space / mss * mss } else { full_space };
        let wscale_space = space.max(self.tcp_rmem_max_bytes).max(NET_CORE_RMEM_MAX_BYTES).min(handshake_clamp);
        self.wscale = wscale_space.ilog2().saturating_sub(15).min(TCP_MAX_WSCALE);
        let mut window_clamp = full_space.min(MAX_UNSCALED_WINDOW << self.wscale);
        if window_clamp > 2 * mss && window_clamp + mss > full_space {
            window_clamp = (2 * mss).max(full_space - mss);
        }
        self.rcv_wnd_bytes = space.min(MAX_UNSCALED_WINDOW);
        self.window_clamp_bytes = window_clamp;
        self.rcv_ssthresh_bytes = self.rcv_wnd_bytes.min(window_clamp);
        self.space_bytes = self.rcv_ssthresh_bytes.min(TCP_INIT_CWND * mss);
    }

    /// The receiving socket's SO_RCVBUF was set to `requested_bytes` (iperf3 -w) before it
    /// listened, and the connection inherited it (`sk_clone_lock`): the buffer is twice that
    /// (`__sock_set_rcvbuf`), clamped first to `net.core.rmem_max`, and locked, so autotuning
    /// never grows it (`tcp_rcvbuf_grow`). The handshake's clamp is the buffer's window at the
    /// default 50% ratio (`tcp_openreq_init_rwin`), which also bounds the window scale
    /// (`tcp_select_initial_window`), so the 16-bit window field can cap it below the buffer.
    pub fn with_locked_rcvbuf(mut self, requested_bytes: u64) -> Self {
        self.rcvbuf_bytes = (requested_bytes.min(NET_CORE_RMEM_MAX_BYTES) * 2).max(SOCK_MIN_RCVBUF_BYTES);
        self.rcvbuf_locked = true;
        self.handshake();
        self
    }

    /// With `tcp_rmem[2]` at `bytes` instead of the kernel engine's 512 MiB: autotuning stops
    /// there and the window scale is chosen for it.
    pub fn with_tcp_rmem_max(mut self, bytes: u64) -> Self {
        self.tcp_rmem_max_bytes = bytes;
        self.handshake();
        self
    }

    /// The application read `bytes` before the data began (iperf3's cookie): the first
    /// `tcp_rcv_space_adjust` counts them.
    pub fn with_bytes_read_before_data(mut self, bytes: u64) -> Self {
        self.read_before_data_bytes = bytes;
        self
    }

    pub fn truesize_bytes(&self) -> u64 {
        self.truesize_bytes
    }

    /// The memory one window-scale unit of data takes: what aligning the window up to
    /// `2^wscale` can offer beyond the free space.
    pub fn rounding_slack_bytes(&self) -> u64 {
        self.space_from_win(1 << self.wscale)
    }

    pub fn rcvbuf_bytes(&self) -> u64 {
        self.rcvbuf_bytes
    }

    /// The receiver's RTT estimate in microseconds (0 before the first sample).
    pub fn rcv_rtt_us(&self) -> u64 {
        self.rcv_rtt_us_x8 >> 3
    }

    /// The right edge the handshake advertised, in segments (the sender's first `snd_wnd`).
    pub fn initial_window_end(&self) -> u64 {
        self.rcv_wnd_bytes / self.mss_bytes
    }

    fn win_from_space(&self, space: u64) -> u64 {
        win_from_space(self.scaling_ratio, space)
    }

    fn space_from_win(&self, win: u64) -> u64 {
        (win << TCP_RMEM_TO_WIN_SCALE) / self.scaling_ratio
    }

    /// `tcp_space`: the window the free memory would hold. `charged_segments`: the
    /// segments whose memory the socket holds (`sk_rmem_alloc`), unread or out of order.
    fn tcp_space(&self, charged_segments: u64) -> u64 {
        self.win_from_space(self.rcvbuf_bytes.saturating_sub(charged_segments * self.truesize_bytes))
    }

    /// `tcp_measure_rcv_mss`: the first full segment measures the scaling ratio, and
    /// the clamp follows the buffer at the new ratio.
    fn measure_rcv_mss(&mut self) {
        if self.ratio_measured {
            return;
        }
        self.ratio_measured = true;
        self.scaling_ratio = ((self.mss_bytes << TCP_RMEM_TO_WIN_SCALE) / self.truesize_bytes).max(1);
        self.window_clamp_bytes = self.win_from_space(self.rcvbuf_bytes);
        self.rcv_ssthresh_bytes = self.rcv_ssthresh_bytes.min(self.window_clamp_bytes);
    }

    /// `tcp_rcv_rtt_measure_ts`: one sample per new TSecr on a full segment; smaller
    /// samples replace the estimate, larger ones are blended in with gain 1/8.
    pub fn on_timestamp(&mut self, now: SimTime, tsecr: SimTime) {
        let tick = tsecr.as_nanos() / TS_TICK_NS;
        if self.last_tsecr_tick == Some(tick) {
            return;
        }
        self.last_tsecr_tick = Some(tick);
        let delta_ticks = (now.as_nanos() / TS_TICK_NS).saturating_sub(tick);
        if delta_ticks > 0 {
            self.rcv_rtt_update(delta_ticks * 1_000, false);
        }
    }

    /// `tcp_rcv_rtt_update`. A window-based sample only ever lowers the estimate. The
    /// receive queue is always empty here (the reader keeps up), so a larger
    /// timestamp sample is always blended.
    fn rcv_rtt_update(&mut self, sample_us: u64, window_based: bool) {
        let m = sample_us << 3;
        if self.rcv_rtt_us_x8 == 0 || m < self.rcv_rtt_us_x8 {
            self.rcv_rtt_us_x8 = m;
        } else if !window_based {
            self.rcv_rtt_us_x8 = self.rcv_rtt_us_x8 - (self.rcv_rtt_us_x8 >> 3) + sample_us;
        }
    }

    /// `tcp_rcv_rtt_measure`: the time `rcv_nxt` takes to pass the window advertised
    /// when the measurement started.
    fn rcv_rtt_measure(&mut self, now: SimTime, rcv_nxt: u64) {
        if let Some(start) = self.rtt_time {
            if rcv_nxt < self.rtt_seq {
                return;
            }
            let delta_us = stamp_us_delta(now, start).max(1);
            self.rcv_rtt_update(delta_us, true);
        }
        self.rtt_seq = rcv_nxt + self.rcv_wnd_bytes / self.mss_bytes;
        self.rtt_time = Some(now);
    }

    /// `tcp_grow_window`: each segment of data raises `rcv_ssthresh` by two segments,
    /// up to what the clamp and the free memory allow. A segment's memory always
    /// passes Linux's truesize check here (`win_from_space(truesize) <= len`), as the
    /// ratio is measured from that same truesize. Returns whether it grew: Linux then
    /// sets `icsk_ack.quick`, so the segment is ACKed at once.
    fn grow_window(&mut self, charged_segments: u64) -> bool {
        let room = self.window_clamp_bytes.min(self.tcp_space(charged_segments)) as i64 - self.rcv_ssthresh_bytes as i64;
        if room <= 0 || self.mss_bytes < GROW_WINDOW_MIN_LEN {
            return false;
        }
        // incr = max(2 * advmss, 2 * len), and len = advmss.
        self.rcv_ssthresh_bytes += (room as u64).min(2 * self.mss_bytes);
        true
    }

    /// `tcp_rcvbuf_grow`: the buffer for twice what was read in the last RTT, more
    /// while reads grow (the sender may double its rate), plus the out-of-order span;
    /// the clamp follows.
    fn rcvbuf_grow(&mut self, new_space_bytes: u64, ooo_span_segments: u64) {
        let old = self.space_bytes.max(1);
        self.space_bytes = new_space_bytes;
        if self.rcvbuf_locked {
            return;
        }
        // "DRS is always one RTT late."
        let mut rcvwin = new_space_bytes << 1;
        // Linux 6.18: "slow start: allow the sender to double its rate". (Later kernels
        // scale this term by the RTT below tcp_rcvbuf_low_rtt; 6.18 has no such sysctl.)
        rcvwin += ((rcvwin << 1) * new_space_bytes.saturating_sub(old)) / old;
        rcvwin += ooo_span_segments * self.mss_bytes;
        let rcvbuf = self.space_from_win(rcvwin).min(self.tcp_rmem_max_bytes);
        if rcvbuf > self.rcvbuf_bytes {
            self.rcvbuf_bytes = rcvbuf;
            self.window_clamp_bytes = self.win_from_space(rcvbuf);
        }
    }

    /// In-order data arrived (`tcp_event_data_recv`). Linux has queued it already, so
    /// `charged_segments` counts this segment with the out-of-order queue and any
    /// in-order data not read yet: with the window at the buffer's limit, that one
    /// segment's memory keeps `rcv_ssthresh` a window-scale unit short (56 segments
    /// instead of 67 on a new connection, as `tcp_probe` shows on the kernel engine).
    /// `rcv_nxt` is after this segment. Returns whether the window grew.
    pub fn on_in_order_data(&mut self, now: SimTime, rcv_nxt: u64, charged_segments: u64) -> bool {
        self.measure_rcv_mss();
        self.rcv_rtt_measure(now, rcv_nxt);
        self.grow_window(charged_segments)
    }

    /// The application read everything up to `copied_seq` (`tcp_recvmsg`, which calls
    /// `tcp_rcv_space_adjust`).
    pub fn on_read(&mut self, now: SimTime, copied_seq: u64) {
        self.rcv_space_adjust(now, copied_seq);
    }

    /// `tcp_rcv_space_adjust`, once per receiver RTT of reads.
    fn rcv_space_adjust(&mut self, now: SimTime, copied_seq: u64) {
        if self.rcv_rtt_us_x8 == 0 {
            return;
        }
        if stamp_us_delta(now, self.space_time) < self.rcv_rtt_us() {
            return;
        }
        // Nothing stays unread (`inq` = 0).
        let copied_bytes = (copied_seq - self.space_seq) * self.mss_bytes + std::mem::take(&mut self.read_before_data_bytes);
        if copied_bytes > self.space_bytes {
            // The out-of-order queue is empty once reading reached here, or its span
            // was counted when each segment was queued (`tcp_data_queue_ofo`).
            self.rcvbuf_grow(copied_bytes, 0);
        }
        self.space_seq = copied_seq;
        self.space_time = now;
    }

    /// Data was queued out of order (`tcp_data_queue_ofo`): the window grows as for
    /// in-order data, and the buffer makes room for the out-of-order span at the last
    /// RTT's rate. `ooo_segments` includes this one; `ooo_span` runs from `rcv_nxt` to
    /// the end of the highest queued segment. Returns whether the window grew.
    pub fn on_out_of_order_data(&mut self, ooo_segments: u64, ooo_span: u64) -> bool {
        self.measure_rcv_mss();
        let grew = self.grow_window(ooo_segments - 1);
        self.rcvbuf_grow(self.space_bytes, ooo_span);
        grew
    }

    /// `__tcp_select_window(sk) < tp->rcv_wnd`: the window offered now would be smaller
    /// than the last one, so `__tcp_ack_snd_check` does not ACK for two segments alone.
    pub fn window_would_shrink(&self, charged_segments: u64) -> bool {
        self.free_window_bytes(charged_segments) < self.rcv_wnd_bytes
    }

    /// `__tcp_select_window`: the free space, at most `rcv_ssthresh`, in units of the
    /// window scale; 0 when little memory is left.
    fn free_window_bytes(&self, charged_segments: u64) -> u64 {
        let granule = 1u64 << self.wscale;
        let allowed = self.win_from_space(self.rcvbuf_bytes);
        let full = self.window_clamp_bytes.min(allowed);
        let mut free = self.tcp_space(charged_segments);
        if free < full / 2 {
            free = free / granule * granule;
            if free < allowed >> 4 || free < self.mss_bytes {
                return 0;
            }
        }
        free.min(self.rcv_ssthresh_bytes).div_ceil(granule) * granule
    }

    /// `tcp_receive_window`: what is left of the window last offered, past `rcv_nxt`.
    fn receive_window_bytes(&self, rcv_nxt: u64) -> u64 {
        (self.rcv_wup * self.mss_bytes + self.rcv_wnd_bytes).saturating_sub(rcv_nxt * self.mss_bytes)
    }

    /// `__tcp_cleanup_rbuf`'s window-update rule after a read: when what is left of the
    /// advertised window (`tcp_receive_window`) is at most half the clamp, the read sends
    /// an ACK if the window it could offer now is non-zero and at least twice that.
    pub fn read_doubles_window(&self, rcv_nxt: u64, charged_segments: u64) -> bool {
        let window_now = self.receive_window_bytes(rcv_nxt);
        if 2 * window_now > self.window_clamp_bytes {
            return false;
        }
        let new_window = self.free_window_bytes(charged_segments);
        new_window > 0 && new_window >= 2 * window_now
    }

    /// `tcp_select_window` when an ACK leaves: the window to advertise, as the right
    /// edge in segments (`rcv_nxt + window / mss`). The edge never moves back.
    pub fn select_window_end(&mut self, rcv_nxt: u64, charged_segments: u64) -> u64 {
        let granule = 1u64 << self.wscale;
        let mut new_win = self.free_window_bytes(charged_segments);
        // tcp_select_window: never shrink what was offered.
        let cur_win = self.receive_window_bytes(rcv_nxt);
        if new_win < cur_win {
            new_win = cur_win.div_ceil(granule) * granule;
        }
        self.rcv_wnd_bytes = new_win.min(MAX_UNSCALED_WINDOW << self.wscale);
        self.rcv_wup = rcv_nxt;
        rcv_nxt + self.rcv_wnd_bytes / self.mss_bytes
    }
}

/// `tcp_stamp_us_delta`: microseconds from `t0` to `t1`, 0 if `t1` is earlier (the
/// connection's start is estimated before its first data arrives, and a path that
/// shortens mid-run brings that data sooner).
fn stamp_us_delta(t1: SimTime, t0: SimTime) -> u64 {
    t1.as_nanos().saturating_sub(t0.as_nanos()) / 1_000
}

/// `tcp_win_from_space`.
fn win_from_space(scaling_ratio: u64, space: u64) -> u64 {
    (space * scaling_ratio) >> TCP_RMEM_TO_WIN_SCALE
}

#[cfg(test)]
#[path = "receive_window_tests.rs"]
mod tests;
