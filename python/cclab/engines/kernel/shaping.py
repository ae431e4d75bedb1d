"""The bottleneck (tbf), random loss and counters (iptables) and the delay-line rules.

All rules live in the run's own router and receiver namespaces. Each rule carries a
`cclab:<tag>` comment so its counters can be read back by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from cclab.engines.kernel.netns import iproute_in, ns_run
from cclab.engines.kernel.topology import HOST_IFNAME, ROUTER_BOTTLENECK_IFNAME, Topology, sender_ip

#: tbf bucket: at least 10 frames, and at least 250 µs at line rate. Smaller buckets could
#: not reach the rate at 1 Gbit/s (3 KB reached 790 Mbit/s; docs/KERNEL_TESTBED.md).
TBF_MIN_BURST_FRAMES = 10
TBF_BURST_S = 250e-6
#: IP total length of a segment without payload: 20 B IP + 32 B TCP with timestamps.
#: Counting rules match longer packets only, i.e. segments that carry data.
HEADERS_BYTES = 52
DATA_MATCH = ["!", "--syn", "-m", "length", "--length", f"{HEADERS_BYTES + 1}:65535"]


def tbf_burst_bytes(rate_bps: int, frame_bytes: int) -> int:
    """tbf's bucket at this rate for full frames of `frame_bytes` (the MTU + 14)."""
    return max(TBF_MIN_BURST_FRAMES * frame_bytes, int(TBF_BURST_S * rate_bps / 8))


#: The senders' access link where `[host] access_rate_mbps` sets one: a tbf at that rate on each
#: sender's own interface (the veth otherwise sends at the CPU's speed). Its bucket follows the
#: bottleneck's rule (tbf_burst_bytes), which this VM's timers need to reach the rate, so frames
#: leave in runs of up to that many; its queue, a NIC's transmit queue, is deep enough never to
#: drop (TCP Small Queues keeps each socket's share of it near a millisecond of data).
ACCESS_QUEUE_LIMIT_BYTES = 16 * 1024 * 1024


def access_link(rate_bps: int, frame_bytes: int) -> dict[str, int | str]:
    """A sender's access link as the kernel engine installs it (and provenance records it)."""
    return {"qdisc": "tbf", "rate_bps": rate_bps, "burst_bytes": tbf_burst_bytes(rate_bps, frame_bytes), "limit_bytes": ACCESS_QUEUE_LIMIT_BYTES}


def install_access_links(topo: Topology, rate_bps: int) -> None:
    link = access_link(rate_bps, topo.frame_bytes)
    for ns in topo.senders:
        ns_run(ns, "tc", "qdisc", "add", "dev", HOST_IFNAME, "root", "handle", ACCESS_HANDLE, "tbf", "rate", f"{rate_bps}bit",
               "burst", str(link["burst_bytes"]), "limit", str(link["limit_bytes"]))  # fmt: skip


#: The access link's tbf, under which a sender qdisc goes when both are asked for.
ACCESS_HANDLE = "1:"


def install_sender_qdiscs(topo: Topology, kind: str, under_access_link: bool) -> None:
    """`[host] sender_qdisc` on each sender's interface with tc's defaults (fq: flow queues and
    pacing at each socket's rate; pfifo_fast: three bands of 1000 packets), under the access
    link's tbf if there is one (the veth's own qdisc otherwise: noqueue)."""
    where = ["parent", ACCESS_HANDLE] if under_access_link else ["root"]
    for ns in topo.senders:
        ns_run(ns, "tc", "qdisc", "add", "dev", HOST_IFNAME, *where, kind)


def queue_limit_bytes(bottleneck: Mapping, frame_bytes: int) -> int:
    """The scenario's buffer in bytes (a packet-counted one as full frames of `frame_bytes`)."""
    if bottleneck.get("queue_limit_bytes") is not None:
        return int(bottleneck["queue_limit_bytes"])
    return int(bottleneck["queue_limit_packets"]) * frame_bytes


def install_tbf(topo: Topology, rate_bps: int, limit_bytes: int) -> None:
    """A fresh tbf per run: counters survive `tc qdisc replace`, so delete and add."""
    with iproute_in(topo.router) as ipr:
        try:
            ipr.tc("del", index=topo.bottleneck_ifindex, handle="1:")
        except Exception:  # noqa: BLE001 - nothing to delete on a new veth
            pass
        ipr.tc(
            "add",
            "tbf",
            topo.bottleneck_ifindex,
            handle="1:",
            rate=f"{rate_bps}bit",
            burst=tbf_burst_bytes(rate_bps, topo.frame_bytes),
            limit=limit_bytes,
        )


def _iptables(ns: str, *rule: str) -> None:
    ns_run(ns, "iptables", "-w", *rule)


@dataclass(frozen=True)
class FlowPorts:
    """TCP ports of one flow: iperf3's server port and the client's data port (--cport)."""

    server: int
    client: int


#: IP ECN codepoint CE (RFC 3168 section 5), as the iptables ecn match's --ecn-ip-ect takes it.
ECN_CE = 3


