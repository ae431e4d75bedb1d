//! Time series and summary statistics, in the column names both engines share.

use serde::Serialize;

/// Per-flow samples at the flow sample interval, long form (a row per flow per sample).
#[derive(Default, Serialize)]
pub struct FlowSeries {
    pub time_s: Vec<f64>,
    pub flow_id: Vec<u32>,
    pub throughput_mbps: Vec<f64>,
    pub cwnd_pkts: Vec<u32>,
    pub pacing_rate_mbps: Vec<Option<f64>>,
    pub srtt_ms: Vec<f64>,
    pub inflight_pkts: Vec<u32>,
    pub bbr_bw_mbps: Vec<Option<f64>>,
    pub bbr_min_rtt_ms: Vec<Option<f64>>,
    pub cc_mode: Vec<&'static str>,
    pub retrans_segments: Vec<u64>,
    /// The CC's estimate of the ECN-marked fraction (DCTCP's alpha); none for other CCs.
    pub ecn_alpha: Vec<Option<f64>>,
}

/// Bottleneck samples at the queue sample interval.
#[derive(Default, Serialize)]
pub struct QueueSeries {
    pub time_s: Vec<f64>,
    pub queue_bytes: Vec<u64>,
    pub drops: Vec<u64>,
    /// Packets the AQM set to CE in the interval.
    pub ce_marks: Vec<u64>,
    pub utilization: Vec<f64>,
    /// The L4S queue's share of `queue_bytes` under a dual-queue AQM; none for a single queue.
    pub l4s_queue_bytes: Vec<Option<u64>>,
}

#[derive(Default, Serialize)]
pub struct EventSeries {
    pub time_s: Vec<f64>,
    pub flow_id: Vec<u32>,
    pub kind: Vec<&'static str>,
    pub detail: Vec<String>,
}

/// Nearest-rank percentile of sorted values (`q` in [0, 1]).
pub fn percentile_sorted<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// min, mean, p50, p95, max of RTT samples in microseconds, reported in ms.
pub fn rtt_summary_ms(samples_us: &[u32]) -> [Option<f64>; 5] {
    if samples_us.is_empty() {
        return [None; 5];
    }
    let mut sorted = samples_us.to_vec();
    sorted.sort_unstable();
    let ms = |us: u32| us as f64 / 1000.0;
    let mean = sorted.iter().map(|&v| v as f64).sum::<f64>() / sorted.len() as f64 / 1000.0;
    [
        Some(ms(sorted[0])),
        Some(mean),
        percentile_sorted(&sorted, 0.5).map(ms),
        percentile_sorted(&sorted, 0.95).map(ms),
        Some(ms(*sorted.last().unwrap())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_of_one_to_hundred() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile_sorted(&v, 0.5), Some(50));
        assert_eq!(percentile_sorted(&v, 0.95), Some(95));
        assert_eq!(percentile_sorted(&v, 0.0), Some(1));
        assert_eq!(percentile_sorted(&v, 1.0), Some(100));
        assert_eq!(percentile_sorted::<u32>(&[], 0.5), None);
    }

    #[test]
    fn rtt_summary_reports_milliseconds() {
        let [min, mean, p50, _, max] = rtt_summary_ms(&[1000, 2000, 3000]);
        assert_eq!((min, mean, p50, max), (Some(1.0), Some(2.0), Some(2.0), Some(3.0)));
    }
}
