use super::*;
use crate::config::FlowConfig;

const MSS: u32 = 1448;

/// A BBR sender past its unpaced initial window, with room in cwnd and the
/// given pacing rate (payload bytes per second).
fn paced_sender(rate_bytes_per_sec: u64, cwnd: u32) -> (TcpSender, EventQueue, SimTime) {
    let cc = FlowConfig::bulk(0, "bbr").cc_config().unwrap();
    let mut s = TcpSender::new(0, &cc, MSS, None, None, 1);
    let mut q = EventQueue::default();
    let mut out = Vec::new();
    let t0 = SimTime(20_000_000);
    s.start(t0, SimDuration::from_millis(20), &mut q, &mut out);
    assert_eq!(out.len() as u64, UNPACED_INITIAL_SEGMENTS, "the initial window leaves unpaced");
    s.tcp.snd_cwnd = cwnd;
    s.tcp.pacing_rate_bytes_per_sec = rate_bytes_per_sec;
    // The skb that completed the initial window was paced: start when it is due.
    let due = s.tcp.next_send_time;
    assert!(due > t0);
    (s, q, due)
}

#[test]
fn the_cookie_acked_before_the_data_starts_bbr_with_eleven_packets_and_cubic_with_ten() {
    // iperf3's cookie is the CC's first ACK: BBR adds it to cwnd (tp->delivered <
    // TCP_INIT_CWND), CUBIC does not (one packet out is not cwnd-limited). The kernel
    // engine's first flights: 10 segments at once, then an eleventh paced (BBR).
    for (cc, cwnd, paced_after) in [("bbr", 11, 1), ("bbr3", 11, 1), ("cubic", 10, 0)] {
        let cfg = FlowConfig::bulk(0, cc).cc_config().unwrap();
        let mut s = TcpSender::new(0, &cfg, MSS, None, None, 1);
        let (mut q, mut out) = (EventQueue::default(), Vec::new());
        let t0 = SimTime(20_000_000);
        s.start(t0, SimDuration::from_millis(20), &mut q, &mut out);
        assert_eq!(s.tcp.snd_cwnd, cwnd, "{cc}: cwnd after the cookie's ACK");
        assert_eq!(s.tcp.delivered, 1, "{cc}: the cookie counts as delivered");
        // Sent with nothing else to send: the first window's samples are app-limited.
        assert_eq!(s.tcp.app_limited, 1, "{cc}");
        assert_eq!(out.len(), 10, "{cc}: ten segments leave at once");
        out.clear();
        s.transmit(t0 + SimDuration::from_millis(10), &mut q, &mut out);
        assert_eq!(out.len(), paced_after, "{cc}: what the window still allows");
    }
}

#[test]
fn a_paced_sender_emits_about_a_millisecond_of_data_back_to_back_then_waits_for_all_of_it() {
    // 47 Mbit/s of payload: 5_875_000 >> 10 = 5737 B, three segments per skb.
    let (mut s, mut q, t0) = paced_sender(5_875_000, 100);
    assert_eq!(s.tso_segs(), 3);
    let mut out = Vec::new();
    s.transmit(t0, &mut q, &mut out);
    assert_eq!(out.len(), 3, "one skb of three segments at once");
    // The clock moves on by the whole skb: 3 x 1448 B at 5.875 MB/s.
    let skb_ns = 3 * MSS as u64 * 1_000_000_000 / 5_875_000;
    assert_eq!(s.tcp.next_send_time, t0 + SimDuration(skb_ns));
    // Nothing more until then; at that time the next skb leaves whole.
    out.clear();
    s.transmit(t0 + SimDuration(skb_ns - 1), &mut q, &mut out);
    assert!(out.is_empty());
    s.transmit(t0 + SimDuration(skb_ns), &mut q, &mut out);
    assert_eq!(out.iter().map(|t| t.seq).collect::<Vec<_>>(), vec![13, 14, 15]);
}

