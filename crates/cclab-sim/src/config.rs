//! The resolved scenario the simulator consumes (see docs/ARCHITECTURE.md).
//! Python validates the user's spec and resolves every unit into these integers.

use cclab_cc::native::{NativeCcConfig, NativeLibrary};
use cclab_cc::{bbr::BbrConfig, bbr3::Bbr3Config, cubic::CubicConfig, CcConfig};
use cclab_aqm::AqmConfig;
use serde::Deserialize;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    pub seed: u64,
    pub duration_ns: u64,
    pub bottleneck: BottleneckConfig,
    pub flows: Vec<FlowConfig>,
    #[serde(default = "default_flow_sample_interval_ns")]
    pub flow_sample_interval_ns: u64,
    #[serde(default = "default_queue_sample_interval_ns")]
    pub queue_sample_interval_ns: u64,
    /// Metrics cover [warmup_ns, end]; the whole run is reported beside them.
    #[serde(default)]
    pub warmup_ns: u64,
    /// Mean lateness of each ACK (seeded exponential noise, see `jitter.rs`); 0: none.
    #[serde(default)]
    pub jitter_ns: u64,
    /// Share of the departures that waited whose dequeue stalls (seeded, see `stall.rs`); 0: none.
    #[serde(default)]
    pub stall_per_packet: f64,
    /// Which of the host's other timing mechanisms run (the spec's `[noise]`); each, unset,
    /// runs when the ACK jitter does.
    #[serde(default)]
    pub noise: NoiseConfig,
    /// The receiver advertises Linux's autotuned window (tcp/receive_window.rs);
    /// false: it never limits its sender (models up to 8). A flow with a fixed
    /// `rwnd_bytes` keeps that instead.
    #[serde(default = "default_true")]
    pub receive_window_autotuning: bool,
    /// The hosts' settings (the spec's `[host]`); absent: the kernel engine's namespaces' own.
    #[serde(default)]
    pub host: HostConfig,
}

/// The kernel engine's host timing the simulator models beside the ACK jitter (`jitter_ns`)
/// and the dequeue stalls (`stall_per_packet`), one switch each; `None`: on exactly when the
/// ACK jitter is (how they ran before they were named).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseConfig {
    /// The timestamp option's millisecond clock ticks at a seeded phase (tcp/rtt.rs `TsClock`).
    #[serde(default)]
    pub ts_clock_phase: Option<bool>,
    /// The receiving application wakes after a seeded delay when data follows 5 ms without
    /// data (tcp/receiver.rs `idle_reader_wake`).
    #[serde(default)]
    pub idle_reader_wake: Option<bool>,
    /// An ACK reaching its sender after 5 ms without a packet waits for the machine to wake
    /// (wake.rs).
    #[serde(default)]
    pub idle_machine_wake: Option<bool>,
}

/// Which of [`NoiseConfig`]'s mechanisms a run has, resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Noise {
    pub ts_clock_phase: bool,
    pub idle_reader_wake: bool,
    pub idle_machine_wake: bool,
}

impl NoiseConfig {
    pub fn resolve(&self, jitter_ns: u64) -> Noise {
        let with_jitter = jitter_ns > 0;
        Noise {
            ts_clock_phase: self.ts_clock_phase.unwrap_or(with_jitter),
            idle_reader_wake: self.idle_reader_wake.unwrap_or(with_jitter),
            idle_machine_wake: self.idle_machine_wake.unwrap_or(with_jitter),
        }
    }
}

/// Settings of the sending and receiving hosts.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// `net.ipv4.tcp_rmem[2]`: the most receive-buffer autotuning grows a socket's buffer to.
    #[serde(default = "default_tcp_rmem_max_bytes")]
    pub tcp_rmem_max_bytes: u64,
    /// `net.ipv4.tcp_wmem[2]`: the most send-buffer autotuning grows a socket's buffer to.
    #[serde(default = "default_tcp_wmem_max_bytes")]
    pub tcp_wmem_max_bytes: u64,
    /// The senders' NIC and access link; `None`: 10x the bottleneck's top rate, at least
    /// 10 Gbit/s (sim.rs `MIN_ACCESS_RATE`).
    #[serde(default)]
    pub access_rate_bps: Option<u64>,
    /// `net.ipv4.tcp_recovery`: RACK-TLP (1, Linux's default) or the classic scoreboard (0).
    #[serde(default)]
    pub loss_recovery: LossRecovery,
    /// The senders' egress qdisc.
    #[serde(default)]
    pub sender_qdisc: SenderQdisc,
    /// Every device's MTU (IP packet bytes), on both paths.
    #[serde(default = "default_mtu_bytes")]
    pub mtu_bytes: u32,
}

