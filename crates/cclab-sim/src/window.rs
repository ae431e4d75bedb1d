//! The measurement window [warmup, end]: the counters as they stood when the warm-up
//! ended, so every metric can be computed over the window as a difference, and the
//! `whole_run_` copy of the metrics that the result keeps beside the windowed ones.
//!
//! Taking the snapshot only reads the simulation (it moves no packet and schedules
//! nothing), so a run's whole-run numbers do not depend on its warm-up.

use crate::network::{DualQueueCounters, SojournHistogram};
use cclab_cc::SimTime;
use serde::ser::{Error, SerializeMap};
use serde::{Serialize, Serializer};

/// One flow's cumulative counters.
#[derive(Clone, Debug, Default)]
pub struct FlowCounters {
    pub bytes_delivered: u64,
    pub bytes_sent: u64,
    pub data_segments_sent: u64,
    pub retrans_segments: u64,
    pub queue_drops: u64,
    pub aqm_drops: u64,
    pub random_losses: u64,
    pub ce_segments: u64,
    pub rto_count: u64,
    pub loss_probes: u64,
    pub segments_received: u64,
    pub rwnd_limited_ns: u64,
    pub sndbuf_limited_ns: u64,
    /// RTT samples taken so far (the window's are the ones after this index).
    pub rtt_samples: usize,
}

/// The bottleneck's cumulative counters.
#[derive(Clone, Debug, Default)]
pub struct BottleneckCounters {
    pub dequeued_bytes: u64,
    pub overflow_drops: u64,
    pub aqm_drops: u64,
    pub ce_marks: u64,
    pub sojourn: SojournHistogram,
    /// DualPI2's per-queue counters; `None` at the run's start and for a single queue.
    pub dual_queue: Option<DualQueueCounters>,
}

/// The counters at the start of the window: all zero for a window that starts at 0.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub time: SimTime,
    pub time_s: f64,
    pub flows: Vec<FlowCounters>,
    pub bottleneck: BottleneckCounters,
}

impl Snapshot {
    /// The start of the run: every counter zero.
    pub fn zero(n_flows: usize) -> Self {
        Snapshot { time: SimTime::ZERO, time_s: 0.0, flows: vec![FlowCounters::default(); n_flows], bottleneck: BottleneckCounters::default() }
    }

}

/// Serialises `T`'s fields with a `whole_run_` prefix, flattened into the parent: the
/// result's flat tables keep one column per metric and per scope.
pub struct WholeRun<T>(pub T);

pub const WHOLE_RUN_PREFIX: &str = "whole_run_";

impl<T: Serialize> Serialize for WholeRun<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value = serde_json::to_value(&self.0).map_err(S::Error::custom)?;
        let serde_json::Value::Object(fields) = value else {
            return Err(S::Error::custom("whole_run: not a struct"));
        };
        let mut map = serializer.serialize_map(Some(fields.len()))?;
        for (name, value) in fields {
            map.serialize_entry(&format!("{WHOLE_RUN_PREFIX}{name}"), &value)?;
        }
        map.end()
    }
}