#[test]
fn the_last_segment_of_an_skb_of_two_or_more_carries_psh_and_a_lone_segment_none() {
    // Three segments per skb (47 Mbit/s): PSH on the third only (__tcp_transmit_skb).
    let (mut s, mut q, t0) = paced_sender(5_875_000, 100);
    let mut out = Vec::new();
    s.transmit(t0, &mut q, &mut out);
    assert_eq!(out.iter().map(|t| t.psh).collect::<Vec<_>>(), vec![false, false, true]);
    // Room in cwnd for one segment only: an skb of one, which Linux leaves unpushed.
    out.clear();
    s.tcp.snd_cwnd = s.in_flight() + 1;
    let next = s.tcp.next_send_time + SimDuration::from_millis(5);
    s.transmit(next, &mut q, &mut out);
    assert_eq!(out.len(), 1);
    assert!(!out[0].psh);
}

#[test]
fn skbs_never_hold_fewer_than_bbrs_minimum_nor_more_than_cwnd_allows() {
    // 20 Mbit/s: 2441 B per ms is one segment, but BBR asks for two above 1.2 Mbit/s.
    assert_eq!(paced_sender(2_500_000, 100).0.tso_segs(), 2);
    // Below 1.2 Mbit/s one segment per skb.
    assert_eq!(paced_sender(100_000, 100).0.tso_segs(), 1);
    // 200 Mbit/s: 24_414 B, 16 segments.
    assert_eq!(paced_sender(25_000_000, 100).0.tso_segs(), 16);
    // cwnd leaves room for two more segments: the skb carries two (tcp_cwnd_test).
    let (mut s, mut q, t0) = paced_sender(25_000_000, 12);
    let mut out = Vec::new();
    s.transmit(t0, &mut q, &mut out);
    assert_eq!(out.len(), 2);
}

/// BBR at 96 Mbit/s (skbs of eight segments) with `free` segments of room in cwnd, at a
/// time when its pacing slot has come and the head's ACK is due (srtt 20 ms) within 1 ms.
fn short_of_cwnd_as_the_heads_ack_nears(free: u32) -> (TcpSender, EventQueue, SimTime) {
    let (mut s, q, _) = paced_sender(12_000_000, 100);
    assert_eq!(s.tso_segs(), 8);
    s.tcp.snd_cwnd = s.in_flight() + free;
    let now = s.segments.front().unwrap().xmit_time + SimDuration::from_micros(19_500);
    s.tcp.next_send_time = now;
    (s, q, now)
}

#[test]
fn a_paced_sender_short_of_cwnd_gathers_a_full_skb_until_a_millisecond_after_its_pacing_slot() {
    // Room for two segments of an skb of eight.
    let (mut s, mut q, now) = short_of_cwnd_as_the_heads_ack_nears(2);
    let mut out = Vec::new();
    s.transmit(now, &mut q, &mut out);
    assert!(out.is_empty(), "two segments of room wait for more");
    // ACKs open room for a full skb: it leaves whole.
    s.tcp.snd_cwnd += 6;
    s.transmit(now, &mut q, &mut out);
    assert_eq!(out.len(), 8);
    // Room for two again; a millisecond after the pacing slot they leave as they are.
    out.clear();
    s.tcp.snd_cwnd = s.in_flight() + 2;
    let slot = s.tcp.next_send_time;
    s.transmit(slot + SimDuration::from_micros(999), &mut q, &mut out);
    assert!(out.is_empty());
    s.transmit(slot + SimDuration::from_micros(1_001), &mut q, &mut out);
    assert_eq!(out.len(), 2);
}

#[test]
fn a_third_of_the_window_is_counted_in_bytes_so_four_free_segments_of_fourteen_wait() {
    // Linux's chunk is min(snd_wnd, cwnd x mss) / 3 in bytes: 4.67 segments of a cwnd of
    // 14. Four free segments (short of the skb's eight) are below it and wait for the
    // head's ACK, due within 1 ms; five of 15 are a third and leave at once.
    let (mut s, mut q, now) = short_of_cwnd_as_the_heads_ack_nears(4);
    assert_eq!(s.tcp.snd_cwnd, 14);
    let mut out = Vec::new();
    s.transmit(now, &mut q, &mut out);
    assert!(out.is_empty(), "4 x 3 < 14: deferred");
    s.tcp.snd_cwnd += 1;
    s.transmit(now, &mut q, &mut out);
    assert_eq!(out.len(), 5, "5 x 3 >= 15: sent");
}

