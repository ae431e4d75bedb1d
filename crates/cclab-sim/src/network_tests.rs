use super::*;
use cclab_aqm::{AqmConfig, Ecn, PacketMeta};

const FRAME: u32 = crate::FULL_FRAME_BYTES;

fn fifo(rate: Bandwidth, limit: QueueLimit) -> Bottleneck {
    Bottleneck::new(rate, limit, FRAME as u64, AqmConfig::Fifo.build(limit, rate.bits_per_sec, FRAME), SimRng::new(1))
}

fn frame(seq: u64) -> Packet<DataPacket> {
    let inner = DataPacket { flow: 0, payload_bytes: FRAME - crate::FRAME_OVERHEAD_BYTES, seq, ecn: Ecn::NotEct, cwr: false, psh: false, tsecr: SimTime::ZERO, tsval: SimTime::ZERO };
    Packet { meta: PacketMeta { len_bytes: FRAME, flow_hash: 0, src_host_hash: 0, dst_host_hash: 0, ecn: Ecn::NotEct, enqueue_time: SimTime::ZERO, l4s_queue: false }, inner }
}

/// Runs the shaper's dequeues up to `until`, as the simulator's events would.
fn drain(b: &mut Bottleneck, until: SimTime) -> Vec<SimTime> {
    while let Some(t) = b.next_dequeue().filter(|t| *t <= until) {
        b.advance(t);
    }
    b.departed.drain(..).map(|(t, _)| t).collect()
}

#[test]
fn a_packet_sent_after_the_delay_shrank_arrives_no_earlier_than_the_one_before_it() {
    let mut pipe = Pipe::default();
    assert!(pipe.push(SimTime(10), 'a'));
    assert!(!pipe.push(SimTime(5), 'b')); // sent later over a shorter delay
    assert_eq!(pipe.pop(), Some((SimTime(10), 'a')));
    // Its head time never runs backwards, so neither does the simulation's clock.
    assert_eq!(pipe.head_time(), Some(SimTime(10)));
}

#[test]
fn a_backlogged_queue_drains_at_the_line_rate() {
    let rate = Bandwidth::from_mbps(100);
    let mut b = fifo(rate, QueueLimit::Bytes(1_000_000));
    for i in 0..500 {
        b.enqueue(SimTime::ZERO, frame(i));
    }
    let departures = drain(&mut b, SimTime(u64::MAX));
    assert_eq!(departures.len(), 500);
    let last = *departures.last().unwrap();
    // The burst leaves at once; the rest at the rate.
    let burst_frames = b.burst_ns / rate.transmit_time(FRAME as u64).as_nanos();
    let expected = rate.transmit_time(FRAME as u64).as_nanos() * (500 - burst_frames);
    let diff = last.as_nanos() as i64 - expected as i64;
    assert!(diff.abs() <= rate.transmit_time(FRAME as u64).as_nanos() as i64, "last departure {last:?}, expected ~{expected}");
}

/// A backlog of `n` frames at time 0 drained at `rate`, with stalls after `per_packet` of
/// the departures that waited (0: none): every departure time.
fn drain_backlog(rate: Bandwidth, n: u64, per_packet: f64) -> Vec<SimTime> {
    let mut b = fifo(rate, QueueLimit::Bytes(n * FRAME as u64));
    if per_packet > 0.0 {
        b.set_stalls(BottleneckStalls::new(SimRng::new(7), per_packet));
    }
    for i in 0..n {
        b.enqueue(SimTime::ZERO, frame(i));
    }
    drain(&mut b, SimTime(u64::MAX))
}

#[test]
fn a_stall_shorter_than_the_bucket_delays_packets_but_costs_the_link_no_time() {
    // 10 Mbit/s: the bucket's 10 frames are 12.1 ms of tokens, more than any stall.
    let rate = Bandwidth::from_mbps(10);
    let (quiet, stalled) = (drain_backlog(rate, 3000, 0.0), drain_backlog(rate, 3000, 0.005));
    assert!(stalled.windows(2).all(|w| w[0] <= w[1]), "departures stay in order");
    assert!(quiet.iter().zip(&stalled).any(|(q, s)| s.as_nanos() >= q.as_nanos() + crate::stall::STALL_MIN.as_nanos()));
    // Tokens accrue through each stall, and the packets behind it catch up.
    assert_eq!(stalled.last(), quiet.last());
}

