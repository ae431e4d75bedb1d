//! The sender's socket buffer (`sk_sndbuf`) and a bulk writer that keeps it full (iperf3), as
//! Linux 6.18 sizes, charges and wakes it (net/ipv4/tcp.c, tcp_input.c; include/net/sock.h).
//! docs/RECEIVE_WINDOW.md ("Socket buffers") records the source and the kernel engine's
//! measurements.
//!
//! Why it matters: a segment stays charged to the buffer until it is cumulatively ACKed, so
//! the buffer bounds the data in flight. Autotuning (`tcp_sndbuf_expand`) provisions two
//! congestion windows of worst-case memory (three for BBR) and never limits a flow unless
//! `tcp_wmem[2]` caps it; a buffer the application sets (SO_SNDBUF, iperf3 -w) is locked and
//! caps the flight near its size per RTT whatever the CC wants.
//!
//! Charging (`sk_wmem_queued`): each skb costs its head's truesize plus its payload, which sits
//! in page frags (`tcp_stream_alloc_skb`, then `skb_copy_to_page_nocache`). The writer fills
//! skbs of the size goal (`tcp_xmit_size_goal`); an skb sent in smaller pieces is split
//! (`tso_fragment`), each piece with a head of its own. Only the cumulative ACK frees memory
//! (`tcp_clean_rtx_queue`), so SACKed data stays charged.
//!
//! Approximations, each worth at most one skb head (832 bytes) at a time: the unsent data is
//! counted as whole skbs of the size goal; a retransmission does not split its skb
//! (`tcp_fragment`), nor does a SACK merge skbs (`tcp_shift_skb_data`); the writer wakes at
//! once, where iperf3 waits for its CPU. A user's BPF CC gets the default factor of 2 (the
//! native bridge does not carry `.sndbuf_expand`).
//!
//! Not matched yet: on the kernel engine the unacknowledged data passed `sk_sndbuf` by up to
//! 2.7 times when the buffer bound, likely because `tcp_sendmsg_locked` checks for room only
//! before a new skb and appends unchecked to a tail skb TCP has partly sent; this model checks
//! every skb it writes (docs/RECEIVE_WINDOW.md, "Socket buffers").

use std::collections::VecDeque;

