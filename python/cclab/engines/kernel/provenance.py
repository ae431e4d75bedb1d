"""What a kernel run was made of: kernel, sysctls, offloads, qdisc, delay and loss mechanism."""

from __future__ import annotations

import os
import platform
import subprocess

from cclab.engines.kernel import aqm, assemble, netem, shaping, topology
from cclab.engines.kernel.netns import ns_run
from cclab.spec.host import effective

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


def _access_link(config: dict, frame_bytes: int) -> dict | None:
    rate_bps = effective(config.get("host"))["access_rate_bps"]
    return None if rate_bps is None else shaping.access_link(rate_bps, frame_bytes)


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
    choice: netem.DelayChoice,
) -> dict:
    rate = int(config["bottleneck"]["rate_bps"])
    steered = choice.mechanism == netem.DELAY_LINE
    return {
        "engine": "kernel",
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "iperf3": _iperf3_version(),
        "topology": {
            "router": topo.router,
            "receiver": topo.receiver,
            "senders": topo.senders,
            "mtu_bytes": topo.mtu_bytes,
            # As the kernel reports them: the sender's, the bottleneck's and the receiver's device.
            "device_mtu_bytes": {
                "sender_eth0": topology.device_mtu_bytes(topo.senders[0]),
                "router_bottleneck": topology.device_mtu_bytes(topo.router, topology.ROUTER_BOTTLENECK_IFNAME),
                "receiver_eth0": topology.device_mtu_bytes(topo.receiver),
            },
            "rps_cpus_mask": topology.rps_mask() if steered else None,
        },
        "host_settings": effective(config.get("host")),
        # The senders' access link: a tbf where [host] access_rate_mbps asks for one, else the veth.
        "access_link": _access_link(config, topo.frame_bytes),
        # What the senders' interface had: the access link's tbf and the sender qdisc, or noqueue.
        "sender_qdiscs": ns_run(topo.senders[0], "tc", "qdisc", "show", "dev", topology.HOST_IFNAME).strip().splitlines(),
        "sender_sysctls": _sysctls(topo.senders[0], HOST_SYSCTLS_REPORTED),
        "root_sysctls": {k: _root_sysctl(k) for k in ROOT_SYSCTLS_REPORTED},
        "offloads": {
            "sender_eth0": topology.offload_state(topo.senders[0]),
            "router_bottleneck": topology.offload_state(topo.router, topology.ROUTER_BOTTLENECK_IFNAME),
            "receiver_eth0": topology.offload_state(topo.receiver),
        },
        "bottleneck_qdisc": _bottleneck_qdisc(m, rate, limit_bytes, topo.frame_bytes),
        "userspace_bottleneck": _userspace_bottleneck(m),
        "delay": _delay(choice, m, delay_report, delay_of_queue, rate),
        # The spec's jitter_us and stall_per_packet are the simulator's stand-ins for this run's own noise.
        "jitter": {"model": "the kernel's own timing noise (scheduling, timers, the delay line's lateness in delay.report)"},
        "loss": {
            "mechanism": "iptables statistic --mode random" if config["bottleneck"].get("loss_probability") else None,
            "where": "router FORWARD chain, data segments of each flow, before tbf",
            "why": "works on every kernel, with either delay mechanism (netem's own loss is not used)",
            "probability": config["bottleneck"].get("loss_probability") or 0.0,
        },
        "oversize_packets": sum(v[0] for k, v in m.router_counters.items() if k[0] == "oversize"),
        "idle_rtt_ms": {str(k): v for k, v in idle_rtt_ms.items()},
        "cpu_idle_fraction": assemble.cpu_idle_fraction(m),
        "cpu_steal_fraction": assemble.cpu_steal_fraction(m),
        "cpu_wait_s": {name: round(s, 4) for name, s in sorted(m.sampler.cpu_wait.waited_s().items())},
        "cpu_ran_s": {name: round(s, 4) for name, s in sorted(m.sampler.cpu_wait.ran_s().items())},
        "softnet_drops_growth": m.softnet_growth,
        "softnet_drops_growth_per_cpu": m.softnet_growth_per_cpu,
        "cpu_steal_fraction_per_cpu": [round(f, 4) for f in m.steal_fraction_per_cpu],
        "sampler_missed_ticks": m.sampler.overruns,
        "finite_flows": _finite_flows(m),
        "finite_receiver_cpu_s": m.receiver_cpu_s,
        "notes": [
            "iperf3 runs whole seconds (-t); goodput uses the receiver's bytes over its measured seconds",
            "finite flows (size_bytes): receiver.py serves iperf3 -n and reads every byte; fct_s runs from the data "
            "connection's SYN (sender-side sock_diag poll, ~1 ms) to the kernel receive stamp of the last byte; a "
            "flow still going at the end of the run is reset there and counts only bytes that arrived by then",
            "rtt percentiles come from TCP_INFO srtt samples at flow_sample_interval_ns; rtt_min from tcpi_min_rtt",
            "the machine is shared: other CPU load can disturb results (see validity, cpu_idle_fraction and cpu_steal_fraction)",
        ],
    }


