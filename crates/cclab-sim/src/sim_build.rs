//! Building a simulation from its config (`Simulation::new`): the flows' senders and
//! receivers with their host settings, the bottleneck and its qdisc, the noise, and the
//! first events. Every random stream is forked here, in a fixed order (sim.rs).

use super::*;
use crate::stall::BottleneckStalls;
use crate::tcp::receiver::{READER_IDLE_WAKE_FLOOR_NS, READER_IDLE_WAKE_MEAN_NS};
use crate::tcp::rtt::TS_TICK_NS;
use cclab_aqm::delivery_trace::DeliveryTrace;
use cclab_aqm::QueueLimit;

impl Simulation {
    pub fn new(config: SimConfig) -> Result<Self, String> {
        config.validate()?;
        let b = &config.bottleneck;
        let rate = Bandwidth::from_bps(b.rate_bps);
        let limit = match (b.queue_limit_bytes, b.queue_limit_packets) {
            (Some(bytes), _) => QueueLimit::Bytes(bytes),
            (_, Some(pkts)) => QueueLimit::Packets(pkts),
            _ => unreachable!("validated"),
        };
        let mut root_rng = SimRng::new(config.seed);
        let loss_rng = root_rng.fork(0);
        let qdisc = b.aqm.build(limit, b.rate_bps, config.host.frame_bytes());
        let half_rtt = SimDuration(b.rtt_ns / 2);
        let mut flows = Vec::with_capacity(config.flows.len());
        for f in &config.flows {
            let cc_seed = root_rng.fork(1 + f.flow_id as u64).next_u64();
            let mut sender = TcpSender::new(f.flow_id, &f.cc_config()?, config.host.mss_bytes(), f.size_bytes, f.rwnd_bytes, cc_seed);
            if config.host.loss_recovery == crate::config::LossRecovery::Classic {
                sender.use_classic_loss_recovery();
            }
            sender.set_send_buffer(f.sndbuf_bytes, config.host.tcp_wmem_max_bytes);
            if config.host.sender_qdisc == crate::config::SenderQdisc::Fq {
                sender.use_fq_pacing();
            }
            // Both ends run net.ipv4.tcp_ecn=1 when the flow asks for ECN: the SYN's
            // ECE|CWR is answered by a SYN-ACK with ECE, so ECN is on (tcp_ecn_rcv_synack).
            // A CC that needs ECN (DCTCP) asks for it whatever tcp_ecn says, at both ends
            // (tcp_ecn_send_syn, tcp_ecn_create_request), and echoes as DCTCP.
            let needs_ecn = sender.cc().needs_ecn();
            sender.tcp.ecn_ok = f.ecn || f.accecn || needs_ecn;
            sender.accecn |= f.accecn;
            let mut receiver = TcpReceiver::new(SimDuration(b.rtt_ns + f.extra_rtt_ns));
            receiver.ecn_ok = sender.tcp.ecn_ok;
            // With Accurate ECN the ACE counter carries every mark: no DCTCP echo on top.
            receiver.dctcp_echo = needs_ecn && !sender.accecn;
            // Accurate ECN where the CC asks for it (Prague), at both ends.
            receiver.accecn = sender.accecn;
            flows.push(Flow {
                sender,
                receiver,
                access: Pipe::default(),
                acks: Pipe::default(),
                access_free_at: SimTime::ZERO,
                ack_prop: half_rtt + SimDuration(f.extra_rtt_ns),
                start: SimTime(f.start_ns),
                started: false,
                syn_rtt: SimDuration::ZERO,
                syn_ack_sent: SimTime::ZERO,
                delayed_ack: LazyTimer::default(),
                compressed_ack: LazyTimer::default(),
                read: LazyTimer::default(),
                flow_hash: flow_hash(f.flow_id),
                in_bottleneck: 0,
                queue_drops: 0,
                aqm_drops: 0,
                random_losses: 0,
                completion: None,
                sampled_delivered_bytes: 0,
                sampled_retrans: 0,
            });
        }
        let mut queue = EventQueue::default();
        for (i, f) in flows.iter().enumerate() {
            queue.schedule(f.start, Event::FlowStart(i as u32));
        }
        queue.schedule(SimTime(config.flow_sample_interval_ns), Event::FlowSample);
        queue.schedule(SimTime(config.queue_sample_interval_ns), Event::QueueSample);
        for (i, change) in b.schedule.iter().enumerate() {
            if change.at_ns <= config.duration_ns {
                queue.schedule(SimTime(change.at_ns), Event::LinkChange(i as u32));
            }
        }
        if config.warmup_ns > 0 {
            queue.schedule(SimTime(config.warmup_ns), Event::Warmup);
        }
        // Forked after every flow's, so adding the qdisc's stream moved no other.
        let qdisc_rng = root_rng.fork(QDISC_RNG_STREAM);
        let mut bottleneck = Bottleneck::new(rate, limit, config.host.frame_bytes() as u64, qdisc, qdisc_rng);
        // Forked last, so that jitter moves no other stream.
        let ack_jitter = AckJitter::kernel_like(root_rng.fork(ACK_JITTER_RNG_STREAM), config.jitter_ns);
        // Forked after jitter's, for the same reason; none drawn at 0 (a run without stalls).
        if config.stall_per_packet > 0.0 {
            bottleneck.set_stalls(BottleneckStalls::new(root_rng.fork(STALL_RNG_STREAM), config.stall_per_packet));
        }
        let noise = config.noise.resolve(config.jitter_ns);
        // Forked after the stalls'; drawn only with the phase on, so a run without it keeps
        // its clocks' edges at whole milliseconds from time zero.
        let mut ts_clock = TsClock::default();
        if noise.ts_clock_phase {
            ts_clock.phase = SimDuration(root_rng.fork(CLOCK_PHASE_RNG_STREAM).below(TS_TICK_NS as u32) as u64);
            for flow in &mut flows {
                flow.sender.ts_clock = ts_clock;
                flow.receiver.ts_clock = ts_clock;
            }
        }
        if noise.idle_reader_wake {
            // Forked after the clock phase's, one stream a reader (wake.rs, receiver.rs).
            for (i, flow) in flows.iter_mut().enumerate() {
                let rng = root_rng.fork(READER_WAKE_RNG_STREAM + i as u64);
                flow.receiver.idle_reader_wake = Some(AckJitter::new(rng, READER_IDLE_WAKE_MEAN_NS, READER_IDLE_WAKE_FLOOR_NS));
            }
        }
        if let Some(times_ms) = &b.trace_ms {
            bottleneck.use_trace(DeliveryTrace::new(times_ms));
        }
        if b.schedule.iter().any(|c| c.rate_bps.is_some()) {
            bottleneck.book_at_dequeue();
        }
        // The access links stay faster than the bottleneck at its fastest.
        let top_rate_bps = b.schedule.iter().filter_map(|c| c.rate_bps).fold(b.rate_bps, u64::max);
        Ok(Simulation {
            end_time: SimTime(config.duration_ns),
            now: SimTime::ZERO,
            queue,
            loss_rng,
            ack_jitter,
            wake: MachineWake::kernel_like(noise.idle_machine_wake),
            loss_probability: b.loss_probability,
            bottleneck,
            dequeue_at: None,
            access_rate: Bandwidth::from_bps(
                config.host.access_rate_bps.unwrap_or((top_rate_bps * ACCESS_RATE_FACTOR).max(MIN_ACCESS_RATE.bits_per_sec)),
            ),
            egress: Pipe::default(),
            egress_prop: half_rtt,
            flows,
            flow_series: FlowSeries::default(),
            queue_series: QueueSeries::default(),
            data_packets: 0,
            sampled_drops: 0,
            sampled_ce_marks: 0,
            sampled_dequeued_bytes: 0,
            last_queue_sample: SimTime::ZERO,
            scratch: Vec::new(),
            unfinished_flows: config.flows.iter().all(|f| f.size_bytes.is_some()).then_some(config.flows.len()),
            check_invariants: false,
            warmup: None,
            ts_clock,
            config,
        })
    }
}
