//! The dumbbell: per-flow access links into one tbf-like bottleneck, a shared
//! link to the receivers, and an uncongested ACK path per flow.
//!
//! The base RTT is split as: bottleneck to receivers rtt/2, ACK path rtt/2 +
//! extra_rtt. Nothing delays data before the bottleneck, as on the kernel engine
//! (its delay line and netem sit on the router's egress towards each sender, the
//! ACK direction): a flow's extra RTT must not shift when its data reaches the
//! shared queue, or a long-RTT flow's slow start meets another flow's queue
//! later than on Linux (HyStart then ends it at half the window).
//!
//! A flow starts with a handshake: its data begins one RTT after its start time, as
//! on a real host. Random loss sits at the bottleneck's ingress, before the queue
//! (where netem sits on the seeds' routers).

use crate::config::SimConfig;
use crate::event::{Event, EventQueue, LazyTimer, PipeId, TimerKind};
use crate::metrics::{EventSeries, FlowSeries, QueueSeries};
use crate::jitter::AckJitter;
use crate::wake::MachineWake;
use crate::network::{Bottleneck, DataPacket, Pipe};
use crate::tcp::rtt::TsClock;
use crate::tcp::receive_window::{segment_truesize_bytes, ReceiveWindow, IPERF3_COOKIE_BYTES};
use crate::tcp::receiver::{AckAction, AckPacket, TcpReceiver};
use crate::tcp::sender::{TcpSender, Transmission};
use crate::window::{BottleneckCounters, FlowCounters, Snapshot};
use cclab_aqm::{DropReason, Packet, PacketMeta};
use cclab_cc::rng::SimRng;
use cclab_cc::{Bandwidth, CongestionControl, SimDuration, SimTime};

#[path = "sim_build.rs"]
mod build;
#[path = "sim_series.rs"]
mod series;

/// Senders' NIC rate: at least 10 Gbit/s (the replication testbeds had 10 GbE
/// hosts), and never the bottleneck.
pub const MIN_ACCESS_RATE: Bandwidth = Bandwidth::from_mbps(10_000);
pub const ACCESS_RATE_FACTOR: u64 = 10;
/// The qdisc's random stream (RED, PIE), apart from the loss and CC streams.
const QDISC_RNG_STREAM: u64 = 1 << 32;
const ACK_JITTER_RNG_STREAM: u64 = 2 << 32;
const STALL_RNG_STREAM: u64 = 3 << 32;
const CLOCK_PHASE_RNG_STREAM: u64 = 4 << 32;
/// Each receiver's reader wake-ups after idle: this plus the flow's index.
const READER_WAKE_RNG_STREAM: u64 = 5 << 32;
/// How often `run_observed` hands control to its observer: at tens of millions of
/// events per second this is a few hundred times a second, cheap against the events.
pub const OBSERVE_EVERY_EVENTS: u64 = 1 << 14;
/// The error of a run its observer stopped.
pub const INTERRUPTED: &str = "interrupted";

