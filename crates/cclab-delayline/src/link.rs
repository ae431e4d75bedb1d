//! Scheduled link changes for the userspace bottleneck and the delay lines.
//!
//! The engine learns the run's time zero only once traffic starts, after this process is
//! up; it then writes the schedule (`--schedule-file`, absolute CLOCK_REALTIME times) and
//! sends SIGUSR1. Each change is applied by the event loop at its time, which sleeps until
//! the next one as it does for releases, so changes land within the loop's wake-up jitter.

use serde::Deserialize;
use std::collections::VecDeque;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleFile {
    /// The trace's time zero (the run's start), when the bottleneck replays a trace.
    #[serde(default)]
    pub trace_start_ns: Option<i64>,
    #[serde(default)]
    pub changes: Vec<Change>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Change {
    pub at_ns: i64,
    /// The userspace bottleneck's new rate and bucket depth.
    #[serde(default)]
    pub rate_bps: Option<u64>,
    #[serde(default)]
    pub burst_bytes: Option<u64>,
    /// New delays of delay-line queues: (queue, delay_ns).
    #[serde(default)]
    pub delays: Vec<(u16, i64)>,
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
        serde_json::from_str(&text).map_err(|e| format!("schedule {path}: {e}"))
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

/// Mahimahi's format: one integer millisecond per line.
pub fn read_trace_ms(path: &str) -> Result<Vec<u64>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("trace {path}: {e}"))?;
    let times: Vec<u64> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().parse().map_err(|_| format!("trace {path}: bad line {l:?}")))
        .collect::<Result<_, _>>()?;
    if times.is_empty() || times.windows(2).any(|w| w[1] < w[0]) || *times.last().unwrap() == 0 {
        return Err(format!("trace {path}: must be non-empty, in order, and end after 0 ms"));
    }
    Ok(times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_come_due_in_time_order_and_are_recorded_when_applied() {
        let json = r#"{"trace_start_ns": 5, "changes": [
            {"at_ns": 300, "delays": [[1, 20000000]]}, {"at_ns": 100, "rate_bps": 10000000, "burst_bytes": 15140}]}"#;
        let file: ScheduleFile = serde_json::from_str(json).unwrap();
        let mut s = Schedule::default();
        s.set(file.changes);
        assert_eq!(s.next_at_ns(), Some(100));
        assert!(s.take_due(99).is_empty());
        let due = s.take_due(150);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].rate_bps, Some(10_000_000));
        assert_eq!(s.take_due(1000)[0].delays, vec![(1, 20_000_000)]);
        assert_eq!(s.applied, vec![(100, 150), (300, 1000)]);
        assert_eq!(s.next_at_ns(), None);
    }
}
