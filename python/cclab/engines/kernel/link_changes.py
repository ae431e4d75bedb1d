"""Links that change during a kernel run: the schedule at its times, a trace in the delay line.

Where each change of `bottleneck.schedule` goes:
- rate: the userspace bottleneck's shaper when the run has one (the delay line applies it at
  its time), else the router's tbf by `tc qdisc change` from a timer thread;
- RTT: the delay line's queues (each flow's delay = the new base RTT + its extra) at their
  time; with netem, `tc qdisc change ... netem delay` from the thread;
- loss: each flow's iptables statistic rule, replaced from the thread.
A trace (`trace_ms`) is replayed by the userspace bottleneck only (aqm.choose puts a run with
a trace there), its time zero the run's t0. The delay line gets its part of the schedule in
absolute CLOCK_REALTIME ns once t0 is known (a file and SIGUSR1, crates/cclab-delayline
link.rs). Every change records when it was applied; `provenance.link_changes` says how late.
"""

from __future__ import annotations

import bisect
import json
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cclab.engines.kernel import netem, shaping
from cclab.engines.kernel.netns import iproute_in, ns_run
from cclab.engines.kernel.topology import Topology
from cclab.units import DEFAULT_MTU_BYTES, frame_bytes, frame_bytes_of

#: What a trace's delivery opportunity carries: a 1500-byte packet, whatever the hosts' MTU
#: (crates/cclab-aqm/src/delivery_trace.rs OPPORTUNITY_BYTES), as a frame.
TRACE_OPPORTUNITY_FRAME_BYTES = frame_bytes(DEFAULT_MTU_BYTES)


def has_changes(config: dict) -> bool:
    link = config["bottleneck"]
    return bool(link.get("schedule") or link.get("trace_ms"))


def schedules_loss(config: dict) -> bool:
    return any(c.get("loss_probability") is not None for c in config["bottleneck"].get("schedule") or [])


def offered_bits(link: dict, from_s: float, to_s: float) -> float:
    """The bits the bottleneck could carry from `from_s` to `to_s` of the run: its rate over
    time, piecewise through the schedule, or a trace's opportunities as full frames (as the
    simulator's Bottleneck::offered_bits counts them)."""
    if to_s <= from_s:
        return 0.0
    trace = link.get("trace_ms")
    if trace:
        period_s = trace[-1] / 1e3

        def until(t_s: float) -> int:
            cycles, within_s = divmod(t_s, period_s)
            # A trace's times never decrease (Mahimahi's format), so a bisection counts the
            # opportunities up to `within_s`: a queue series asks this once per sample.
            return int(cycles) * len(trace) + bisect.bisect_right(trace, within_s * 1e3)

        return (until(to_s) - until(from_s)) * TRACE_OPPORTUNITY_FRAME_BYTES * 8.0
    points = [(0.0, float(link["rate_bps"]))]
    points += [(c["at_ns"] / 1e9, float(c["rate_bps"])) for c in link.get("schedule") or [] if c.get("rate_bps") is not None]
    bits = 0.0
    for i, (since, rate) in enumerate(points):
        until_s = points[i + 1][0] if i + 1 < len(points) else float("inf")
        bits += rate * max(0.0, min(until_s, to_s) - max(since, from_s))
    return bits


