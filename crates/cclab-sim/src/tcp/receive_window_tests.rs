//! The receive window's tests (receive_window.rs): each against a measurement of the
//! kernel engine or a rule of Linux's source.

use super::*;
use cclab_cc::SimDuration;

const MSS: u64 = 1448;

fn established() -> ReceiveWindow {
    ReceiveWindow::new(MSS, KERNEL_SEGMENT_TRUESIZE_BYTES, SimTime::ZERO)
}

#[test]
fn a_new_connection_offers_45_segments_and_counts_ten_per_rtt() {
    // Kernel engine (tcp_probe): the sender's first snd_wnd is 65160 bytes; the
    // first tcp_rcvbuf_grow event starts from space = 14480.
    let rw = established();
    assert_eq!(rw.initial_window_end(), 45);
    assert_eq!(rw.space_bytes, 14_480);
    assert_eq!(rw.wscale, 14);
}

#[test]
fn the_first_full_segment_sets_the_clamp_from_the_measured_ratio() {
    // Kernel engine: window_clamp = 82944 = 131072 * 162 / 256 after the first data.
    let mut rw = established();
    rw.on_in_order_data(SimTime::ZERO, 1, 1);
    assert_eq!(rw.scaling_ratio, 162);
    assert_eq!(rw.window_clamp_bytes, 82_944);
}

#[test]
fn the_unread_segment_an_ack_leaves_behind_holds_a_new_window_at_56_segments() {
    // Kernel engine (tcp_probe, 2 BBR at 20/40 ms): the 40 ms flow's snd_wnd stays
    // at 56 segments (81920 bytes) until the buffer first grows. Each ACK leaves
    // while its segment is still queued, so free space and rcv_ssthresh stop at
    // win_from_space(131072 - 2288) = 81496, aligned up to 5 units of 16384.
    let mut rw = established();
    let mut end = 0;
    for rcv_nxt in 1..=40 {
        rw.on_in_order_data(SimTime::ZERO, rcv_nxt, 1);
        end = rw.select_window_end(rcv_nxt, 1) - rcv_nxt;
        rw.on_read(SimTime::ZERO, rcv_nxt);
    }
    assert_eq!(end, 81_920 / MSS);
    // With nothing charged (a reader ahead of the ACK) the window would reach the
    // clamp, 82944 bytes aligned up to 98304: 67 segments.
    let mut rw = established();
    for rcv_nxt in 1..=40 {
        rw.on_in_order_data(SimTime::ZERO, rcv_nxt, 0);
        end = rw.select_window_end(rcv_nxt, 0) - rcv_nxt;
    }
    assert_eq!(end, 98_304 / MSS);
}

#[test]
fn a_read_that_frees_the_buffer_behind_a_nearly_used_window_offers_an_update() {
    // The handshake offered 45 segments; the sender has used 44, none read yet.
    let mut rw = established();
    assert_eq!(rw.select_window_end(0, 0), 45);
    for rcv_nxt in 1..=44 {
        rw.on_in_order_data(SimTime::ZERO, rcv_nxt, rcv_nxt);
    }
    // Once read, the free window (56 segments) is far more than twice the one left.
    assert!(rw.read_doubles_window(44, 0));
    // With most of the window still open, a read sends no update.
    let mut fresh = established();
    fresh.select_window_end(0, 0);
    fresh.on_in_order_data(SimTime::ZERO, 1, 1);
    assert!(!fresh.read_doubles_window(1, 0));
}

#[test]
fn a_burst_read_at_once_holds_rcv_ssthresh_lower_than_segments_read_one_by_one() {
    // The initial window's ten segments arrive back to back and are read together:
    // each one's tcp_grow_window sees the ones before it still queued. Kernel engine
    // (tcp_rcvbuf_grow at the first read): rcv_ssthresh 77835 after such a burst.
    let mut burst = established();
    for k in 1..=10 {
        burst.on_in_order_data(SimTime::ZERO, k, k);
    }
    let mut one_by_one = established();
    for k in 1..=10 {
        one_by_one.on_in_order_data(SimTime::ZERO, k, 1);
        one_by_one.on_read(SimTime::ZERO, k);
    }
    assert_eq!(one_by_one.rcv_ssthresh_bytes, 81_496);
    assert!(burst.rcv_ssthresh_bytes < one_by_one.rcv_ssthresh_bytes);
    // Within 5%: the kernel's truesize per skb varies (scaling_ratio 142-162 measured).
    assert!(burst.rcv_ssthresh_bytes.abs_diff(77_835) * 20 < 77_835, "{}", burst.rcv_ssthresh_bytes);
}

