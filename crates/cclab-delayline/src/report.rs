//! The counters the delay line reports on exit, as JSON (written by hand: no dependencies).

use crate::Line;

#[derive(Default)]
pub struct Stats {
    /// Release time minus due time of every released packet (ns; negative = early).
    pub lateness_ns: Vec<i64>,
    pub verdicts: u64,
    pub verdict_call_max_ns: i64,
    /// Packets without a kernel receive timestamp (arrival taken when read instead).
    pub no_timestamp: u64,
}

/// Per-queue kernel counters from /proc/net/netfilter/nfnetlink_queue
/// (net/netfilter/nfnetlink_queue.c, seq_show): queue number, peer port id, queue total,
/// copy mode, copy range, queue_dropped, user_dropped, id sequence, 1.
pub struct ProcQueue {
    pub queue: u16,
    pub queue_total: u64,
    pub queue_dropped: u64,
    pub user_dropped: u64,
}

pub fn read_proc_queue_counters() -> Vec<ProcQueue> {
    let text = std::fs::read_to_string("/proc/net/netfilter/nfnetlink_queue").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<u64> = l.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            (f.len() >= 7).then(|| ProcQueue {
                queue: f[0] as u16,
                queue_total: f[2],
                queue_dropped: f[5],
                user_dropped: f[6],
            })
        })
        .collect()
}

fn percentile(sorted: &[i64], q: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[idx]
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

pub fn to_json(
    stats: &Stats,
    lines: &[Line],
    proc: &[ProcQueue],
    wake_offset_ns: i64,
    netlink_errors: u64,
    warnings: &[String],
) -> String {
    let mut late = stats.lateness_ns.clone();
    late.sort_unstable();
    let n = late.len();
    let mean = if n > 0 { late.iter().sum::<i64>() as f64 / n as f64 } else { 0.0 };
    let over_1ms = late.iter().filter(|&&x| x > 1_000_000).count();
    let queues: Vec<String> = lines
        .iter()
        .map(|l| {
            let p = proc.iter().find(|p| p.queue == l.queue);
            format!(
                "{{\"queue\":{},\"delay_ns\":{},\"packets\":{},\"max_held\":{},\"still_held_in_kernel\":{},\"queue_dropped\":{},\"user_dropped\":{}}}",
                l.queue,
                l.delay_ns,
                l.packets,
                l.max_held,
                p.map_or(0, |p| p.queue_total),
                p.map_or(0, |p| p.queue_dropped),
                p.map_or(0, |p| p.user_dropped)
            )
        })
        .collect();
    let warnings: Vec<String> = warnings.iter().map(|w| format!("\"{}\"", escape(w))).collect();
    format!(
        "{{\"packets\":{},\"verdicts\":{},\"no_timestamp\":{},\"netlink_errors\":{},\"wake_offset_ns\":{},\
\"verdict_call_max_ns\":{},\"lateness_ns\":{{\"min\":{},\"p50\":{},\"p99\":{},\"max\":{},\"mean\":{:.1}}},\
\"late_over_1ms\":{},\"queues\":[{}],\"setup_warnings\":[{}]}}",
        n,
        stats.verdicts,
        stats.no_timestamp,
        netlink_errors,
        wake_offset_ns,
        stats.verdict_call_max_ns,
        late.first().copied().unwrap_or(0),
        percentile(&late, 0.5),
        percentile(&late, 0.99),
        late.last().copied().unwrap_or(0),
        mean,
        over_1ms,
        queues.join(","),
        warnings.join(",")
    )
}