@dataclass
class LinkChanger:
    """Applies a run's schedule from its t0 on; `applied` lists (at_s, applied_s, what)."""

    config: dict
    topo: Topology
    ports: list[shaping.FlowPorts]
    userspace: bool
    delay_line: object | None  # delayline.DelayLine
    queue_of_flow: list[int]
    netem_qdiscs: list = field(default_factory=list)
    workdir: Path = Path(".")
    applied: list[tuple[float, float, str]] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    #: The run's t0 on the delay line's clock, as sent to it (exact, to map its times back).
    _t0_realtime_ns: int = 0

    def start(self, t0_monotonic: float) -> None:
        link = self.config["bottleneck"]
        self._t0_realtime_ns = time.time_ns() - int((time.monotonic() - t0_monotonic) * 1e9)
        self._send_to_delay_line(link, self._t0_realtime_ns)
        thread_changes = [c for c in link.get("schedule") or [] if self._thread_part(c)]
        if thread_changes:
            self._thread = threading.Thread(target=self._run, args=(t0_monotonic, thread_changes), daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def report(self, delay_report: dict | None) -> dict:
        """What provenance records: each change's schedule and lateness, and the worst."""
        rows = [{"at_s": round(at, 6), "late_ms": round((done - at) * 1e3, 3), "by": what} for at, done, what in self.applied]
        for at_ns, done_ns in (delay_report or {}).get("link_changes") or []:
            at_s = (at_ns - self._t0_realtime_ns) / 1e9
            rows.append({"at_s": round(at_s, 6), "late_ms": round((done_ns - at_ns) / 1e6, 3), "by": "cclab-delayline"})
        rows.sort(key=lambda r: r["at_s"])
        late = [r["late_ms"] for r in rows]
        return {
            "changes": rows,
            "max_late_ms": max(late) if late else None,
            "trace": "userspace bottleneck (cclab-delayline)" if self.config["bottleneck"].get("trace_ms") else None,
            "errors": (delay_report or {}).get("schedule_errors") or [],
        }

    # ---- the delay line's part: at absolute times, applied by its event loop ----------------

    def _send_to_delay_line(self, link: dict, t0_realtime_ns: int) -> None:
        changes = []
        extras = [int(f.get("extra_rtt_ns") or 0) for f in self.config["flows"]]
        for c in link.get("schedule") or []:
            entry: dict = {"at_ns": t0_realtime_ns + int(c["at_ns"])}
            if c.get("rate_bps") is not None and self.userspace:
                entry["rate"] = {"rate_bps": int(c["rate_bps"]), "burst_bytes": shaping.tbf_burst_bytes(int(c["rate_bps"]), frame_bytes_of(self.config))}
            if c.get("rtt_ns") is not None and not self.netem_qdiscs:
                delays = {self.queue_of_flow[i]: int(c["rtt_ns"]) + extras[i] for i in range(len(extras))}
                entry["delays"] = sorted(delays.items())
            if len(entry) > 1:
                changes.append(entry)
        trace = {"start_ns": t0_realtime_ns, "times_ms": link["trace_ms"]} if link.get("trace_ms") else None
        if self.delay_line is None or (not changes and trace is None):
            return
        path = self.workdir / "schedule.json"
        path.write_text(json.dumps({"trace": trace, "changes": changes}))
        self.delay_line.proc.send_signal(signal.SIGUSR1)

    # ---- the thread's part: tc and iptables at their times ------------------------------------

    def _thread_part(self, change: dict) -> bool:
        return (
            (change.get("rate_bps") is not None and not self.userspace)
            or change.get("loss_probability") is not None
            or (change.get("rtt_ns") is not None and bool(self.netem_qdiscs))
        )

    def _run(self, t0: float, changes: list[dict]) -> None:
        for change in changes:
            at_s = change["at_ns"] / 1e9
            while not self._stop.is_set():
                remaining = t0 + at_s - time.monotonic()
                if remaining <= 0:
                    break
                self._stop.wait(min(remaining, 0.05) if remaining > 0.002 else 0)
            if self._stop.is_set():
                return
            # Each part is applied when its command returned (what the path saw), and recorded
            # apart: replacing the iptables rules takes tens of ms, tc a few.
            if change.get("rate_bps") is not None and not self.userspace:
                set_tbf_rate(self.topo, int(change["rate_bps"]), shaping.queue_limit_bytes(self.config["bottleneck"], self.topo.frame_bytes))
                self.applied.append((at_s, time.monotonic() - t0, "tc tbf"))
            if change.get("rtt_ns") is not None and self.netem_qdiscs:
                extras = [int(f.get("extra_rtt_ns") or 0) for f in self.config["flows"]]
                for q in self.netem_qdiscs:
                    ns_run(self.topo.router, *netem_change_args(q.ifname, int(change["rtt_ns"]) + extras[q.flow_index], q.limit_pkts))
                self.applied.append((at_s, time.monotonic() - t0, "tc netem"))
            if change.get("loss_probability") is not None:
                shaping.set_loss(self.topo, self.ports, float(change["loss_probability"]))
                self.applied.append((at_s, time.monotonic() - t0, "iptables"))


def set_tbf_rate(topo: Topology, rate_bps: int, limit_bytes: int) -> None:
    """`tc qdisc change ... tbf rate`: tbf_change refills the bucket, sized for the new rate."""
    with iproute_in(topo.router) as ipr:
        ipr.tc("change", "tbf", topo.bottleneck_ifindex, handle="1:", rate=f"{rate_bps}bit",
               burst=shaping.tbf_burst_bytes(rate_bps, topo.frame_bytes), limit=limit_bytes)  # fmt: skip


def netem_change_args(ifname: str, delay_ns: int, limit_pkts: int) -> list[str]:
    """`tc qdisc change` of a flow's netem to a new constant delay (same handle and limit)."""
    args = netem.netem_add_args(ifname, delay_ns, limit_pkts)
    return [*args[:2], "change", *args[3:]]


#: A change of the shaper or the delay that lands this much after its time leaves the run
#: unfaithful (a quiet machine here applies tc's within a few ms, the delay line's within 1).
MAX_CHANGE_LATENESS_MS = 50.0


def lateness_reasons(report: dict) -> list[str]:
    """Validity reasons for changes of the rate (tc) or the delay (the delay line) applied late:
    host timing, which the word "lateness" names. The loss rule's iptables change is left out
    (tens of ms is usual, and a loss rate is no clock)."""
    return [
        f"link change at {row['at_s']:g} s applied {row['late_ms']:.0f} ms late by {row['by']} "
        f"(lateness over {MAX_CHANGE_LATENESS_MS:g} ms)"
        for row in report["changes"]
        if row["by"] != "iptables" and row["late_ms"] > MAX_CHANGE_LATENESS_MS
    ]