#[test]
fn the_first_measurement_ends_at_the_first_read_and_counts_the_cookie() {
    // Kernel engine, 60 ms flow: the socket was set up 61 ms before the first data was
    // read; that read grew `space` from 14480 to copied = 14517 (cookie + 10 segments).
    let setup = SimTime::ZERO;
    let first_read = setup + SimDuration::from_millis(61);
    let mut rw = ReceiveWindow::new(MSS, KERNEL_SEGMENT_TRUESIZE_BYTES, setup).with_bytes_read_before_data(IPERF3_COOKIE_BYTES);
    rw.on_timestamp(first_read, SimTime(first_read.as_nanos() - 61_000_000));
    for k in 1..=10 {
        rw.on_in_order_data(first_read, k, k);
    }
    rw.on_read(first_read, 10);
    assert_eq!(rw.space_bytes, 14_517);
    assert_eq!(rw.space_time, first_read);
    // The next measurement, closed by the read 62 ms on, counts data only: 31 segments.
    for k in 11..=41 {
        let now = first_read + SimDuration::from_micros(2_000 * (k - 10));
        rw.on_in_order_data(now, k, 1);
        rw.on_read(now, k);
    }
    assert_eq!(rw.space_bytes, 31 * MSS);
}

#[test]
fn autotuning_stops_at_tcp_rmem_max_and_the_window_scale_is_chosen_for_it() {
    // Linux's stock tcp_rmem[2], 6 MiB: scale ilog2(6291456) - 15 = 7 (14 for 512 MiB).
    let stock = 6 * 1024 * 1024;
    let mut rw = established().with_tcp_rmem_max(stock);
    assert_eq!((established().wscale, rw.wscale), (14, 7));
    rw.measure_rcv_mss();
    rw.space_bytes = 4_000_000;
    rw.rcvbuf_grow(8_000_000, 0);
    assert_eq!(rw.rcvbuf_bytes, stock);
    assert_eq!(rw.window_clamp_bytes, rw.win_from_space(stock));
    // Below net.core.rmem_max (4 MiB on the kernel engine's host), that decides the scale:
    // ilog2(4194304) - 15 = 7.
    assert_eq!(established().with_tcp_rmem_max(131_072).wscale, 7);
}

#[test]
fn a_locked_receive_buffer_scales_the_window_for_itself_and_never_grows() {
    // Measured on the kernel engine's kernel (SO_RCVBUF before listen, `ss` on the
    // accepted socket): 64 KiB gives wscale 1, 1 MiB gives 5.
    assert_eq!(established().with_locked_rcvbuf(65_536).wscale, 1);
    assert_eq!(established().with_locked_rcvbuf(1 << 20).wscale, 5);
    let mut rw = established().with_locked_rcvbuf(128_000);
    assert_eq!(rw.rcvbuf_bytes(), 256_000);
    // A second of reads at 100 Mbit/s would grow an autotuned buffer past 25 MB.
    let mut now = SimTime::ZERO;
    let mut seq = 0;
    for _ in 0..1_000 {
        now = now + SimDuration::from_millis(1);
        seq += 8;
        rw.on_timestamp(now, SimTime(now.as_nanos() - 1_000_000));
        rw.on_in_order_data(now, seq, 1);
        rw.on_read(now, seq);
    }
    assert_eq!(rw.rcvbuf_bytes(), 256_000);
    // The window never passes what the 16-bit field carries at that scale (2 x 65535),
    // though the buffer's window at the measured ratio would be 162,000 bytes.
    let end = rw.select_window_end(seq, 0);
    assert_eq!((end - seq) * MSS, 131_070 / MSS * MSS);
    // SO_RCVBUF is clamped to net.core.rmem_max before it is doubled.
    assert_eq!(established().with_locked_rcvbuf(100_000_000).rcvbuf_bytes(), 2 * NET_CORE_RMEM_MAX_BYTES);
}