fn before(t: SimTime, micros: u64) -> SimTime {
    SimTime(t.as_nanos() - micros * 1_000)
}

/// A CUBIC sender whose initial window (10 segments) left at `t0` over a 20 ms path.
fn unpaced_sender() -> (TcpSender, EventQueue, SimTime) {
    let (s, q, t0, out) = super::super::started_cubic_sender(SimDuration::from_millis(20), false);
    assert_eq!(out.len(), 10, "the initial window leaves at once: nothing in flight to wait for");
    assert_eq!(s.srtt(), SimDuration::from_millis(20));
    (s, q, t0)
}

#[test]
fn a_full_window_counts_as_rwnd_limited_only_when_cwnd_would_let_the_sender_go() {
    // tcp_write_xmit tests cwnd before the window: a sender stopped by both is
    // cwnd-limited, and TCP_CHRONO_RWND_LIMITED does not run.
    let (mut s, mut q, t0) = unpaced_sender();
    let mut out = Vec::new();
    s.snd_wnd_end = s.tcp.snd_nxt; // the receiver's window is full
    let now = t0 + SimDuration::from_millis(1);
    s.transmit(now, &mut q, &mut out);
    assert!(out.is_empty() && s.stats.rwnd_limited_since.is_none(), "cwnd full too: not rwnd-limited");
    s.tcp.snd_cwnd = 20;
    s.transmit(now, &mut q, &mut out);
    assert!(out.is_empty(), "the window holds the sender");
    assert_eq!(s.stats.rwnd_limited_since, Some(now));
    // The window opens past cwnd: the sender ends cwnd-limited, the chrono stops and
    // keeps the time it ran.
    s.snd_wnd_end += 20;
    s.transmit(now + SimDuration::from_millis(3), &mut q, &mut out);
    assert!(!out.is_empty());
    assert_eq!(s.stats.rwnd_limited_ns, 3_000_000);
}

#[test]
fn an_unpaced_sender_sizes_skbs_by_the_pacing_rate_linux_sets_for_it() {
    let (mut s, _, _) = unpaced_sender();
    // After the handshake: 200% of 10 x 1448 B per 20 ms.
    assert_eq!(s.tcp.pacing_rate_bytes_per_sec, 1_448_000);
    // Slow start, 200%: 2 x 64 x 1448 B / 20 ms = 9.27 MB/s, 9050 B per ms: 6 segments.
    s.tcp.snd_cwnd = 64;
    s.update_unpaced_pacing_rate();
    assert_eq!(s.tcp.pacing_rate_bytes_per_sec, 9_267_200);
    assert_eq!(s.tso_segs(), 6);
    // Congestion avoidance, 120%: 1.2 x 130 x 1448 B / 20 ms, 11_029 B per ms: 7.
    s.tcp.snd_ssthresh = 100;
    s.tcp.snd_cwnd = 130;
    s.update_unpaced_pacing_rate();
    assert_eq!(s.tso_segs(), 7);
    // Small windows: tcp_min_tso_segs.
    s.tcp.snd_cwnd = 10;
    s.update_unpaced_pacing_rate();
    assert_eq!(s.tso_segs(), 2);
}

