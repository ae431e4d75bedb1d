//! Scheduled link changes for the userspace bottleneck and the delay lines.
//!
//! The engine learns the run's time zero only once traffic starts, after this process is
//! up; it then writes the schedule (`--schedule-file`, absolute CLOCK_REALTIME times, and a
//! trace for the bottleneck to replay from then on) and sends SIGUSR1. Each change is applied by the event loop at its time, which sleeps until
//! the next one as it does for releases, so changes land within the loop's wake-up jitter.

use cclab_aqm::delivery_trace::DeliveryTrace;
use serde::Deserialize;
use std::collections::VecDeque;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFile {
    /// A delivery trace for the bottleneck to replay, from its time zero (the run's start).
    #[serde(default)]
    pub trace: Option<Trace>,
    #[serde(default)]
    pub changes: Vec<Change>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    pub start_ns: i64,
    pub times_ms: Vec<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub at_ns: i64,
    /// The userspace bottleneck's new rate and bucket depth.
    #[serde(default)]
    pub rate: Option<RateChange>,
    /// New delays of delay-line queues: (queue, delay_ns).
    #[serde(default)]
    pub delays: Vec<(u16, i64)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateChange {
    pub rate_bps: u64,
    pub burst_bytes: u64,
}

#[derive(Default)]
pub struct Schedule {
    pending: VecDeque<Change>,
    /// (scheduled, applied) CLOCK_REALTIME ns of every change applied.
    pub applied: Vec<(i64, i64)>,
}

impl Schedule {
    pub fn read(path: &str) -> Result<ScheduleFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("schedule {path}: {e}"))?;
        let file: ScheduleFile = serde_json::from_str(&text).map_err(|e| format!("schedule {path}: {e}"))?;
        if let Some(trace) = &file.trace {
            DeliveryTrace::check(&trace.times_ms).map_err(|e| format!("schedule {path}: {e}"))?;
        }
        Ok(file)
    }

    pub fn set(&mut self, mut changes: Vec<Change>) {
        changes.sort_by_key(|c| c.at_ns);
        self.pending = changes.into();
    }

    pub fn next_at_ns(&self) -> Option<i64> {
        self.pending.front().map(|c| c.at_ns)
    }

    /// The changes due at `now_ns`, in time order; each is recorded as applied now.
    pub fn take_due(&mut self, now_ns: i64) -> Vec<Change> {
        let mut due = Vec::new();
        while self.pending.front().is_some_and(|c| c.at_ns <= now_ns) {
            let change = self.pending.pop_front().unwrap();
            self.applied.push((change.at_ns, now_ns));
            due.push(change);
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_come_due_in_time_order_and_are_recorded_when_applied() {
        let json = r#"{"trace": {"start_ns": 5, "times_ms": [1, 2]}, "changes": [
            {"at_ns": 300, "delays": [[1, 20000000]]}, {"at_ns": 100, "rate": {"rate_bps": 10000000, "burst_bytes": 15140}}]}"#;
        let file: ScheduleFile = serde_json::from_str(json).unwrap();
        assert_eq!(file.trace.as_ref().map(|t| t.times_ms.len()), Some(2));
        let mut s = Schedule::default();
        s.set(file.changes);
        assert_eq!(s.next_at_ns(), Some(100));
        assert!(s.take_due(99).is_empty());
        let due = s.take_due(150);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].rate.as_ref().map(|r| (r.rate_bps, r.burst_bytes)), Some((10_000_000, 15_140)));
        assert_eq!(s.take_due(1000)[0].delays, vec![(1, 20_000_000)]);
        assert_eq!(s.applied, vec![(100, 150), (300, 1000)]);
        assert_eq!(s.next_at_ns(), None);
    }
}