#[test]
fn the_buffer_grows_as_the_kernels_tracepoint_shows() {
    // tcp_rcvbuf_grow on the kernel engine: space 14517 -> copied 31856 gave
    // rcvbuf 341184 and window_clamp 215905 (ratio 162).
    let mut rw = established();
    rw.measure_rcv_mss();
    rw.space_bytes = 14_517;
    rw.rcvbuf_grow(31_856, 0);
    assert!(rw.rcvbuf_bytes.abs_diff(341_184) <= 2, "{}", rw.rcvbuf_bytes);
    assert!(rw.window_clamp_bytes.abs_diff(215_905) <= 2, "{}", rw.window_clamp_bytes);
    // And with an out-of-order span: space 144800 -> 459016, ooo 124528 bytes
    // gave window_clamp 5026817.
    let mut rw = established();
    rw.measure_rcv_mss();
    rw.space_bytes = 144_800;
    rw.rcvbuf_grow(459_016, 124_528 / MSS);
    let expected = 5_026_817u64;
    // The span is whole segments here (86 of them, 124528 = 86 * 1448).
    assert!(rw.window_clamp_bytes.abs_diff(expected) <= 4, "{}", rw.window_clamp_bytes);
}

#[test]
fn the_window_is_a_multiple_of_the_scale_and_its_edge_never_moves_back() {
    let mut rw = established();
    let mut end = rw.initial_window_end();
    let mut rcv_nxt = 0;
    let mut now = SimTime::ZERO;
    // One segment every 100 us over a 20 ms RTT: 200 segments read per RTT.
    for _ in 0..2_000 {
        now = now + SimDuration::from_micros(100);
        rcv_nxt += 1;
        rw.on_timestamp(now, SimTime(now.as_nanos().saturating_sub(20_000_000)));
        rw.on_in_order_data(now, rcv_nxt, 1);
        rw.on_read(now, rcv_nxt);
        let new_end = rw.select_window_end(rcv_nxt, 0);
        assert!(new_end >= end, "edge moved back from {end} to {new_end}");
        assert_eq!(rw.rcv_wnd_bytes % (1 << rw.wscale), 0);
        end = new_end;
    }
    // The window opened to hold more than one RTT of reads.
    assert!(end - rcv_nxt > 200, "{}", end - rcv_nxt);
}

#[test]
fn out_of_order_data_holds_the_right_edge_while_the_hole_stays() {
    let mut rw = established();
    let mut now = SimTime::ZERO;
    // Grow to a steady buffer over many RTTs of 100 segments each.
    let mut rcv_nxt = 0;
    for _ in 0..50 {
        for _ in 0..100 {
            now = now + SimDuration::from_micros(200);
            rcv_nxt += 1;
            rw.on_timestamp(now, SimTime(now.as_nanos().saturating_sub(20_000_000)));
            rw.on_in_order_data(now, rcv_nxt, 1);
            rw.on_read(now, rcv_nxt);
            rw.select_window_end(rcv_nxt, 0);
        }
    }
    let edge = rw.select_window_end(rcv_nxt, 0);
    // A hole at rcv_nxt: everything after it queues out of order.
    let mut ooo = 0;
    for k in 1..=(edge - rcv_nxt - 1) {
        ooo += 1;
        rw.on_out_of_order_data(ooo, k + 1);
        let e = rw.select_window_end(rcv_nxt, ooo);
        assert!(e >= edge);
        // Each queued segment takes its memory from the free space, so the edge stays
        // within one window-scale unit of where it was (uncharged, it ran 200 segments on).
        let granule_segments = (1 << rw.wscale) / MSS;
        assert!(e - edge <= granule_segments, "edge ran from {edge} to {e}");
    }
    // The queued data is charged at its truesize.
    assert!(rw.tcp_space(ooo) < rw.tcp_space(0));
}

#[test]
fn a_larger_timestamp_sample_is_blended_and_a_smaller_one_replaces() {
    let mut rw = established();
    rw.on_timestamp(SimTime::ZERO + SimDuration::from_millis(20), SimTime::ZERO);
    assert_eq!(rw.rcv_rtt_us(), 20_000);
    rw.on_timestamp(SimTime::ZERO + SimDuration::from_millis(101), SimTime::ZERO + SimDuration::from_millis(1));
    assert_eq!(rw.rcv_rtt_us(), 20_000 + (100_000 - 20_000) / 8);
    // The same TSecr again is not a new sample.
    rw.on_timestamp(SimTime::ZERO + SimDuration::from_millis(200), SimTime::ZERO + SimDuration::from_millis(1));
    assert_eq!(rw.rcv_rtt_us(), 30_000);
    rw.on_timestamp(SimTime::ZERO + SimDuration::from_millis(12), SimTime::ZERO + SimDuration::from_millis(2));
    assert_eq!(rw.rcv_rtt_us(), 10_000);
}
