//! What a simulation records as it runs (`FlowSample` and `QueueSample` events) and the
//! series it hands back.

use super::*;

impl Simulation {
    pub(super) fn sample_flows(&mut self) {
        let now = self.now;
        let interval_s = self.config.flow_sample_interval_ns as f64 / 1e9;
        for flow in &mut self.flows {
            if !flow.started || flow.completion.is_some_and(|c| c + SimDuration(self.config.flow_sample_interval_ns) < now) {
                continue;
            }
            let delivered = flow.bytes_delivered();
            let retrans = flow.sender.stats.retrans_segments;
            let s = &flow.sender;
            let telemetry = s.cc().telemetry(&s.tcp);
            let fs = &mut self.flow_series;
            fs.time_s.push(now.as_nanos() as f64 / 1e9);
            fs.flow_id.push(s.flow_id);
            fs.throughput_mbps.push((delivered - flow.sampled_delivered_bytes) as f64 * 8.0 / interval_s / 1e6);
            fs.cwnd_pkts.push(s.tcp.snd_cwnd);
            // sk_pacing_rate, as tcpi_pacing_rate reports it: the CC's for BBR, tcp_update_pacing_rate's
            // for CUBIC and Reno; none before the first one is set.
            fs.pacing_rate_mbps.push(
                (s.tcp.pacing_rate_bytes_per_sec != u64::MAX).then(|| s.tcp.pacing_rate_bytes_per_sec as f64 * 8.0 / 1e6),
            );
            fs.srtt_ms.push(s.srtt().as_nanos() as f64 / 1e6);
            fs.inflight_pkts.push(s.in_flight());
            fs.bbr_bw_mbps.push(telemetry.bw_estimate_bps.map(|b| b as f64 / 1e6));
            fs.bbr_min_rtt_ms.push(telemetry.min_rtt.map(|d| d.as_nanos() as f64 / 1e6));
            fs.cc_mode.push(telemetry.mode);
            fs.ecn_alpha.push(telemetry.ecn_alpha);
            fs.retrans_segments.push(retrans - flow.sampled_retrans);
            flow.sampled_delivered_bytes = delivered;
            flow.sampled_retrans = retrans;
        }
    }

    pub(super) fn sample_queue(&mut self) {
        let now = self.now;
        let backlog = self.bottleneck.backlog_bytes(now);
        self.drain_bottleneck();
        let elapsed_s = now.saturating_since(self.last_queue_sample).as_secs_f64();
        if elapsed_s <= 0.0 {
            return;
        }
        let dequeued = self.bottleneck.dequeued_bytes - self.sampled_dequeued_bytes;
        let qs = &mut self.queue_series;
        qs.time_s.push(now.as_nanos() as f64 / 1e9);
        qs.queue_bytes.push(backlog);
        qs.l4s_queue_bytes.push(self.bottleneck.l4s_backlog_bytes());
        qs.drops.push(self.bottleneck.drops() - self.sampled_drops);
        qs.ce_marks.push(self.bottleneck.ce_marks() - self.sampled_ce_marks);
        let offered_bits = self.bottleneck.offered_bits(self.last_queue_sample, now);
        qs.utilization.push(if offered_bits > 0.0 { dequeued as f64 * 8.0 / offered_bits } else { 0.0 });
        self.sampled_drops = self.bottleneck.drops();
        self.sampled_ce_marks = self.bottleneck.ce_marks();
        self.sampled_dequeued_bytes = self.bottleneck.dequeued_bytes;
        self.last_queue_sample = now;
    }

    /// Segments of `flow` still in the network (access link, queue, egress link).
    pub fn segments_in_network(&self, flow_idx: u32) -> u64 {
        let flow = &self.flows[flow_idx as usize];
        // A dequeued packet enters the egress pipe at once (its departure is known).
        (flow.access.len() + self.egress.iter().filter(|p| p.flow == flow_idx).count()) as u64 + flow.in_bottleneck
    }

    pub fn event_series(&self) -> EventSeries {
        let mut ev = EventSeries::default();
        let mut all: Vec<(SimTime, u32, &'static str, &str)> = Vec::new();
        for f in &self.flows {
            for e in &f.sender.events {
                all.push((e.time, f.sender.flow_id, e.kind, &e.detail));
            }
        }
        all.sort_by_key(|(t, id, _, _)| (*t, *id));
        for (t, id, kind, detail) in all {
            ev.time_s.push(t.as_nanos() as f64 / 1e9);
            ev.flow_id.push(id);
            ev.kind.push(kind);
            ev.detail.push(detail.to_string());
        }
        ev
    }
}