/// The flow's `skb_get_hash`: its id through a fixed mixer (MurmurHash3's
/// fmix32 finaliser), so hashed queues collide as rarely as for real 5-tuples.
pub fn flow_hash(flow_id: u32) -> u32 {
    let mut h = flow_id.wrapping_add(0x9E37_79B9);
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

pub struct Flow {
    pub sender: TcpSender,
    pub receiver: TcpReceiver,
    access: Pipe<DataPacket>,
    acks: Pipe<AckPacket>,
    access_free_at: SimTime,
    ack_prop: SimDuration,
    pub start: SimTime,
    pub started: bool,
    /// RTT the handshake measured, and when the receiver sent its SYN-ACK.
    syn_rtt: SimDuration,
    syn_ack_sent: SimTime,
    delayed_ack: LazyTimer,
    compressed_ack: LazyTimer,
    /// The application's read that `tcp_cleanup_rbuf` will follow with an ACK.
    read: LazyTimer,
    /// Hash of the flow's 5-tuple, as `skb_get_hash` gives the qdisc.
    flow_hash: u32,
    /// Packets in the bottleneck's qdisc (not yet dequeued).
    in_bottleneck: u64,
    /// Every bottleneck drop of this flow (overflow and AQM), and the AQM's alone.
    pub queue_drops: u64,
    pub aqm_drops: u64,
    pub random_losses: u64,
    pub completion: Option<SimTime>,
    sampled_delivered_bytes: u64,
    sampled_retrans: u64,
}

impl Flow {
    /// In-order payload bytes at the receiver.
    pub fn bytes_delivered(&self) -> u64 {
        let segs = self.receiver.segments_delivered;
        match self.sender.total_segments() {
            Some(total) if segs >= total => (total - 1) * self.sender.tcp.mss_bytes as u64 + self.sender.segment_bytes(total - 1) as u64,
            _ => segs * self.sender.tcp.mss_bytes as u64,
        }
    }
}

pub struct Simulation {
    pub config: SimConfig,
    pub now: SimTime,
    end_time: SimTime,
    queue: EventQueue,
    loss_rng: SimRng,
    ack_jitter: AckJitter,
    loss_probability: f64,
    pub bottleneck: Bottleneck,
    /// When the pending bottleneck dequeue event is due.
    dequeue_at: Option<SimTime>,
    access_rate: Bandwidth,
    egress: Pipe<DataPacket>,
    egress_prop: SimDuration,
    pub flows: Vec<Flow>,
    pub flow_series: FlowSeries,
    pub queue_series: QueueSeries,
    pub data_packets: u64,
    sampled_drops: u64,
    sampled_ce_marks: u64,
    sampled_dequeued_bytes: u64,
    last_queue_sample: SimTime,
    scratch: Vec<Transmission>,
    /// Flows that have not yet delivered and had acknowledged all their data;
    /// `None` when some flow is unbounded (the run then lasts its full duration).
    unfinished_flows: Option<usize>,
    /// Check scoreboard invariants after every event (tests).
    pub check_invariants: bool,
    /// The counters when the warm-up ended (None until then, or without a warm-up).
    pub warmup: Option<Snapshot>,
    /// The machine's millisecond clock, read by every host's timestamp option.
    ts_clock: TsClock,
    /// Whether the machine's CPUs are asleep, and so how late an ACK reaching its sender is handled.
    wake: MachineWake,
}

impl Simulation {
    /// The window counters now (read only): where a measurement window starts.
    pub fn snapshot(&self) -> Snapshot {
        let flows = self
            .flows
            .iter()
            .map(|f| {
                let s = &f.sender.stats;
                FlowCounters {
                    bytes_delivered: f.bytes_delivered(),
                    bytes_sent: s.bytes_sent,
                    data_segments_sent: s.data_segments_sent,
                    retrans_segments: s.retrans_segments,
                    queue_drops: f.queue_drops,
                    aqm_drops: f.aqm_drops,
                    random_losses: f.random_losses,
                    ce_segments: f.receiver.ce_segments,
                    rto_count: s.rto_count,
                    loss_probes: s.loss_probes,
                    segments_received: f.receiver.segments_received,
                    rwnd_limited_ns: f.sender.rwnd_limited_ns_at(self.now),
                    sndbuf_limited_ns: f.sender.sndbuf_limited_ns_at(self.now),
                    rtt_samples: s.rtt_samples_us.len(),
                }
            })
            .collect();
        let b = &self.bottleneck;
        Snapshot {
            time: self.now,
            time_s: self.now.as_nanos() as f64 / 1e9,
            flows,
            bottleneck: BottleneckCounters {
                dequeued_bytes: b.dequeued_bytes,
                overflow_drops: b.overflow_drops,
                aqm_drops: b.aqm_drops,
                ce_marks: b.ce_marks(),
                sojourn: b.sojourn.clone(),
                dual_queue: b.dual_queue.clone(),
            },
        }
    }

    pub fn events_processed(&self) -> u64 {
        self.queue.processed()
    }

    /// The time the run ended: the configured duration, or earlier when every
    /// flow is finite and has completed.
    pub fn end_time(&self) -> SimTime {
        self.end_time
    }

    /// The clock the timestamp option reads: its phase is drawn per seed with the noise on.
    pub fn ts_clock(&self) -> TsClock {
        self.ts_clock
    }

    pub fn run(&mut self) -> Result<(), String> {
        self.run_observed(|_, _| true)
    }

    /// Runs like `run`, calling `observe(now, events_processed)` every
    /// `OBSERVE_EVERY_EVENTS` events; a `false` from it stops the run with
    /// `Err(INTERRUPTED)`. The caller decides what to watch (wall clock, signals,
    /// progress): the simulation itself never reads a clock.
    pub fn run_observed(&mut self, mut observe: impl FnMut(SimTime, u64) -> bool) -> Result<(), String> {
        while let Some(t) = self.queue.peek_time() {
            if t > self.end_time {
                break;
            }
            let (now, event) = self.queue.pop().expect("peeked");
            // An event scheduled in the past (say, behind a deferred ACK) would run time backwards.
            debug_assert!(now >= self.now, "event at {now:?} after {:?}", self.now);
            self.now = now;
            self.handle(event);
            let processed = self.queue.processed();
            if processed % OBSERVE_EVERY_EVENTS == 0 && !observe(now, processed) {
                return Err(INTERRUPTED.into());
            }
            if self.check_invariants {
                for f in &self.flows {
                    f.sender.check_invariants()?;
                    f.receiver.check_invariants()?;
                    // A read past due that __tcp_cleanup_rbuf would follow with an ACK has sent it.
                    if f.receiver.read_due().is_some_and(|at| at < now) && f.receiver.read_will_ack(f.delayed_ack.is_armed()) {
                        return Err(format!("flow {}: a read at {:?} left the ACK it owes unsent", f.sender.flow_id, f.receiver.read_due()));
                    }
                }
                let limit_ok = match (self.config.bottleneck.queue_limit_bytes, self.config.bottleneck.queue_limit_packets) {
                    (Some(l), _) => self.bottleneck.max_backlog_bytes <= l,
                    _ => true,
                };
                if !limit_ok {
                    return Err("bottleneck backlog exceeded its limit".into());
                }
            }
            if self.unfinished_flows == Some(0) {
                self.end_time = now;
                // Close the series at the end of the run.
                self.sample_flows();
                self.sample_queue();
                break;
            }
        }
        if self.now < self.end_time {
            self.now = self.end_time;
        }
        Ok(())
    }

    fn handle(&mut self, event: Event) {
        let now = self.now;
        match event {
            Event::FlowStart(i) => {
                // The SYN crosses the bottleneck queue (it waits behind the backlog; its
                // own size and loss are ignored) and the SYN-ACK returns uncongested, as
                // late as any ACK can be (jitter.rs).
                let queueing = self.bottleneck.rate().transmit_time(self.bottleneck.backlog_bytes(now));
                self.drain_bottleneck();
                let flow = &mut self.flows[i as usize];
                flow.started = true;
                flow.syn_ack_sent = now + queueing + self.egress_prop;
                let syn_rtt = queueing + self.egress_prop + flow.ack_prop + self.ack_jitter.draw();
                flow.syn_rtt = syn_rtt;
                self.queue.schedule(now + syn_rtt, Event::FlowEstablished(i));
            }
            Event::FlowEstablished(i) => {
                let flow = &mut self.flows[i as usize];
                let flow_config = &self.config.flows[i as usize];
                if self.config.receive_window_autotuning && flow_config.rwnd_bytes.is_none() {
                    // The first data echoes the SYN-ACK's timestamp. The receiving socket
                    // was set up a handshake RTT before that data arrives and has read
                    // iperf3's cookie (the kernel engine's data connections; a client
                    // sends a request first the same way), so its first receive-buffer
                    // measurement ends with the first read of data.
                    let setup = SimTime((now + self.egress_prop).as_nanos().saturating_sub(flow.syn_rtt.as_nanos()));
                    let mut window = ReceiveWindow::new(self.config.host.mss_bytes() as u64, segment_truesize_bytes(self.config.host.mss_bytes() as u64), setup)
                        .with_bytes_read_before_data(IPERF3_COOKIE_BYTES)
                        .with_tcp_rmem_max(self.config.host.tcp_rmem_max_bytes);
                    if let Some(requested) = flow_config.rcvbuf_bytes {
                        window = window.with_locked_rcvbuf(requested);
                    }
                    flow.sender.set_peer_window(window.initial_window_end(), flow.receiver.ts_clock.read(flow.syn_ack_sent));
                    flow.receiver.use_receive_window(window);
                }
                let mut out = std::mem::take(&mut self.scratch);
                let syn_rtt = flow.syn_rtt;
                flow.sender.start(now, syn_rtt, &mut self.queue, &mut out);
                self.send_all(i, &mut out);
                self.scratch = out;
            }
            Event::PipeHead(PipeId::Access(i)) => {
                let flow = &mut self.flows[i as usize];
                let (_, pkt) = flow.access.pop().expect("scheduled head");
                if let Some(t) = flow.access.head_time() {
                    self.queue.schedule(t, Event::PipeHead(PipeId::Access(i)));
                }
                self.arrive_at_bottleneck(pkt);
            }
            Event::PipeHead(PipeId::Egress) => {
                self.wake.busy(now);
                let (_, pkt) = self.egress.pop().expect("scheduled head");
                if let Some(t) = self.egress.head_time() {
                    self.queue.schedule(t, Event::PipeHead(PipeId::Egress));
                }
                self.arrive_at_receiver(pkt);
            }
            Event::PipeHead(PipeId::Ack(i)) => {
                if self.wait_for_wake(event) {
                    return;
                }
                let flow = &mut self.flows[i as usize];
                let (_, ack) = flow.acks.pop().expect("scheduled head");
                if let Some(t) = flow.acks.head_time() {
                    // One that arrived while the machine woke is handled now, with this one.
                    self.queue.schedule(t.max(now), Event::PipeHead(PipeId::Ack(i)));
                }
                let mut out = std::mem::take(&mut self.scratch);
                let was_finished = flow.sender.is_finished();
                flow.sender.on_ack(now, &ack, &mut self.queue, &mut out);
                // A finite flow is done once everything it sent is acknowledged,
                // which only an ACK can bring about.
                if !was_finished && flow.sender.is_finished() {
                    if let Some(n) = self.unfinished_flows.as_mut() {
                        *n -= 1;
                    }
                }
                self.send_all(i, &mut out);
                self.scratch = out;
            }
            Event::Timer(i, kind) => match kind {
                TimerKind::Retransmit | TimerKind::Pacing => {
                    let mut out = std::mem::take(&mut self.scratch);
                    self.flows[i as usize].sender.on_timer(now, kind, &mut self.queue, &mut out);
                    self.send_all(i, &mut out);
                    self.scratch = out;
                }
                TimerKind::DelayedAck | TimerKind::CompressedAck => {
                    let flow = &mut self.flows[i as usize];
                    let timer = if kind == TimerKind::DelayedAck { &mut flow.delayed_ack } else { &mut flow.compressed_ack };
                    if timer.on_pop(now, &mut self.queue, event) {
                        self.send_ack(i);
                    }
                }
                TimerKind::Read => {
                    let flow = &mut self.flows[i as usize];
                    if flow.read.on_pop(now, &mut self.queue, event) && flow.receiver.read_will_ack(flow.delayed_ack.is_armed()) {
                        self.send_ack(i);
                    }
                }
            },
            Event::BottleneckDequeue => {
                if self.dequeue_at == Some(now) {
                    self.dequeue_at = None;
                    self.bottleneck.advance(now);
                    self.drain_bottleneck();
                }
            }
            Event::LinkChange(i) => self.change_link(i as usize),
            Event::FlowSample => {
                self.sample_flows();
                self.queue.schedule(now + SimDuration(self.config.flow_sample_interval_ns), Event::FlowSample);
            }
            Event::QueueSample => {
                self.sample_queue();
                self.queue.schedule(now + SimDuration(self.config.queue_sample_interval_ns), Event::QueueSample);
            }
            Event::Warmup => {
                self.warmup = Some(self.snapshot());
                self.bottleneck.start_window();
            }
        }
    }

    /// Applies entry `i` of the bottleneck's schedule: the rate for packets dequeued from
    /// now on, the base RTT for packets sent from now on (each link stays FIFO), the loss
    /// probability for packets arriving from now on.
    fn change_link(&mut self, i: usize) {
        let change = self.config.bottleneck.schedule[i].clone();
        if let Some(rate_bps) = change.rate_bps {
            self.bottleneck.set_rate(self.now, Bandwidth::from_bps(rate_bps));
            self.drain_bottleneck();
        }
        if let Some(rtt_ns) = change.rtt_ns {
            // The same split as at the start: half the base RTT on each side of the receiver.
            let half_rtt = SimDuration(rtt_ns / 2);
            self.egress_prop = half_rtt;
            for (flow, cfg) in self.flows.iter_mut().zip(&self.config.flows) {
                flow.ack_prop = half_rtt + SimDuration(cfg.extra_rtt_ns);
            }
        }
        if let Some(p) = change.loss_probability {
            self.loss_probability = p;
        }
    }

    /// Puts the sender's segments on its access link (serialised at the NIC rate).
    fn send_all(&mut self, flow_idx: u32, out: &mut Vec<Transmission>) {
        let now = self.now;
        if !out.is_empty() {
            self.wake.busy(now);
        }
        let flow = &mut self.flows[flow_idx as usize];
        for tx in out.drain(..) {
            let pkt = DataPacket { flow: flow_idx, payload_bytes: tx.payload_bytes, seq: tx.seq, ecn: tx.ecn, cwr: tx.cwr, psh: tx.psh, tsecr: flow.sender.ts_recent(), tsval: flow.sender.ts_clock.read(now) };
            let departure = now.max(flow.access_free_at) + self.access_rate.transmit_time(pkt.frame_bytes() as u64);
            flow.access_free_at = departure;
            if flow.access.push(departure, pkt) {
                self.queue.schedule(departure, Event::PipeHead(PipeId::Access(flow_idx)));
            }
            self.data_packets += 1;
        }
    }

    fn arrive_at_bottleneck(&mut self, pkt: DataPacket) {
        let flow = &mut self.flows[pkt.flow as usize];
        if self.loss_rng.bernoulli(self.loss_probability) {
            flow.random_losses += 1;
            return;
        }
        flow.in_bottleneck += 1;
        let meta = PacketMeta {
            len_bytes: pkt.frame_bytes(),
            flow_hash: flow.flow_hash,
            // One sender host and one receiver host per flow (CAKE's host isolation).
            src_host_hash: flow.flow_hash,
            dst_host_hash: flow.flow_hash,
            ecn: pkt.ecn,
            enqueue_time: self.now,
            l4s_queue: false,
        };
        self.bottleneck.enqueue(self.now, Packet { meta, inner: pkt });
        self.drain_bottleneck();
    }

    /// Moves what left the bottleneck onto the egress link, counts what it
    /// dropped, and keeps one dequeue event pending while packets wait.
    fn drain_bottleneck(&mut self) {
        for (departure, pkt) in self.bottleneck.departed.drain(..) {
            self.flows[pkt.flow as usize].in_bottleneck -= 1;
            let arrival = departure + self.egress_prop;
            if self.egress.push(arrival, pkt) {
                self.queue.schedule(arrival, Event::PipeHead(PipeId::Egress));
            }
        }
        for d in self.bottleneck.dropped.drain(..) {
            let flow = &mut self.flows[d.packet.inner.flow as usize];
            flow.in_bottleneck -= 1;
            flow.queue_drops += 1;
            if d.reason == DropReason::Aqm {
                flow.aqm_drops += 1;
            }
        }
        if let Some(t) = self.bottleneck.next_dequeue() {
            if self.dequeue_at != Some(t) {
                self.dequeue_at = Some(t);
                self.queue.schedule(t, Event::BottleneckDequeue);
            }
        }
    }

    /// Defers an ACK that reaches its sender on a sleeping machine until the machine is
    /// awake (wake.rs); true if it did. An ACK handled now marks the machine busy.
    fn wait_for_wake(&mut self, event: Event) -> bool {
        let ready = self.wake.ready_at(self.now);
        if ready > self.now {
            self.queue.schedule(ready, event);
            return true;
        }
        self.wake.busy(self.now);
        false
    }

    fn arrive_at_receiver(&mut self, pkt: DataPacket) {
        let now = self.now;
        let i = pkt.flow;
        let flow = &mut self.flows[i as usize];
        // A read the application made since the last arrival happened before this one.
        flow.receiver.catch_up_reads(now);
        flow.receiver.on_timestamp(now, pkt.tsecr);
        flow.receiver.on_data_timestamp(pkt.seq, pkt.tsval);
        let (action, _, flushed) = flow.receiver.on_segment(now, pkt.seq, pkt.ecn, pkt.cwr, pkt.psh);
        if let Some(ack) = flow.receiver.take_dctcp_ack() {
            Self::put_ack(&mut self.queue, &mut self.ack_jitter, flow, i, now, ack);
        }
        if let Some(ack) = flushed {
            Self::put_ack(&mut self.queue, &mut self.ack_jitter, flow, i, now, ack);
        }
        if flow.completion.is_none() && flow.sender.total_segments().is_some_and(|t| flow.receiver.rcv_nxt() >= t) {
            flow.completion = Some(now);
        }
        match action {
            AckAction::SendNow => self.send_ack(i),
            AckAction::Delay(at) => {
                if !flow.delayed_ack.is_armed() {
                    flow.delayed_ack.arm(at, &mut self.queue, Event::Timer(i, TimerKind::DelayedAck));
                }
            }
            AckAction::Compress(at) => {
                if !flow.compressed_ack.is_armed() {
                    flow.compressed_ack.arm(at, &mut self.queue, Event::Timer(i, TimerKind::CompressedAck));
                }
            }
        }
        // The read after this arrival will ACK (tcp_cleanup_rbuf): make it an event, not
        // only the bookkeeping the next arrival catches up on.
        let flow = &mut self.flows[i as usize];
        if let Some(at) = flow.receiver.read_due() {
            if flow.receiver.read_will_ack(flow.delayed_ack.is_armed()) {
                flow.read.arm(at, &mut self.queue, Event::Timer(i, TimerKind::Read));
            }
        }
    }

    fn send_ack(&mut self, i: u32) {
        let flow = &mut self.flows[i as usize];
        let ack = flow.receiver.make_ack(self.now);
        Self::put_ack(&mut self.queue, &mut self.ack_jitter, flow, i, self.now, ack);
    }

    fn put_ack(queue: &mut EventQueue, jitter: &mut AckJitter, flow: &mut Flow, i: u32, now: SimTime, ack: AckPacket) {
        flow.delayed_ack.cancel();
        flow.compressed_ack.cancel();
        let arrival = now + flow.ack_prop + jitter.draw();
        if flow.acks.push(arrival, ack) {
            queue.schedule(arrival, Event::PipeHead(PipeId::Ack(i)));
        }
    }
}