impl HostConfig {
    /// Payload of a full segment (`tcp_mss_to_mtu` inverted, with timestamps).
    pub fn mss_bytes(&self) -> u32 {
        self.mtu_bytes - crate::TCP_IP_HEADER_BYTES
    }

    /// A full segment's frame as tc tbf counts it, and the device's `psched_mtu`.
    pub fn frame_bytes(&self) -> u32 {
        self.mss_bytes() + crate::FRAME_OVERHEAD_BYTES
    }
}

/// The senders' egress qdisc. With fq, TCP stamps every skb with its departure time at the
/// socket's pacing rate (`tcp_update_skb_after_send` for any `sk_pacing_status`) and fq holds
/// it until then, so every CC is paced, CUBIC and Reno at `tcp_update_pacing_rate`'s rate. A
/// FIFO (pfifo_fast, or none: a veth's noqueue) changes nothing here: the access link is faster
/// than TCP sends, and TCP Small Queues keeps a socket's share of any NIC queue near 1 ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SenderQdisc {
    #[default]
    None,
    Fq,
    PfifoFast,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossRecovery {
    #[default]
    Rack,
    Classic,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig { tcp_rmem_max_bytes: default_tcp_rmem_max_bytes(), tcp_wmem_max_bytes: default_tcp_wmem_max_bytes(), access_rate_bps: None, loss_recovery: LossRecovery::Rack, sender_qdisc: SenderQdisc::None, mtu_bytes: crate::DEFAULT_MTU_BYTES }
    }
}

fn default_mtu_bytes() -> u32 {
    crate::DEFAULT_MTU_BYTES
}

fn default_tcp_rmem_max_bytes() -> u64 {
    crate::tcp::receive_window::TCP_RMEM_MAX_BYTES
}

fn default_tcp_wmem_max_bytes() -> u64 {
    crate::tcp::send_buffer::TCP_WMEM_MAX_BYTES
}

fn default_true() -> bool {
    true
}

fn default_flow_sample_interval_ns() -> u64 {
    100_000_000
}
fn default_queue_sample_interval_ns() -> u64 {
    1_000_000
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BottleneckConfig {
    /// Line rate as tc tbf counts it (on 1514-byte frames).
    pub rate_bps: u64,
    /// Base round-trip propagation delay.
    pub rtt_ns: u64,
    pub queue_limit_bytes: Option<u64>,
    pub queue_limit_packets: Option<u64>,
    /// Bernoulli loss on the data path before the queue.
    #[serde(default)]
    pub loss_probability: f64,
    /// The queue discipline the shaper pulls from (default: tail-drop FIFO).
    #[serde(default)]
    pub aqm: AqmConfig,
    /// Changes of the link during the run, in time order.
    #[serde(default)]
    pub schedule: Vec<LinkChangeConfig>,
    /// A Mahimahi delivery trace: each entry a millisecond at which the link may carry
    /// one 1500-byte packet, repeating with the last entry as its period. Replaces the
    /// token bucket; `rate_bps` is then the trace's mean rate.
    #[serde(default)]
    pub trace_ms: Option<Vec<u64>>,
}

/// `[[bottleneck.schedule]]`: at `at_ns`, the fields given take their new values.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkChangeConfig {
    pub at_ns: u64,
    #[serde(default)]
    pub rate_bps: Option<u64>,
    #[serde(default)]
    pub rtt_ns: Option<u64>,
    #[serde(default)]
    pub loss_probability: Option<f64>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub flow_id: u32,
    pub cc: String,
    #[serde(default)]
    pub probe_bw_gain: Option<f64>,
    #[serde(default)]
    pub start_ns: u64,
    #[serde(default)]
    pub size_bytes: Option<u64>,
    #[serde(default)]
    pub extra_rtt_ns: u64,
    #[serde(default)]
    pub rwnd_bytes: Option<u64>,
    /// The sender's SO_SNDBUF (iperf3 -w): Linux doubles it and stops autotuning; `None`: autotuned.
    #[serde(default)]
    pub sndbuf_bytes: Option<u64>,
    /// The receiver's SO_RCVBUF, the same way.
    #[serde(default)]
    pub rcvbuf_bytes: Option<u64>,
    /// Negotiate ECN (net.ipv4.tcp_ecn=1 at both ends, RFC 3168).
    #[serde(default)]
    pub ecn: bool,
    /// Negotiate Accurate ECN (RFC 9768, net.ipv4.tcp_ecn=3 at both ends) instead.
    #[serde(default)]
    pub accecn: bool,
    /// A user's BPF source built natively (python/cclab/engines/native_cc.py): the library's
    /// path; `cc` is then the source's label.
    #[serde(default)]
    pub native_cc: Option<String>,
}

