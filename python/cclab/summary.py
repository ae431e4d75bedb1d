"""A terminal summary of one run: a row per flow, then the bottleneck."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from cclab.results import RunResult


def _number(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def render_summary(result: RunResult) -> Group:
    engine, seed = result.provenance.get("engine", "?"), result.provenance.get("seed", "?")
    warmup_s = result.spec.get("warmup_ns", 0) / 1e9
    window = f", after a {warmup_s:g} s warm-up" if warmup_s > 0 else ""
    flows = Table(title=f"flows ({engine} engine, seed {seed}{window}): goodput in Mbit/s, RTT in ms, FCT in s")
    for header in ("flow", "cc", "goodput", "retrans", "lost", "RTT min", "RTT mean", "RTT p95", "FCT"):
        flows.add_column(header, justify="left" if header == "cc" else "right")
    for row in result.flows.to_dict("records"):
        flows.add_row(
            str(row["flow_id"]),
            str(row["cc"]),
            _number(row["goodput_mbps"], 2),
            str(row["retrans_segments"]),
            str(row["lost_segments"]),
            _number(row["rtt_min_ms"]),
            _number(row["rtt_mean_ms"]),
            _number(row["rtt_p95_ms"]),
            _number(row["fct_s"], 3) if row["completed"] else "-",
        )

    link = result.bottleneck
    rate_bps = result.spec["bottleneck"]["rate_bps"]

    def queue(key: str) -> str:
        # The backlog also as the queueing delay it adds at line rate.
        backlog_bytes = link.get(key)
        if backlog_bytes is None:
            return "-"
        return f"{backlog_bytes:,.0f} B ({backlog_bytes * 8 / rate_bps * 1e3:.2f} ms)"

    utilization = link.get("utilization")
    line = Text.assemble(
        ("bottleneck: ", "bold"),
        f"utilization {_number(None if utilization is None else utilization * 100)}%  ",
        f"drops {link.get('drops', '-')}  random losses {link.get('random_losses', '-')}\n",
        ("queue: ", "bold"),
        f"mean {queue('queue_mean_bytes')}  p10 {queue('queue_p10_bytes')}",
    )
    if result.validity is not None and not result.validity.get("valid", True):
        reasons = "; ".join(map(str, result.validity.get("reasons", []))) or "no reason given"
        return Group(flows, line, Text(f"INVALID RUN: {reasons}", style="bold red"))
    return Group(flows, line)
