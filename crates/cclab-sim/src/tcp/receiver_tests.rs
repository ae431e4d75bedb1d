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