impl FlowConfig {
    /// A bulk flow (no size limit) of `cc` starting at time zero on the base RTT.
    pub fn bulk(flow_id: u32, cc: &str) -> Self {
        FlowConfig { flow_id, cc: cc.into(), probe_bw_gain: None, start_ns: 0, size_bytes: None, extra_rtt_ns: 0, rwnd_bytes: None, sndbuf_bytes: None, rcvbuf_bytes: None, ecn: false, accecn: false, native_cc: None }
    }

    pub fn cc_config(&self) -> Result<CcConfig, String> {
        if let Some(path) = &self.native_cc {
            let library = NativeLibrary::open(path).map_err(|e| format!("flows[{}].cc: {e}", self.flow_id))?;
            return Ok(CcConfig::Native(NativeCcConfig { library }));
        }
        match self.cc.as_str() {
            "reno" => Ok(CcConfig::Reno),
            "cubic" => Ok(CcConfig::Cubic(CubicConfig::default())),
            "dctcp" => Ok(CcConfig::Dctcp),
            "prague" => Ok(CcConfig::Prague),
            "bbr" | "bbr1" => {
                let mut cfg = BbrConfig::default();
                if let Some(gain) = self.probe_bw_gain {
                    cfg.probe_bw_gain = gain;
                }
                Ok(CcConfig::Bbr(cfg))
            }
            "bbr2" | "bbr3" if self.probe_bw_gain.is_some() => {
                Err(format!("flows[{}].probe_bw_gain: only for bbr (v1), not {}", self.flow_id, self.cc))
            }
            "bbr2" => Ok(CcConfig::Bbr2(Bbr3Config::default())),
            "bbr3" => Ok(CcConfig::Bbr3(Bbr3Config::default())),
            other => Err(format!("flows[{}].cc: unknown congestion control {other:?}", self.flow_id)),
        }
    }
}

impl SimConfig {
    /// One byte-limited bottleneck with default sampling intervals and seed 1.
    pub fn dumbbell(rate_bps: u64, rtt_ns: u64, queue_limit_bytes: u64, loss_probability: f64, duration_ns: u64, flows: Vec<FlowConfig>) -> Self {
        SimConfig {
            seed: 1,
            duration_ns,
            bottleneck: BottleneckConfig { rate_bps, rtt_ns, queue_limit_bytes: Some(queue_limit_bytes), queue_limit_packets: None, loss_probability, aqm: AqmConfig::Fifo, schedule: Vec::new(), trace_ms: None },
            flows,
            flow_sample_interval_ns: default_flow_sample_interval_ns(),
            queue_sample_interval_ns: default_queue_sample_interval_ns(),
            warmup_ns: 0,
            jitter_ns: 0,
            stall_per_packet: 0.0,
            noise: NoiseConfig::default(),
            receive_window_autotuning: true,
            host: HostConfig::default(),
        }
    }

