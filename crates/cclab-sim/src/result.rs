//! The result of one run, in the schema of docs/ARCHITECTURE.md.

use crate::network::DualQueueCounters;
use crate::metrics::{percentile_sorted, rtt_summary_ms, EventSeries, FlowSeries, QueueSeries};
use crate::sim::Simulation;
use crate::window::{Snapshot, WholeRun};
use cclab_cc::SimTime;
use serde::Serialize;

/// A flow's metrics over one window of the run (the measured one, or the whole run).
#[derive(Clone, Serialize)]
pub struct FlowMetrics {
    pub goodput_mbps: f64,
    pub bytes_delivered: u64,
    pub bytes_sent: u64,
    pub data_segments_sent: u64,
    pub retrans_segments: u64,
    pub lost_segments: u64,
    /// Every bottleneck drop of this flow's packets: overflow and AQM.
    pub queue_drop_segments: u64,
    /// Of those, the AQM's drops.
    pub aqm_drop_segments: u64,
    pub random_loss_segments: u64,
    /// CE-marked data segments that reached the receiver.
    pub ce_marks_received: u64,
    pub rto_count: u64,
    pub loss_probes: u64,
    pub rtt_min_ms: Option<f64>,
    pub rtt_mean_ms: Option<f64>,
    pub rtt_p50_ms: Option<f64>,
    pub rtt_p95_ms: Option<f64>,
    pub rtt_max_ms: Option<f64>,
    /// Data segments that reached the receiver, duplicates included.
    pub segments_received: u64,
    /// Time new data waited for the receiver's window (`tcpi_rwnd_limited`).
    pub rwnd_limited_ms: f64,
    /// Time the sender ran out of data because its socket buffer was full
    /// (`tcpi_sndbuf_limited`).
    pub sndbuf_limited_ms: f64,
}

/// Metrics over [warmup, end] under their own names, the whole run's as `whole_run_<name>`.
#[derive(Serialize)]
pub struct FlowResult {
    pub flow_id: u32,
    pub cc: String,
    pub start_s: f64,
    pub end_s: f64,
    #[serde(flatten)]
    pub window: FlowMetrics,
    /// ECN negotiated.
    pub ecn: bool,
    pub fct_s: Option<f64>,
    pub completed: bool,
    /// Data segments still on a link or in the queue when the run ended.
    pub segments_in_network: u64,
    #[serde(flatten)]
    pub whole_run: WholeRun<FlowMetrics>,
}

// The windowed metrics read as the flow's own fields (`result.flows[0].goodput_mbps`).
impl std::ops::Deref for FlowResult {
    type Target = FlowMetrics;
    fn deref(&self) -> &FlowMetrics {
        &self.window
    }
}

/// The bottleneck's metrics over one window of the run.
#[derive(Clone, Serialize)]
pub struct BottleneckMetrics {
    pub utilization: f64,
    /// Every packet the bottleneck discarded: overflow_drops + aqm_drops.
    pub drops: u64,
    /// Tail drops at the buffer and drops at the qdisc's own limit.
    pub overflow_drops: u64,
    /// Drops the AQM chose (CoDel's control law, ...).
    pub aqm_drops: u64,
    /// Packets the AQM marked CE instead of dropping.
    pub ce_marks: u64,
    pub drops_per_s: f64,
    pub ce_marks_per_s: f64,
    /// Sojourn (dequeue - enqueue) per dequeued packet; percentiles at 10 us
    /// resolution below 1 s, 1 ms above.
    pub sojourn_mean_ms: Option<f64>,
    pub sojourn_p50_ms: Option<f64>,
    pub sojourn_p95_ms: Option<f64>,
    pub sojourn_p99_ms: Option<f64>,
    pub random_losses: u64,
    pub queue_mean_bytes: f64,
    pub queue_p10_bytes: u64,
    pub queue_p50_bytes: u64,
    pub queue_p95_bytes: u64,
    pub queue_max_bytes: u64,
    #[serde(flatten)]
    pub dual_queue: DualQueueMetrics,
}

/// Each queue of a dual-queue AQM (DualPI2) on its own; every field `None` for a single queue.
#[derive(Clone, Default, Serialize)]
pub struct DualQueueMetrics {
    pub l4s_sojourn_mean_ms: Option<f64>,
    pub l4s_sojourn_p50_ms: Option<f64>,
    pub l4s_sojourn_p99_ms: Option<f64>,
    pub classic_sojourn_mean_ms: Option<f64>,
    pub classic_sojourn_p50_ms: Option<f64>,
    pub classic_sojourn_p99_ms: Option<f64>,
    /// Packets each queue sent.
    pub l4s_packets: Option<u64>,
    pub classic_packets: Option<u64>,
    /// CE marks each queue set.
    pub l4s_ce_marks: Option<u64>,
    pub classic_ce_marks: Option<u64>,
}