#[test]
fn a_stall_longer_than_the_bucket_loses_the_excess() {
    // 300 Mbit/s: the bucket holds 404 us; every stall drawn is at least 200 us.
    let rate = Bandwidth::from_mbps(300);
    let n = 20_000;
    let (quiet, stalled) = (drain_backlog(rate, n, 0.0), drain_backlog(rate, n, 0.002));
    let lost_ns = stalled.last().unwrap().as_nanos() - quiet.last().unwrap().as_nanos();
    // The same draws, replayed for the packets that waited (not the first burst's): the
    // link loses at most each stall's excess over the bucket.
    let waited = quiet.iter().filter(|t| **t > SimTime::ZERO).count();
    let mut stalls = BottleneckStalls::new(SimRng::new(7), 0.002);
    let burst_ns = tbf_burst_ns(rate, FRAME as u64);
    let excess_ns: u64 = (0..waited).map(|_| stalls.draw().as_nanos().saturating_sub(burst_ns)).sum();
    assert!(excess_ns > 0);
    assert!(lost_ns > 0 && lost_ns <= excess_ns, "lost {lost_ns} ns, stalls' excess {excess_ns} ns");
}

#[test]
fn a_full_byte_limited_queue_drops_the_arrival() {
    let rate = Bandwidth::from_mbps(10);
    let mut b = fifo(rate, QueueLimit::Bytes(3 * FRAME as u64));
    // Exhaust the burst first so frames actually queue.
    for i in 0..100 {
        b.enqueue(SimTime::ZERO, frame(i));
    }
    let accepted = b.departed.len() as u64 + b.qdisc.backlog_packets() as u64;
    assert!(b.backlog_bytes(SimTime::ZERO) <= 3 * FRAME as u64);
    assert_eq!(b.drops(), 100 - accepted);
    assert_eq!(b.overflow_drops, b.drops());
    assert_eq!(b.max_backlog_bytes, 3 * FRAME as u64);
}

#[test]
fn a_packet_limited_queue_holds_at_most_its_limit() {
    let mut b = fifo(Bandwidth::from_mbps(10), QueueLimit::Packets(5));
    for i in 0..50 {
        b.enqueue(SimTime::ZERO, frame(i));
    }
    assert_eq!(b.backlog_packets(SimTime::ZERO), 5);
}

#[test]
fn after_idle_the_bucket_refills_to_the_burst_only() {
    let rate = Bandwidth::from_mbps(100);
    let mut b = fifo(rate, QueueLimit::Bytes(10_000_000));
    let later = SimTime::ZERO + SimDuration::from_secs(10);
    for i in 0..100 {
        b.enqueue(later, frame(i));
    }
    let instant = drain(&mut b, SimTime(u64::MAX)).iter().filter(|t| **t == later).count();
    assert_eq!(instant as u64, b.burst_ns / rate.transmit_time(FRAME as u64).as_nanos());
}

#[test]
fn each_packet_is_dequeued_when_the_one_before_it_leaves() {
    let rate = Bandwidth::from_mbps(10);
    let mut b = fifo(rate, QueueLimit::Bytes(1_000_000));
    for i in 0..200 {
        b.enqueue(SimTime::ZERO, frame(i));
    }
    drain(&mut b, SimTime(u64::MAX));
    // Packet k waits for the k-1 before it minus the burst: sojourns spread
    // evenly from 0 to ~190 frame times (1.2 ms each at 10 Mbit/s).
    let frame_ms = rate.transmit_time(FRAME as u64).as_nanos() as f64 / 1e6;
    let p50 = b.sojourn.percentile_ms(0.5).unwrap();
    assert!((p50 / frame_ms - 90.0).abs() < 6.0, "p50 {p50} ms = {} frames", p50 / frame_ms);
    assert_eq!(b.sojourn.count(), 200);
}

#[test]
fn the_sojourn_histogram_reports_nearest_rank_bins() {
    let mut h = SojournHistogram::default();
    for us in 1..=100u64 {
        h.record(SimDuration::from_micros(us * 100));
    }
    h.record(SimDuration::from_secs(2));
    assert!((h.percentile_ms(0.5).unwrap() - 5.105).abs() < 1e-9);
    assert!((h.percentile_ms(1.0).unwrap() - 2000.5).abs() < 1e-9);
}