def _finite_flows(m: assemble.Measured) -> dict:
    """Per finite flow: how its times were taken (finite.py, receiver.py)."""
    out = {}
    for p in m.plans:
        if p.size_bytes is None:
            continue
        r = m.received.get(p.flow_id, {})
        syn, accept = m.syn_s.get(p.flow_id), r.get("accept_s")
        stamp, read = r.get("last_byte_s"), r.get("last_byte_read_s")
        out[str(p.flow_id)] = {
            "syn_s": syn,
            # SYN to accept is the handshake: one RTT plus any queueing of SYN and ACK.
            "syn_to_accept_ms": (accept - syn) * 1e3 if syn is not None and accept is not None else None,
            "last_byte_clock": r.get("last_byte_clock"),
            # How much later user space read the last byte than the kernel stamped it.
            "last_byte_read_lag_ms": (read - stamp) * 1e3 if stamp is not None and read is not None else None,
            "stopped_at_run_end": p.flow_id in m.cut_at_end,
            "receiver_error": r.get("error"),
        }
    return out


def _delay(
    choice: netem.DelayChoice,
    m: assemble.Measured,
    delay_report: dict | None,
    delay_of_queue: dict[int, int],
    rate: int,
) -> dict:
    probe = choice.probe
    common = {
        "mechanism": choice.provenance_name,
        "requested": choice.requested,
        "requested_by": choice.source,
        "netem_available": probe.available if probe else None,
        "netem_probe": probe.detail if probe else "not probed: the delay line was asked for",
        "kernel_config_net_sch_netem": probe.kernel_config if probe else None,
    }
    if choice.mechanism == netem.NETEM:
        return {
            **common,
            "why": "sch_netem is available" + (" (auto prefers it)" if choice.requested == netem.AUTO else ""),
            "where": "netem root qdisc on each router interface towards a sender (ACK direction), whole RTT; "
            "never on a sender",
            "qdiscs": netem.describe(m.netem_qdiscs, m.netem_stats, rate),
        }
    if probe is None:
        why = "the NFQUEUE delay line was asked for"
    elif not probe.available:
        why = "sch_netem is not in this kernel"
    else:  # pragma: no cover - auto picks netem when it is available
        why = "NFQUEUE delay line"
    return {
        **common,
        "why": why,
        "where": "router FORWARD chain, ACK direction, whole RTT; fail closed (no --queue-bypass)",
        "delay_ns_by_queue": {str(q): d for q, d in delay_of_queue.items()},
        "report": {k: v for k, v in delay_report.items() if k != "bottleneck"} if delay_report else None,
    }


def _bottleneck_qdisc(m: assemble.Measured, rate: int, limit_bytes: int, frame_bytes: int) -> dict:
    """The tbf on the router's egress: the shaper, or (userspace bottleneck) a fast pass-through."""
    tbf_rate = rate * aqm.PASSTHROUGH_RATE_FACTOR if m.aqm_userspace else rate
    return {
        "kind": "tbf",
        "rate_bps": tbf_rate,
        "burst_bytes": shaping.tbf_burst_bytes(tbf_rate, frame_bytes),
        "limit_bytes": limit_bytes,
        "where": "router egress towards the receiver",
        "role": "pass-through (the userspace bottleneck shapes)" if m.aqm_userspace else "the bottleneck shaper",
        "child": None if m.aqm_kind == aqm.FIFO or m.aqm_userspace else m.aqm_kind,
    }


def _userspace_bottleneck(m: assemble.Measured) -> dict | None:
    """The userspace bottleneck's report without its bulky series and per-flow rows."""
    report = m.userspace_report
    if report is None:
        return None
    return {k: v for k, v in report.items() if k not in ("series", "flows")}