impl DualQueueMetrics {
    fn since(now: &DualQueueCounters, earlier: Option<&DualQueueCounters>) -> Self {
        let zero = DualQueueCounters::default();
        let c = earlier.unwrap_or(&zero);
        let (l4s, classic) = (now.l4s_sojourn.since(&c.l4s_sojourn), now.classic_sojourn.since(&c.classic_sojourn));
        DualQueueMetrics {
            l4s_sojourn_mean_ms: l4s.mean_ms(),
            l4s_sojourn_p50_ms: l4s.percentile_ms(0.50),
            l4s_sojourn_p99_ms: l4s.percentile_ms(0.99),
            classic_sojourn_mean_ms: classic.mean_ms(),
            classic_sojourn_p50_ms: classic.percentile_ms(0.50),
            classic_sojourn_p99_ms: classic.percentile_ms(0.99),
            l4s_packets: Some(l4s.count()),
            classic_packets: Some(classic.count()),
            l4s_ce_marks: Some(now.l4s_ce_marks - c.l4s_ce_marks),
            classic_ce_marks: Some(now.classic_ce_marks - c.classic_ce_marks),
        }
    }
}

#[derive(Serialize)]
pub struct BottleneckResult {
    /// The queue discipline (`bottleneck.aqm.kind`).
    pub aqm: &'static str,
    pub queue_limit_bytes: Option<u64>,
    pub queue_limit_packets: Option<u64>,
    #[serde(flatten)]
    pub window: BottleneckMetrics,
    #[serde(flatten)]
    pub whole_run: WholeRun<BottleneckMetrics>,
}

impl std::ops::Deref for BottleneckResult {
    type Target = BottleneckMetrics;
    fn deref(&self) -> &BottleneckMetrics {
        &self.window
    }
}

#[derive(Serialize)]
pub struct Stats {
    pub events_processed: u64,
    pub data_packets: u64,
    pub sim_wall_s: f64,
    pub simulated_s: f64,
}

#[derive(Serialize)]
pub struct SimResult {
    pub flows: Vec<FlowResult>,
    pub bottleneck: BottleneckResult,
    pub flow_series: FlowSeries,
    pub queue_series: QueueSeries,
    pub events: EventSeries,
    pub stats: Stats,
}

impl SimResult {
    pub fn from_simulation(mut sim: Simulation, wall_s: f64) -> SimResult {
        let end = sim.end_time();
        let end_s = end.as_nanos() as f64 / 1e9;
        let zero = Snapshot::zero(sim.flows.len());
        // Without a warm-up the window is the whole run, computed by the same code from
        // the same zero snapshot: bit-identical to it.
        let from = match &sim.warmup {
            Some(snapshot) => snapshot.clone(),
            None if sim.config.warmup_ns == 0 => zero.clone(),
            // Every flow finished before the warm-up ended: the window is empty.
            None => sim.snapshot(),
        };
        let mut flows = Vec::with_capacity(sim.flows.len());
        for (i, f) in sim.flows.iter().enumerate() {
            let start_s = f.start.as_nanos() as f64 / 1e9;
            let active_end_s = f.completion.map_or(end_s, |c| c.as_nanos() as f64 / 1e9);
            let cfg = &sim.config.flows[i];
            flows.push(FlowResult {
                flow_id: cfg.flow_id,
                cc: cfg.cc.clone(),
                start_s,
                end_s: active_end_s,
                window: flow_metrics(&sim, i, &from, start_s, active_end_s),
                ecn: f.sender.tcp.ecn_ok,
                fct_s: f.completion.map(|c| c.as_nanos() as f64 / 1e9 - start_s),
                completed: f.completion.is_some(),
                segments_in_network: sim.segments_in_network(i as u32),
                whole_run: WholeRun(flow_metrics(&sim, i, &zero, start_s, active_end_s)),
            });
        }
        let bottleneck = BottleneckResult {
            aqm: sim.config.bottleneck.aqm.name(),
            queue_limit_bytes: sim.config.bottleneck.queue_limit_bytes,
            queue_limit_packets: sim.config.bottleneck.queue_limit_packets,
            window: bottleneck_metrics(&sim, &from, end, sim.bottleneck.window_max_backlog_bytes),
            whole_run: WholeRun(bottleneck_metrics(&sim, &zero, end, sim.bottleneck.max_backlog_bytes)),
        };
        let events = sim.event_series();
        let stats = Stats {
            events_processed: sim.events_processed(),
            data_packets: sim.data_packets,
            sim_wall_s: wall_s,
            simulated_s: end_s,
        };
        SimResult {
            flows,
            bottleneck,
            flow_series: std::mem::take(&mut sim.flow_series),
            queue_series: std::mem::take(&mut sim.queue_series),
            events,
            stats,
        }
    }
}

