"""Traffic: one iperf3 server/client pair per flow, JSON output parsed.

The client binds its data connection to a known port (`--cport`), which is how the router's
loss and counting rules, the receiver's counting rule and the TCP_INFO probe find the flow.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cclab.engines.kernel.netns import ns_run
from cclab.engines.kernel.shaping import FlowPorts
from cclab.engines.kernel.topology import RECEIVER_IP

SERVER_BASE_PORT = 5201
CLIENT_BASE_PORT = 40000
LISTEN_TIMEOUT_S = 10.0
#: iperf3's default TCP block (128 KiB) is the most it writes at once.
MAX_BLOCK_BYTES = 128 * 1024
#: Smaller blocks would cost many more write() calls than they save.
MIN_BLOCK_BYTES = 1024


def ports_for(n_flows: int) -> list[FlowPorts]:
    return [FlowPorts(server=SERVER_BASE_PORT + i, client=CLIENT_BASE_PORT + i) for i in range(n_flows)]


@dataclass
class FlowPlan:
    flow_id: int
    index: int
    #: the flow's CC as the spec names it (reported in results)
    cc: str
    start_s: float
    sender_ns: str
    ports: FlowPorts
    #: -t seconds (iperf3 takes whole seconds) or -n bytes
    seconds: int | None
    size_bytes: int | None
    #: the kernel CC the socket selects (iperf3 -C): `cc`, or a cclab_bbr<gain> BPF CC
    kernel_cc: str | None = None
    #: SO_SNDBUF (iperf3 -w, which sets a bulk flow's SO_RCVBUF too) / SO_RCVBUF (a finite flow's
    #: receiver.py): None where autotuned (preflight.check_socket_buffers)
    sndbuf_bytes: int | None = None
    rcvbuf_bytes: int | None = None


def plan_seconds(duration_ns: int, start_ns: int) -> int:
    """iperf3 -t takes whole seconds; a flow runs from its start to the end of the run."""
    return max(1, round((duration_ns - start_ns) / 1e9))


def start_servers(receiver_ns: str, plans: list[FlowPlan], workdir: Path) -> list[subprocess.Popen]:
    """One `iperf3 -s` per unbounded flow; finite flows are served by receiver.py (finite.py)."""
    procs = []
    for p in plans:
        if p.size_bytes is not None:
            continue
        with open(workdir / f"server{p.index}.json", "w") as out:  # the child keeps its own copy
            procs.append(
                subprocess.Popen(
                    ["ip", "netns", "exec", receiver_ns, "iperf3", "-s", "-1", "-p", str(p.ports.server), "--json"],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
    return procs


def wait_listening(receiver_ns: str, plans: list[FlowPlan]) -> None:
    wanted = {p.ports.server for p in plans}
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        listening = ns_run(receiver_ns, "ss", "-Hltn", check=False)
        ports = {int(line.split()[3].rsplit(":", 1)[1]) for line in listening.splitlines() if line.strip()}
        if wanted <= ports:
            return
        time.sleep(0.02)
    raise RuntimeError("the flows' servers did not start listening")


def block_bytes(size_bytes: int) -> int | None:
    """The largest write size in [MIN_BLOCK_BYTES, MAX_BLOCK_BYTES] that divides
    `size_bytes`, so that iperf3 -n sends exactly the flow's bytes (3.12 writes whole
    blocks); None, iperf3's default block, if there is none: it then overshoots by less
    than a block, and the receiver stops counting at `size_bytes` anyway."""
    if size_bytes <= MAX_BLOCK_BYTES:
        return size_bytes  # one write
    for block in range(MAX_BLOCK_BYTES, MIN_BLOCK_BYTES - 1, -1):
        if size_bytes % block == 0:
            return block
    return None


def window_args(buffer_bytes: int | None) -> list[str]:
    """iperf3 -w (client only): SO_SNDBUF and SO_RCVBUF on the client's data socket, and, sent in
    its parameters, on the server's listener, which the data connection inherits."""
    return [] if buffer_bytes is None else ["-w", str(buffer_bytes)]


def start_client(p: FlowPlan, workdir: Path) -> subprocess.Popen:
    args = ["iperf3", "-c", RECEIVER_IP, "-p", str(p.ports.server), "--cport", str(p.ports.client)]
    args += ["-C", p.kernel_cc or p.cc, "--json", "-i", "0", *window_args(p.sndbuf_bytes)]
    if p.size_bytes is not None:
        args += ["-n", str(p.size_bytes)]
        block = block_bytes(p.size_bytes)
        args += ["-l", str(block)] if block is not None else []
    else:
        args += ["-t", str(p.seconds)]
    with open(workdir / f"client{p.index}.json", "w") as out:  # the child keeps its own copy
        return subprocess.Popen(["ip", "netns", "exec", p.sender_ns, *args], stdout=out, stderr=subprocess.STDOUT)


@dataclass
class ClientReport:
    ok: bool
    error: str | None
    bytes_received: int = 0
    seconds_received: float = 0.0
    retransmits: int = 0
    bytes_sent_app: int = 0
    cport_used: int | None = None
    rtt_mean_us: int | None = None


def read_client(path: Path) -> ClientReport:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        text = path.read_text()[-300:] if path.exists() else ""
        return ClientReport(False, f"no JSON from iperf3: {text.strip()}")
    if "error" in data:
        return ClientReport(False, str(data["error"]))
    end = data.get("end", {})
    sent, received = end.get("sum_sent", {}), end.get("sum_received", {})
    connected = data.get("start", {}).get("connected", [{}])
    streams = end.get("streams", [{}])
    sender = streams[0].get("sender", {}) if streams else {}
    return ClientReport(
        ok=True,
        error=None,
        bytes_received=int(received.get("bytes", 0)),
        seconds_received=float(received.get("seconds", 0.0)),
        retransmits=int(sent.get("retransmits", 0)),
        bytes_sent_app=int(sent.get("bytes", 0)),
        cport_used=connected[0].get("local_port") if connected else None,
        rtt_mean_us=sender.get("mean_rtt"),
    )


def client_deadline_s(plans: list[FlowPlan], duration_ns: int, rtt_s: float) -> float:
    """How long after t0 to wait for every client: the run plus setup, teardown and slack."""
    longest = max(p.start_s + (p.seconds or duration_ns / 1e9) for p in plans)
    return math.ceil(max(longest, duration_ns / 1e9) + 10 * rtt_s + 10)
