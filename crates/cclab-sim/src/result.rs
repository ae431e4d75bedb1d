//! The result of one run, in the schema of docs/ARCHITECTURE.md.

use crate::metrics::{percentile_sorted, rtt_summary_ms, EventSeries, FlowSeries, QueueSeries};
use crate::sim::Simulation;
use cclab_cc::SimTime;
use serde::Serialize;

#[derive(Serialize)]
pub struct FlowResult {
    pub flow_id: u32,
    pub cc: String,
    pub start_s: f64,
    pub end_s: f64,
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
    /// ECN negotiated.
    pub ecn: bool,
    /// CE-marked data segments that reached the receiver.
    pub ce_marks_received: u64,
    pub rto_count: u64,
    pub loss_probes: u64,
    pub rtt_min_ms: Option<f64>,
    pub rtt_mean_ms: Option<f64>,
    pub rtt_p50_ms: Option<f64>,
    pub rtt_p95_ms: Option<f64>,
    pub rtt_max_ms: Option<f64>,
    pub fct_s: Option<f64>,
    pub completed: bool,
    /// Data segments that reached the receiver, duplicates included.
    pub segments_received: u64,
    /// Data segments still on a link or in the queue when the run ended.
    pub segments_in_network: u64,
}

#[derive(Serialize)]
pub struct BottleneckResult {
    pub utilization: f64,
    /// The queue discipline (`bottleneck.aqm.kind`).
    pub aqm: &'static str,
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
    pub queue_limit_bytes: Option<u64>,
    pub queue_limit_packets: Option<u64>,
    pub queue_mean_bytes: f64,
    pub queue_p10_bytes: u64,
    pub queue_p50_bytes: u64,
    pub queue_p95_bytes: u64,
    pub queue_max_bytes: u64,
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
        let mut flows = Vec::with_capacity(sim.flows.len());
        for (i, f) in sim.flows.iter().enumerate() {
            let start_s = f.start.as_nanos() as f64 / 1e9;
            let active_end_s = f.completion.map_or(end_s, |c| c.as_nanos() as f64 / 1e9);
            let active_s = (active_end_s - start_s).max(0.0);
            let bytes_delivered = f.bytes_delivered();
            let [rtt_min, rtt_mean, rtt_p50, rtt_p95, rtt_max] = rtt_summary_ms(&f.sender.stats.rtt_samples_us);
            let cfg = &sim.config.flows[i];
            flows.push(FlowResult {
                flow_id: cfg.flow_id,
                cc: cfg.cc.clone(),
                start_s,
                end_s: active_end_s,
                goodput_mbps: if active_s > 0.0 { bytes_delivered as f64 * 8.0 / active_s / 1e6 } else { 0.0 },
                bytes_delivered,
                bytes_sent: f.sender.stats.bytes_sent,
                data_segments_sent: f.sender.stats.data_segments_sent,
                retrans_segments: f.sender.stats.retrans_segments,
                lost_segments: f.queue_drops + f.random_losses,
                queue_drop_segments: f.queue_drops,
                aqm_drop_segments: f.aqm_drops,
                random_loss_segments: f.random_losses,
                ecn: f.sender.tcp.ecn_ok,
                ce_marks_received: f.receiver.ce_segments,
                rto_count: f.sender.stats.rto_count,
                loss_probes: f.sender.stats.loss_probes,
                rtt_min_ms: rtt_min,
                rtt_mean_ms: rtt_mean,
                rtt_p50_ms: rtt_p50,
                rtt_p95_ms: rtt_p95,
                rtt_max_ms: rtt_max,
                fct_s: f.completion.map(|c| c.as_nanos() as f64 / 1e9 - start_s),
                completed: f.completion.is_some(),
                segments_received: f.receiver.segments_received,
                segments_in_network: sim.segments_in_network(i as u32),
            });
        }
        let mut queue_samples = sim.queue_series.queue_bytes.clone();
        queue_samples.sort_unstable();
        let queue_mean = if queue_samples.is_empty() { 0.0 } else { queue_samples.iter().sum::<u64>() as f64 / queue_samples.len() as f64 };
        let dequeued = sim.bottleneck.dequeued_bytes;
        let b = &sim.bottleneck;
        let bottleneck = BottleneckResult {
            utilization: match sim.bottleneck.offered_bits(SimTime::ZERO, end) {
                offered if end_s > 0.0 && offered > 0.0 => (dequeued as f64 * 8.0 / offered).min(1.0),
                _ => 0.0,
            },
            aqm: sim.config.bottleneck.aqm.name(),
            drops: b.drops(),
            overflow_drops: b.overflow_drops,
            aqm_drops: b.aqm_drops,
            ce_marks: b.ce_marks(),
            drops_per_s: if end_s > 0.0 { b.drops() as f64 / end_s } else { 0.0 },
            ce_marks_per_s: if end_s > 0.0 { b.ce_marks() as f64 / end_s } else { 0.0 },
            sojourn_mean_ms: b.sojourn.mean_ms(),
            sojourn_p50_ms: b.sojourn.percentile_ms(0.50),
            sojourn_p95_ms: b.sojourn.percentile_ms(0.95),
            sojourn_p99_ms: b.sojourn.percentile_ms(0.99),
            random_losses: sim.flows.iter().map(|f| f.random_losses).sum(),
            queue_limit_bytes: sim.config.bottleneck.queue_limit_bytes,
            queue_limit_packets: sim.config.bottleneck.queue_limit_packets,
            queue_mean_bytes: queue_mean,
            queue_p10_bytes: percentile_sorted(&queue_samples, 0.10).unwrap_or(0),
            queue_p50_bytes: percentile_sorted(&queue_samples, 0.50).unwrap_or(0),
            queue_p95_bytes: percentile_sorted(&queue_samples, 0.95).unwrap_or(0),
            queue_max_bytes: sim.bottleneck.max_backlog_bytes,
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