/// `tcp_wmem[1]`: the buffer a socket starts with.
pub const TCP_WMEM_DEFAULT_BYTES: u64 = 16_384;
/// `tcp_wmem[2]` in the kernel engine's namespaces (python/cclab/engines/kernel/topology.py):
/// the most autotuning grows the buffer to; the spec's `[host] tcp_wmem_max` replaces it.
pub const TCP_WMEM_MAX_BYTES: u64 = 536_870_912;
/// `net.core.wmem_max` in the kernel engine's namespaces, which cannot change it: SO_SNDBUF is
/// clamped to it before it is doubled (4 MiB on its host, as `rmem_max`).
pub const NET_CORE_WMEM_MAX_BYTES: u64 = 4_194_304;
/// `SOCK_MIN_SNDBUF` (include/net/sock.h): twice `TCP_SKB_MIN_TRUESIZE` (2048 + 256).
const SOCK_MIN_SNDBUF_BYTES: u64 = 4_608;
/// `MAX_TCP_HEADER` on the kernel engine's kernel: `L1_CACHE_ALIGN(128 + MAX_HEADER)` with no
/// tunnel or Hyper-V headers configured, 192 (measured: tcp_sndbuf_expand's per-segment
/// memory doubles between an MSS of 1536 and 1537, at 2048 = mss + 192 + 320).
const MAX_TCP_HEADER_BYTES: u64 = 192;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` and `SKB_DATA_ALIGN(sizeof(struct sk_buff))`
/// (the kernel's BTF: 320 and 224 bytes).
const SKB_SHARED_INFO_BYTES: u64 = 320;
const SK_BUFF_BYTES: u64 = 256;
/// The truesize of an skb whose payload is all in page frags: `SKB_TRUESIZE` of the small head
/// a 192-byte `MAX_TCP_HEADER` gets (a 576-byte kmalloc cache, end offset 256): 256 + 256 + 320.
/// Measured: a corked one-byte send charges 833 bytes.
pub const SKB_HEAD_TRUESIZE_BYTES: u64 = 832;
/// `sk_gso_max_size` of a veth (`GSO_LEGACY_MAX_SIZE`): `tcp_xmit_size_goal` fills skbs up to it,
/// less one byte and `MAX_TCP_HEADER`.
const GSO_MAX_BYTES: u64 = 65_536;
/// `TCP_INIT_CWND`: `tcp_sndbuf_expand` provisions at least this many segments.
const TCP_INIT_CWND: u64 = 10;
/// `TCP_MSS_DEFAULT`: `tcp_bound_to_half_wnd` halves only windows larger than this.
const TCP_MSS_DEFAULT_BYTES: u64 = 536;
/// The memory `tcp_sndbuf_expand` provisions per CC window when the CC has no `.sndbuf_expand`
/// ("Cubic needs 1.7 factor, rounded to 2").
const DEFAULT_SNDBUF_EXPAND: u64 = 2;

/// One connection's send buffer and its writer. Sequence numbers are in segments.
#[derive(Clone, Debug)]
pub struct SendBuffer {
    mss_bytes: u64,
    /// `tcp_sndbuf_expand`'s memory per segment: a worst-case, one-segment skb.
    per_segment_bytes: u64,
    /// The CC's `.sndbuf_expand`, or 2.
    expand_factor: u64,
    /// `sk_sndbuf`.
    sndbuf_bytes: u64,
    /// `SOCK_SNDBUF_LOCK`: the application set SO_SNDBUF.
    locked: bool,
    tcp_wmem_max_bytes: u64,
    /// `tp->write_seq`: the end of what the application has written.
    write_seq: u64,
    /// The application's last segment (a finite flow); `None`: it always has more.
    app_end: Option<u64>,
    /// Where each skb sent and not yet cumulatively ACKed ends, oldest first.
    sent_skb_ends: VecDeque<u64>,
    /// `tp->max_window`: the largest window the peer has offered, in bytes.
    max_window_bytes: u64,
}

impl SendBuffer {
    /// The buffer before the handshake completes: `tcp_wmem[1]`, or SO_SNDBUF's `requested_bytes`
    /// doubled (`sk_setsockopt`: clamped to `net.core.wmem_max` first, at least
    /// `SOCK_MIN_SNDBUF`) and locked. `mss_clamp_bytes` is the peer's MSS option;
    /// `app_segments` what a finite flow's application writes.
    pub fn new(mss_bytes: u64, mss_clamp_bytes: u64, expand_factor: Option<u32>, requested_bytes: Option<u64>, app_segments: Option<u64>) -> Self {
        // tcp_sndbuf_expand: "Worst case is non GSO/TSO: each frame consumes one skb and
        // skb->head is kmalloced using power of two area of memory".
        let per_segment_bytes = (mss_clamp_bytes.max(mss_bytes) + MAX_TCP_HEADER_BYTES + SKB_SHARED_INFO_BYTES).next_power_of_two() + SK_BUFF_BYTES;
        let (sndbuf_bytes, locked) = match requested_bytes {
            Some(requested) => ((requested.min(NET_CORE_WMEM_MAX_BYTES) * 2).max(SOCK_MIN_SNDBUF_BYTES), true),
            None => (TCP_WMEM_DEFAULT_BYTES, false),
        };
        SendBuffer {
            mss_bytes,
            per_segment_bytes,
            expand_factor: expand_factor.map_or(DEFAULT_SNDBUF_EXPAND, u64::from),
            sndbuf_bytes,
            locked,
            tcp_wmem_max_bytes: TCP_WMEM_MAX_BYTES,
            write_seq: 0,
            app_end: app_segments,
            sent_skb_ends: VecDeque::new(),
            max_window_bytes: 0,
        }
    }

    /// With `tcp_wmem[2]` at `bytes` instead of the kernel engine's 512 MiB.
    pub fn with_tcp_wmem_max(mut self, bytes: u64) -> Self {
        self.tcp_wmem_max_bytes = bytes;
        self
    }

    pub fn sndbuf_bytes(&self) -> u64 {
        self.sndbuf_bytes
    }

    /// `tp->write_seq`: new data may be sent up to here.
    pub fn write_seq(&self) -> u64 {
        self.write_seq
    }

    /// The application has written everything it has (a finite flow only).
    pub fn app_written_all(&self) -> bool {
        self.app_end.is_some_and(|end| self.write_seq >= end)
    }

    /// The peer offered a window of `window_bytes` (`tp->max_window`, which sizes the skbs).
    pub fn on_peer_window(&mut self, window_bytes: u64) {
        self.max_window_bytes = self.max_window_bytes.max(window_bytes);
    }

    /// `tcp_xmit_size_goal`: the segments the writer puts in one skb, `sk_gso_max_size` less
    /// `MAX_TCP_HEADER`, at most half the largest window offered (`tcp_bound_to_half_wnd`).
    fn size_goal_segments(&self) -> u64 {
        let mut goal_bytes = GSO_MAX_BYTES - 1 - MAX_TCP_HEADER_BYTES;
        let cutoff = if self.max_window_bytes > TCP_MSS_DEFAULT_BYTES { self.max_window_bytes / 2 } else { self.max_window_bytes };
        if cutoff > 0 && goal_bytes > cutoff {
            goal_bytes = cutoff.max(68);
        }
        (goal_bytes / self.mss_bytes).max(1)
    }

    /// The most one skb of the writer holds (payload and head): how far a write may pass the
    /// buffer, as it checks for room only before each new skb.
    pub fn largest_skb_bytes(&self) -> u64 {
        (GSO_MAX_BYTES - 1 - MAX_TCP_HEADER_BYTES) / self.mss_bytes * self.mss_bytes + SKB_HEAD_TRUESIZE_BYTES
    }

    /// `sk_wmem_queued`: the payload from `snd_una` to `write_seq` and a head per skb.
    pub fn queued_bytes(&self, snd_una: u64, snd_nxt: u64) -> u64 {
        let unsent = self.write_seq.saturating_sub(snd_nxt);
        let unsent_skbs = unsent.div_ceil(self.size_goal_segments());
        let skbs = self.sent_skb_ends.len() as u64 + unsent_skbs;
        (self.write_seq - snd_una.min(self.write_seq)) * self.mss_bytes + skbs * SKB_HEAD_TRUESIZE_BYTES
    }

    /// An skb of new data ending at `end_seq` left (a GSO burst: `tso_fragment` cut it from
    /// the write queue with a head of its own).
    pub fn on_skb_sent(&mut self, end_seq: u64) {
        self.sent_skb_ends.push_back(end_seq);
    }

    /// The cumulative ACK reached `snd_una`: the skbs wholly below it are freed
    /// (`tcp_clean_rtx_queue`); one cut through keeps its head.
    pub fn on_cumulative_ack(&mut self, snd_una: u64) {
        while self.sent_skb_ends.front().is_some_and(|&end| end <= snd_una) {
            self.sent_skb_ends.pop_front();
        }
    }

    /// `tcp_init_buffer_space` (`tcp_sndbuf_expand` unless locked), then the application's first
    /// write.
    pub fn on_established(&mut self, cwnd: u32, reordering: u32, snd_una: u64, snd_nxt: u64) {
        if !self.locked {
            self.expand(cwnd, reordering);
        }
        self.write(snd_una, snd_nxt);
    }

    /// `tcp_check_space` after an ACK, while the writer waits for memory (`SOCK_NOSPACE`):
    /// `tcp_new_space` grows an unlocked buffer when the flow is not cwnd-limited
    /// (`tcp_should_expand_sndbuf`), then wakes the writer once a third of the buffer is free
    /// (`__sk_stream_is_writeable`: free space at least half the queued memory). Returns
    /// whether the writer woke; it then `write`s.
    pub fn writer_wakes(&mut self, in_flight: u32, cwnd: u32, reordering: u32, snd_una: u64, snd_nxt: u64) -> bool {
        if self.app_written_all() {
            return false; // no writer waits: a bulk writer always does, once it has filled the buffer
        }
        if !self.locked && in_flight < cwnd {
            self.expand(cwnd, reordering);
        }
        let queued = self.queued_bytes(snd_una, snd_nxt);
        self.sndbuf_bytes.saturating_sub(queued) >= queued / 2
    }

    /// `tcp_sndbuf_expand`: the CC's factor times max(cwnd, 10, reordering + 1) worst-case
    /// segments, at most `tcp_wmem[2]`; never shrinks.
    fn expand(&mut self, cwnd: u32, reordering: u32) {
        let segments = u64::from(cwnd).max(TCP_INIT_CWND).max(u64::from(reordering) + 1);
        let wanted = self.expand_factor * segments * self.per_segment_bytes;
        if self.sndbuf_bytes < wanted {
            self.sndbuf_bytes = wanted.min(self.tcp_wmem_max_bytes);
        }
    }

    /// The writer's `tcp_sendmsg`: whole skbs of the size goal while the queued memory is under
    /// the buffer (`sk_stream_memory_free` before each new skb), up to the application's end.
    pub fn write(&mut self, snd_una: u64, snd_nxt: u64) {
        let goal = self.size_goal_segments();
        while self.queued_bytes(snd_una, snd_nxt) < self.sndbuf_bytes {
            let next = self.write_seq + goal;
            match self.app_end {
                Some(end) if next >= end => {
                    self.write_seq = self.write_seq.max(end);
                    return;
                }
                _ => self.write_seq = next,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1448;
    const MSS_CLAMP: u64 = 1460;

    #[test]
    fn autotuning_provisions_two_windows_of_worst_case_segments_or_three_for_bbr() {
        // Measured on the kernel engine's kernel right after accept: 10 segments of
        // 2048 + 256 bytes, twice for CUBIC (46,080) and three times for BBR (69,120).
        let mut cubic = SendBuffer::new(MSS, MSS_CLAMP, None, None, None);
        cubic.on_established(10, 3, 0, 0);
        assert_eq!(cubic.sndbuf_bytes(), 46_080);
        let mut bbr = SendBuffer::new(MSS, MSS_CLAMP, Some(3), None, None);
        bbr.on_established(10, 3, 0, 0);
        assert_eq!(bbr.sndbuf_bytes(), 69_120);
        // The writer filled it: whole skbs until the memory reached the buffer.
        assert!(cubic.queued_bytes(0, 0) >= 46_080);
    }

    #[test]
    fn a_set_buffer_is_doubled_clamped_and_never_grows() {
        let mut set = SendBuffer::new(MSS, MSS_CLAMP, None, Some(65_536), None);
        set.on_established(10, 3, 0, 0);
        assert_eq!(set.sndbuf_bytes(), 131_072);
        // A cwnd of 1000 not fully used would grow an autotuned buffer to 4.6 MB.
        set.on_peer_window(1 << 20);
        let snd_nxt = set.write_seq();
        set.on_skb_sent(snd_nxt);
        set.on_cumulative_ack(snd_nxt);
        assert!(set.writer_wakes(0, 1000, 3, snd_nxt, snd_nxt));
        assert_eq!(set.sndbuf_bytes(), 131_072);
        assert_eq!(SendBuffer::new(MSS, MSS_CLAMP, None, Some(1), None).sndbuf_bytes(), 4_608);
        assert_eq!(SendBuffer::new(MSS, MSS_CLAMP, None, Some(1 << 30), None).sndbuf_bytes(), 2 * NET_CORE_WMEM_MAX_BYTES);
    }

    #[test]
    fn data_stays_charged_until_the_cumulative_ack_and_the_writer_waits_for_a_third() {
        let mut buffer = SendBuffer::new(MSS, MSS_CLAMP, None, Some(100_000), None);
        buffer.on_peer_window(1 << 20);
        buffer.on_established(10, 3, 0, 0);
        let written = buffer.write_seq();
        // Everything written is sent, in skbs of 5 segments.
        let mut seq = 0;
        while seq < written {
            seq = (seq + 5).min(written);
            buffer.on_skb_sent(seq);
        }
        let full = buffer.queued_bytes(0, written);
        assert!(full >= buffer.sndbuf_bytes());
        assert_eq!(full, written * MSS + written.div_ceil(5) * SKB_HEAD_TRUESIZE_BYTES);
        // SACKs free nothing: only the cumulative ACK does. A sixth freed: the writer waits.
        let sixth = written / 6 / 5 * 5;
        buffer.on_cumulative_ack(sixth);
        assert!(!buffer.writer_wakes(0, 1000, 3, sixth, written));
        assert_eq!(buffer.write_seq(), written);
        // Half freed: the rest is still more than two thirds of the buffer (200,000 bytes), heads
        // included. Three fifths: it writes until the buffer is full again.
        let half = written / 2 / 5 * 5;
        buffer.on_cumulative_ack(half);
        assert!(buffer.queued_bytes(half, written) > 2 * buffer.sndbuf_bytes() / 3);
        assert!(!buffer.writer_wakes(0, 1000, 3, half, written));
        let most = written * 3 / 5 / 5 * 5;
        buffer.on_cumulative_ack(most);
        assert!(buffer.writer_wakes(0, 1000, 3, most, written));
        buffer.write(most, written);
        assert!(buffer.queued_bytes(most, written) >= buffer.sndbuf_bytes());
        assert!(buffer.write_seq() > written);
    }

    #[test]
    fn skbs_hold_at_most_half_the_largest_window_offered() {
        let mut buffer = SendBuffer::new(MSS, MSS_CLAMP, None, None, None);
        buffer.on_peer_window(64_000);
        assert_eq!(buffer.size_goal_segments(), 32_000 / MSS);
        buffer.on_peer_window(10 << 20);
        assert_eq!(buffer.size_goal_segments(), (65_536 - 1 - 192) / MSS);
    }

    #[test]
    fn a_finite_writer_stops_at_its_end() {
        let mut buffer = SendBuffer::new(MSS, MSS_CLAMP, None, None, Some(7));
        buffer.on_peer_window(1 << 20);
        buffer.on_established(10, 3, 0, 0);
        assert_eq!(buffer.write_seq(), 7);
        assert!(buffer.app_written_all());
        assert!(!buffer.writer_wakes(0, 10, 3, 0, 0));
    }
}