#[test]
fn an_unpaced_sender_defers_a_short_skb_while_an_ack_is_near_and_its_last_write_was_recent() {
    let (mut s, mut q, t0) = unpaced_sender();
    let mut out = Vec::new();
    // 19.5 ms on: the head's ACK is due (srtt 20 ms) within min(srtt/2, 1 ms); last
    // write 0.5 ms ago.
    let now = t0 + SimDuration::from_micros(19_500);
    s.tcp.next_send_time = before(now, 500);
    s.tcp.snd_cwnd = 11; // room for one segment; an skb holds two
    s.transmit(now, &mut q, &mut out);
    assert!(out.is_empty(), "one segment of room is held back");
    // When the next ACK (here: cwnd) opens room for a full skb, it leaves whole.
    s.tcp.snd_cwnd = 12;
    s.transmit(now, &mut q, &mut out);
    assert_eq!(out.iter().map(|t| t.seq).collect::<Vec<_>>(), vec![10, 11]);
    // Once an skb went out, a shorter remainder follows at once: three segments of
    // room, skbs of two, all three leave.
    out.clear();
    s.tcp.next_send_time = before(now, 500);
    s.tcp.snd_cwnd = 15;
    assert_eq!(s.tso_segs(), 2);
    s.transmit(now, &mut q, &mut out);
    assert_eq!(out.iter().map(|t| t.seq).collect::<Vec<_>>(), vec![12, 13, 14]);
}

#[test]
fn an_unpaced_sender_sends_a_short_skb_at_once_after_a_quiet_millisecond_or_with_the_ack_far_off() {
    // Last write 1.5 ms ago: deferral would make the sender bursty; send now.
    let (mut s, mut q, t0) = unpaced_sender();
    let mut out = Vec::new();
    let now = t0 + SimDuration::from_millis(15);
    s.tcp.next_send_time = before(now, 1_500);
    s.tcp.snd_cwnd = 11;
    s.transmit(now, &mut q, &mut out);
    assert_eq!(out.len(), 1);
    // The head's ACK is due in 5 ms, more than min(srtt/2, 1 ms): send now (Linux
    // before Oct 2025 deferred here, the head having left over srtt/2 ago).
    let (mut s, mut q, t0) = unpaced_sender();
    out.clear();
    let now = t0 + SimDuration::from_millis(15);
    s.tcp.next_send_time = before(now, 500);
    s.tcp.snd_cwnd = 11;
    s.transmit(now, &mut q, &mut out);
    assert_eq!(out.len(), 1);
    // In recovery: never deferred.
    let (mut s, mut q, t0) = unpaced_sender();
    out.clear();
    let now = t0 + SimDuration::from_micros(19_500);
    s.tcp.next_send_time = before(now, 500);
    s.tcp.ca_state = CaState::Recovery;
    s.tcp.snd_cwnd = 11;
    s.transmit(now, &mut q, &mut out);
    assert_eq!(out.len(), 1);
}

#[test]
fn under_fq_cubic_leaves_at_the_pacing_rate_tcp_sets_for_it_where_without_it_the_window_leaves_at_once() {
    // Congestion avoidance, cwnd 100 of which 10 in flight: 120% of 100 x 1448 B per 20 ms.
    let open_window = |fq: bool| {
        let (mut s, mut q, t0) = unpaced_sender();
        if fq {
            s.use_fq_pacing();
        }
        s.tcp.snd_ssthresh = 50;
        s.tcp.snd_cwnd = 100;
        s.update_unpaced_pacing_rate();
        let mut out = Vec::new();
        let now = t0 + SimDuration::from_millis(5);
        s.transmit(now, &mut q, &mut out);
        (s, out.len(), now)
    };
    let (plain, sent_plain, _) = open_window(false);
    // Unpaced: all that cwnd and the written data allow, back to back (several skbs).
    let written = plain.send_buffer.write_seq() - 10;
    assert_eq!(sent_plain as u64, written.min(plain.tcp.snd_cwnd as u64 - 10));
    assert!(sent_plain as u32 > 2 * plain.tso_segs());
    let (paced, sent_paced, now) = open_window(true);
    assert_eq!(paced.tcp.pacing_rate_bytes_per_sec, 8_688_000);
    // fq: one skb (about a millisecond at that rate), then the next only at its departure time.
    assert_eq!(sent_paced as u32, paced.tso_segs());
    let skb_ns = sent_paced as u64 * MSS as u64 * 1_000_000_000 / 8_688_000;
    assert!(paced.tcp.next_send_time >= now + SimDuration(skb_ns / 2), "the pacing clock moved on by the skb");
}