/// Flow `i`'s metrics since `from`; goodput over the part of its active interval
/// [start_s, end_s] after `from`.
fn flow_metrics(sim: &Simulation, i: usize, from: &Snapshot, start_s: f64, end_s: f64) -> FlowMetrics {
    let f = &sim.flows[i];
    let c = &from.flows[i];
    let s = &f.sender.stats;
    let active_s = (end_s - start_s.max(from.time_s)).max(0.0);
    let bytes_delivered = f.bytes_delivered() - c.bytes_delivered;
    let queue_drops = f.queue_drops - c.queue_drops;
    let random_losses = f.random_losses - c.random_losses;
    let [rtt_min, rtt_mean, rtt_p50, rtt_p95, rtt_max] = rtt_summary_ms(&s.rtt_samples_us[c.rtt_samples..]);
    FlowMetrics {
        goodput_mbps: if active_s > 0.0 { bytes_delivered as f64 * 8.0 / active_s / 1e6 } else { 0.0 },
        bytes_delivered,
        bytes_sent: s.bytes_sent - c.bytes_sent,
        data_segments_sent: s.data_segments_sent - c.data_segments_sent,
        retrans_segments: s.retrans_segments - c.retrans_segments,
        lost_segments: queue_drops + random_losses,
        queue_drop_segments: queue_drops,
        aqm_drop_segments: f.aqm_drops - c.aqm_drops,
        random_loss_segments: random_losses,
        ce_marks_received: f.receiver.ce_segments - c.ce_segments,
        rto_count: s.rto_count - c.rto_count,
        loss_probes: s.loss_probes - c.loss_probes,
        rtt_min_ms: rtt_min,
        rtt_mean_ms: rtt_mean,
        rtt_p50_ms: rtt_p50,
        rtt_p95_ms: rtt_p95,
        rtt_max_ms: rtt_max,
        segments_received: f.receiver.segments_received - c.segments_received,
        rwnd_limited_ms: (f.sender.rwnd_limited_ns_at(sim.now) - c.rwnd_limited_ns) as f64 / 1e6,
        sndbuf_limited_ms: (f.sender.sndbuf_limited_ns_at(sim.now) - c.sndbuf_limited_ns) as f64 / 1e6,
    }
}

/// The bottleneck's metrics since `from`, up to `end_s`; queue statistics from the
/// samples taken after `from` (a sample covers the interval that ends at its time).
fn bottleneck_metrics(sim: &Simulation, from: &Snapshot, end: SimTime, queue_max_bytes: u64) -> BottleneckMetrics {
    let b = &sim.bottleneck;
    let c = &from.bottleneck;
    let end_s = end.as_nanos() as f64 / 1e9;
    let span_s = end_s - from.time_s;
    let qs = &sim.queue_series;
    let mut queue_samples: Vec<u64> =
        qs.time_s.iter().zip(&qs.queue_bytes).filter(|(&t, _)| t > from.time_s).map(|(_, &q)| q).collect();
    queue_samples.sort_unstable();
    let queue_mean = if queue_samples.is_empty() { 0.0 } else { queue_samples.iter().sum::<u64>() as f64 / queue_samples.len() as f64 };
    let dequeued = b.dequeued_bytes - c.dequeued_bytes;
    let overflow_drops = b.overflow_drops - c.overflow_drops;
    let aqm_drops = b.aqm_drops - c.aqm_drops;
    let drops = overflow_drops + aqm_drops;
    let ce_marks = b.ce_marks() - c.ce_marks;
    let sojourn = b.sojourn.since(&c.sojourn);
    let random_losses = sim.flows.iter().zip(&from.flows).map(|(f, c)| f.random_losses - c.random_losses).sum();
    BottleneckMetrics {
        // What left over what the link offered in the window (its rate may change, or follow a trace).
        utilization: match b.offered_bits(from.time, end) {
            offered if span_s > 0.0 && offered > 0.0 => (dequeued as f64 * 8.0 / offered).min(1.0),
            _ => 0.0,
        },
        drops,
        overflow_drops,
        aqm_drops,
        ce_marks,
        drops_per_s: if span_s > 0.0 { drops as f64 / span_s } else { 0.0 },
        ce_marks_per_s: if span_s > 0.0 { ce_marks as f64 / span_s } else { 0.0 },
        sojourn_mean_ms: sojourn.mean_ms(),
        sojourn_p50_ms: sojourn.percentile_ms(0.50),
        sojourn_p95_ms: sojourn.percentile_ms(0.95),
        sojourn_p99_ms: sojourn.percentile_ms(0.99),
        random_losses,
        queue_mean_bytes: queue_mean,
        queue_p10_bytes: percentile_sorted(&queue_samples, 0.10).unwrap_or(0),
        queue_p50_bytes: percentile_sorted(&queue_samples, 0.50).unwrap_or(0),
        queue_p95_bytes: percentile_sorted(&queue_samples, 0.95).unwrap_or(0),
        queue_max_bytes,
        dual_queue: b.dual_queue.as_ref().map(|dq| DualQueueMetrics::since(dq, c.dual_queue.as_ref())).unwrap_or_default(),
    }
}