def _loss_rule(port: FlowPorts, i: int, loss_probability: float) -> list[str]:
    return [
        "-i", f"s{i}", "-p", "tcp", "--sport", str(port.client), *DATA_MATCH,
        "-m", "statistic", "--mode", "random", "--probability", f"{loss_probability:.10f}",
        "-m", "comment", "--comment", f"cclab:loss:{i}", "-j", "DROP",
    ]  # fmt: skip


def set_loss(topo: Topology, ports: list[FlowPorts], loss_probability: float) -> None:
    """Replaces each flow's random-loss rule in place, carrying its counters over (-c), so
    the run's random losses are still counted from it."""
    listing = ns_run(topo.router, "iptables", "-w", "-L", "FORWARD", "--line-numbers", "-n")
    numbers = {int(m.group(2)): int(m.group(1)) for m in re.finditer(r"^(\d+) .*cclab:loss:(\d+)", listing, re.M)}
    counters = read_counters(topo.router)
    for i, port in enumerate(ports):
        packets, nbytes = counters.get(("loss", i), (0, 0))
        _iptables(topo.router, "-R", "FORWARD", str(numbers[i]), "-c", str(packets), str(nbytes), *_loss_rule(port, i, loss_probability))


def install_counters_and_loss(
    topo: Topology, ports: list[FlowPorts], loss_probability: float, *, count_ce: bool = False, loss_rules: bool = False
) -> None:
    """Per flow: an oversize check, sent and (optionally) random-loss rules on the router, a
    received-segment counter at the receiver and, with `count_ce`, a counter of the data
    segments that arrive CE-marked (xt_ecn). `loss_rules` installs the loss rules even at
    probability 0, for a schedule to change later (`set_loss`)."""
    for i, p in enumerate(ports):
        # Any packet longer than the MTU would prove an offload still merged segments.
        _iptables(
            topo.router, "-A", "FORWARD", "-i", f"s{i}", "-m", "length", "--length", f"{topo.mtu_bytes + 1}:65535",
            "-m", "comment", "--comment", f"cclab:oversize:{i}",
        )  # fmt: skip
        match = ["-i", f"s{i}", "-p", "tcp", "--sport", str(p.client), *DATA_MATCH]
        _iptables(topo.router, "-A", "FORWARD", *match, "-m", "comment", "--comment", f"cclab:sent:{i}")
        if loss_probability > 0 or loss_rules:
            _iptables(topo.router, "-A", "FORWARD", *_loss_rule(p, i, loss_probability))
        _iptables(
            topo.receiver, "-A", "INPUT", "-i", HOST_IFNAME, "-s", sender_ip(i),
            "-p", "tcp", "--sport", str(p.client), *DATA_MATCH,
            "-m", "comment", "--comment", f"cclab:recv:{i}",
        )  # fmt: skip
        if count_ce:
            _iptables(
                topo.receiver, "-A", "INPUT", "-i", HOST_IFNAME, "-s", sender_ip(i),
                "-p", "tcp", "--sport", str(p.client), *DATA_MATCH, "-m", "ecn", "--ecn-ip-ect", str(ECN_CE),
                "-m", "comment", "--comment", f"cclab:ce:{i}",
            )  # fmt: skip


def install_delay_rules(topo: Topology, queue_of_flow: list[int]) -> None:
    """The reverse (ACK) direction of flow i goes to its queue. No --queue-bypass: without
    the delay line these packets are dropped, never passed undelayed (fail closed)."""
    for i, queue in enumerate(queue_of_flow):
        _iptables(
            topo.router, "-A", "FORWARD", "-i", ROUTER_BOTTLENECK_IFNAME, "-o", f"s{i}",
            "-m", "comment", "--comment", f"cclab:delay:{i}", "-j", "NFQUEUE", "--queue-num", str(queue),
        )  # fmt: skip


def install_bottleneck_rules(topo: Topology, queue: int) -> None:
    """The data direction of every flow goes to the userspace bottleneck's queue, after the
    counting and loss rules (as tbf comes after them). No --queue-bypass: fail closed."""
    for i in range(len(topo.senders)):
        _iptables(
            topo.router, "-A", "FORWARD", "-i", f"s{i}", "-o", ROUTER_BOTTLENECK_IFNAME,
            "-m", "comment", "--comment", f"cclab:bottleneck:{i}", "-j", "NFQUEUE", "--queue-num", str(queue),
        )  # fmt: skip


_SAVE_LINE = re.compile(r"^\[(\d+):(\d+)\] .*--comment \"?cclab:(\w+):(\d+)\"?")


def read_counters(ns: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(kind, flow) -> (packets, bytes) for every cclab rule in namespace `ns`."""
    text = ns_run(ns, "iptables-save", "-c", "-t", "filter")
    counters = {}
    for line in text.splitlines():
        m = _SAVE_LINE.match(line)
        if m:
            counters[(m.group(3), int(m.group(4)))] = (int(m.group(1)), int(m.group(2)))
    return counters