    /// Checks what the simulator itself relies on; the Python spec layer gives
    /// users friendlier messages for the same conditions.
    pub fn validate(&self) -> Result<(), String> {
        let b = &self.bottleneck;
        if b.rate_bps == 0 {
            return Err("bottleneck.rate_bps: must be > 0".into());
        }
        if self.duration_ns == 0 {
            return Err("duration_ns: must be > 0".into());
        }
        if !(0.0..1.0).contains(&b.loss_probability) {
            return Err(format!("bottleneck.loss_probability: must be in [0, 1), got {}", b.loss_probability));
        }
        if !crate::MTU_RANGE_BYTES.contains(&self.host.mtu_bytes) {
            let range = crate::MTU_RANGE_BYTES;
            return Err(format!("host.mtu_bytes: must be in [{}, {}] (got {})", range.start(), range.end(), self.host.mtu_bytes));
        }
        let frame_bytes = self.host.frame_bytes() as u64;
        match (b.queue_limit_bytes, b.queue_limit_packets) {
            (Some(bytes), None) if bytes >= frame_bytes => {}
            (Some(bytes), None) => return Err(format!("bottleneck.queue_limit_bytes: {bytes} is below one packet ({frame_bytes} B)")),
            (None, Some(pkts)) if pkts >= 1 => {}
            (None, Some(_)) => return Err("bottleneck.queue_limit_packets: must be >= 1".into()),
            _ => return Err("bottleneck: exactly one of queue_limit_bytes and queue_limit_packets must be set".into()),
        }
        if !(0.0..=1.0).contains(&self.stall_per_packet) {
            return Err(format!("stall_per_packet: must be in [0, 1], got {}", self.stall_per_packet));
        }
        if self.host.tcp_rmem_max_bytes < crate::tcp::receive_window::TCP_RMEM_DEFAULT_BYTES {
            return Err(format!(
                "host.tcp_rmem_max_bytes: must be at least tcp_rmem's default, {} (got {})",
                crate::tcp::receive_window::TCP_RMEM_DEFAULT_BYTES,
                self.host.tcp_rmem_max_bytes
            ));
        }
        if self.host.access_rate_bps == Some(0) {
            return Err("host.access_rate_bps: must be > 0".into());
        }
        if self.warmup_ns >= self.duration_ns {
            return Err("warmup_ns: must be < duration_ns".into());
        }
        for (i, c) in b.schedule.iter().enumerate() {
            if i > 0 && c.at_ns < b.schedule[i - 1].at_ns {
                return Err(format!("bottleneck.schedule[{i}].at_ns: changes must be in time order"));
            }
            if c.rate_bps == Some(0) || c.rtt_ns == Some(0) {
                return Err(format!("bottleneck.schedule[{i}]: rate and RTT must be > 0"));
            }
            if c.loss_probability.is_some_and(|p| !(0.0..1.0).contains(&p)) {
                return Err(format!("bottleneck.schedule[{i}].loss_probability: must be in [0, 1)"));
            }
            if b.trace_ms.is_some() && c.rate_bps.is_some() {
                return Err(format!("bottleneck.schedule[{i}].rate_bps: a trace sets the rate"));
            }
        }
        if let Some(trace) = &b.trace_ms {
            cclab_aqm::delivery_trace::DeliveryTrace::check(trace).map_err(|e| format!("bottleneck.trace_ms: {e}"))?;
        }
        if self.flows.is_empty() {
            return Err("flows: at least one flow is required".into());
        }
        if self.flow_sample_interval_ns == 0 || self.queue_sample_interval_ns == 0 {
            return Err("sample intervals must be > 0".into());
        }
        for f in &self.flows {
            f.cc_config()?;
            if let Some(g) = f.probe_bw_gain {
                if !(g > 1.0) {
                    return Err(format!("flows[{}].probe_bw_gain: must be > 1, got {g}", f.flow_id));
                }
            }
            if f.size_bytes == Some(0) {
                return Err(format!("flows[{}].size_bytes: must be > 0", f.flow_id));
            }
        }
        Ok(())
    }
}
