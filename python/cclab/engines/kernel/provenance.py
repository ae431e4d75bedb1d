"""What a kernel run was made of: kernel, sysctls, offloads, qdisc, delay and loss mechanism."""

from __future__ import annotations

import os
import platform
import subprocess

from cclab.engines.kernel import assemble, shaping, topology
from cclab.engines.kernel.netns import ns_run
from cclab.engines.kernel.preflight import netem_available

HOST_SYSCTLS_REPORTED = [
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_no_metrics_save",
    "net.ipv4.tcp_recovery",
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_sack",
    "net.ipv4.tcp_timestamps",
    "net.ipv4.tcp_ecn",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.core.default_qdisc",
]
ROOT_SYSCTLS_REPORTED = ["net.core.netdev_max_backlog", "net.ipv4.tcp_allowed_congestion_control"]


def _sysctls(ns: str, keys: list[str]) -> dict[str, str]:
    out = ns_run(ns, "sysctl", "-e", *keys, check=False)
    return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.splitlines()) if v}


def _root_sysctl(key: str) -> str | None:
    try:
        with open("/proc/sys/" + key.replace(".", "/")) as f:
            return f.read().strip()
    except OSError:
        return None


def _iperf3_version() -> str:
    out = subprocess.run(["iperf3", "--version"], capture_output=True, text=True)
    return out.stdout.splitlines()[0] if out.stdout else ""


def provenance(
    config: dict,
    topo: topology.Topology,
    m: assemble.Measured,
    idle_rtt_ms: dict,
    delay_report: dict | None,
    limit_bytes: int,
    delay_of_queue: dict[int, int],
) -> dict:
    rate = int(config["bottleneck"]["rate_bps"])
    return {
        "engine": "kernel",
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "iperf3": _iperf3_version(),
        "topology": {
            "router": topo.router,
            "receiver": topo.receiver,
            "senders": topo.senders,
            "mtu_bytes": topology.MTU_BYTES,
            "rps_cpus_mask": topology.rps_mask(),
        },
        "sender_sysctls": _sysctls(topo.senders[0], HOST_SYSCTLS_REPORTED),
        "root_sysctls": {k: _root_sysctl(k) for k in ROOT_SYSCTLS_REPORTED},
        "offloads": {
            "sender_eth0": topology.offload_state(topo.senders[0]),
            "router_bottleneck": topology.offload_state(topo.router, topology.ROUTER_BOTTLENECK_IFNAME),
            "receiver_eth0": topology.offload_state(topo.receiver),
        },
        "bottleneck_qdisc": {
            "kind": "tbf",
            "rate_bps": rate,
            "burst_bytes": shaping.tbf_burst_bytes(rate),
            "limit_bytes": limit_bytes,
            "where": "router egress towards the receiver",
        },
        "delay": {
            "mechanism": "nfqueue-delay-line",
            "why": "sch_netem is not in this kernel" if netem_available() is False else "NFQUEUE delay line",
            "where": "router FORWARD chain, ACK direction, whole RTT; fail closed (no --queue-bypass)",
            "delay_ns_by_queue": {str(q): d for q, d in delay_of_queue.items()},
            "report": delay_report,
        },
        "loss": {
            "mechanism": "iptables statistic --mode random" if config["bottleneck"].get("loss_probability") else None,
            "where": "router FORWARD chain, data segments of each flow, before tbf",
            "probability": config["bottleneck"].get("loss_probability") or 0.0,
        },
        "oversize_packets": sum(v[0] for k, v in m.router_counters.items() if k[0] == "oversize"),
        "idle_rtt_ms": {str(k): v for k, v in idle_rtt_ms.items()},
        "cpu_idle_fraction": assemble.cpu_idle_fraction(m),
        "softnet_drops_growth": m.softnet_growth,
        "sampler_missed_ticks": m.sampler.overruns,
        "notes": [
            "iperf3 runs whole seconds (-t); goodput uses the receiver's bytes over its measured seconds",
            "rtt percentiles come from TCP_INFO srtt samples at flow_sample_interval_ns; rtt_min from tcpi_min_rtt",
            "the machine is shared: other CPU load can disturb results (see validity and cpu_idle_fraction)",
        ],
    }
