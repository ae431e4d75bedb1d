"""The measurement window on the kernel engine: metrics over [warmup_s, end], the whole run
beside them as `whole_run_<name>`, under the simulator's names (docs/ARCHITECTURE.md).

The whole-run values are assembled first (assemble.py); the window subtracts each flow's
counters as they stood at the warm-up (its TCP_INFO sample at or before warmup_s and the
router's per-flow counters read then) and recomputes the bottleneck's statistics from the
queue samples after it. Pure functions: the engine passes what it measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: The per-flow metrics measured over the window (the rest describe the flow, not the window).
FLOW_METRICS = (
    "goodput_mbps", "bytes_delivered", "bytes_sent", "data_segments_sent", "retrans_segments",
    "lost_segments", "queue_drop_segments", "random_loss_segments", "rto_count", "rtt_min_ms",
    "rtt_mean_ms", "rtt_p50_ms", "rtt_p95_ms", "rtt_max_ms", "ce_marks_received", "aqm_drop_segments",
    "rwnd_limited_ms", "sndbuf_limited_ms",
)  # fmt: skip
#: Each queue of a dual-queue AQM (dualpi2) on its own; null for a single queue. The userspace
#: bottleneck counts them over the whole run only, so after a warm-up they are null in the
#: window and kept as `whole_run_*`.
DUAL_QUEUE_METRICS = (
    "l4s_sojourn_mean_ms", "l4s_sojourn_p50_ms", "l4s_sojourn_p99_ms", "classic_sojourn_mean_ms",
    "classic_sojourn_p50_ms", "classic_sojourn_p99_ms", "l4s_packets", "classic_packets", "l4s_ce_marks",
    "classic_ce_marks",
)  # fmt: skip
BOTTLENECK_METRICS = (
    "utilization", "drops", "overflow_drops", "aqm_drops", "ce_marks", "drops_per_s", "ce_marks_per_s",
    "sojourn_mean_ms", "sojourn_p50_ms", "sojourn_p95_ms", "sojourn_p99_ms", "random_losses",
    "queue_mean_bytes", "queue_p10_bytes", "queue_p50_bytes", "queue_p95_bytes", "queue_max_bytes",
    *DUAL_QUEUE_METRICS,
)  # fmt: skip
#: Cumulative per-flow counters: the window's value is the whole run's minus the warm-up's.
FLOW_COUNTERS = (
    "bytes_delivered", "bytes_sent", "data_segments_sent", "retrans_segments",
    "random_loss_segments", "rto_count", "ce_marks_received", "rwnd_limited_ms", "sndbuf_limited_ms",
)  # fmt: skip


def with_whole_run(row: dict[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """`row` plus a `whole_run_` copy of each metric in `names` (a window that is the whole run)."""
    return {**row, **{f"whole_run_{name}": row.get(name) for name in names if name in row}}


def flow_window(
    whole: dict[str, Any], *, warmup_s: float, at_warmup: dict[str, float | None], srtt_ms_after: list[float]
) -> dict[str, Any]:
    """One flow's result over [warmup_s, end]: `whole` is its whole-run result, `at_warmup` its
    cumulative counters at the warm-up (FLOW_COUNTERS names; missing ones count as 0), and
    `srtt_ms_after` its sRTT samples after it."""
    row = with_whole_run(whole, FLOW_METRICS)
    for name in FLOW_COUNTERS:
        if whole.get(name) is not None:
            row[name] = max(0, whole[name] - (at_warmup.get(name) or 0))
    # The router's counters cannot tell a packet dropped at the warm-up instant from one still
    # in flight to the receiver, so the window's bottleneck drops of a flow are estimated by
    # its retransmissions that random loss does not explain (the engine's validity check
    # holds retransmissions and drops equal), never more than the whole run's drops.
    estimate = row["retrans_segments"] - row["random_loss_segments"]
    row["queue_drop_segments"] = max(0, min(whole["queue_drop_segments"], estimate))
    row["lost_segments"] = row["queue_drop_segments"] + row["random_loss_segments"]
    # Per-flow AQM drops are known only as a run total (the userspace bottleneck's report).
    if whole.get("aqm_drop_segments"):
        row["aqm_drop_segments"] = None
    active_s = whole["end_s"] - max(whole["start_s"], warmup_s)
    row["goodput_mbps"] = row["bytes_delivered"] * 8 / active_s / 1e6 if active_s > 0 else 0.0
    if srtt_ms_after:
        # rtt_min_ms stays tcpi_min_rtt: the kernel's own minimum, not a sampled one.
        row.update(
            rtt_mean_ms=float(np.mean(srtt_ms_after)),
            rtt_p50_ms=float(np.percentile(srtt_ms_after, 50)),
            rtt_p95_ms=float(np.percentile(srtt_ms_after, 95)),
            rtt_max_ms=max(srtt_ms_after),
        )
    else:
        row.update(rtt_mean_ms=None, rtt_p50_ms=None, rtt_p95_ms=None, rtt_max_ms=None)
    return row


def bottleneck_window(
    whole: dict[str, Any],
    qs: dict[str, list],
    flows: list[dict[str, Any]],
    *,
    warmup_s: float,
    duration_s: float,
    rate_bps: int,
    sent_bytes: int,
) -> dict[str, Any]:
    """The bottleneck's result over [warmup_s, duration_s] from the queue samples after the
    warm-up (each covers the interval that ends at its time) and the bytes it sent then."""
    row = with_whole_run(whole, BOTTLENECK_METRICS)
    row.update(dict.fromkeys(DUAL_QUEUE_METRICS))
    keep = [i for i, t in enumerate(qs["time_s"]) if t > warmup_s]
    span_s = duration_s - warmup_s
    backlog = [qs["queue_bytes"][i] for i in keep]
    drops = sum(qs["drops"][i] for i in keep)
    ce = [qs["ce_marks"][i] for i in keep]
    ce_marks = None if any(c is None for c in ce) else sum(ce)
    delays_ms = [b * 8 / rate_bps * 1e3 for b in backlog]
    row.update(
        utilization=min(1.0, sent_bytes * 8 / rate_bps / span_s) if span_s > 0 else 0.0,
        drops=drops,
        # The samples count drops without telling overflow from AQM; tail drop has only overflow.
        overflow_drops=drops if whole.get("aqm") == "fifo" else None,
        aqm_drops=0 if whole.get("aqm") == "fifo" else None,
        ce_marks=ce_marks,
        drops_per_s=drops / span_s,
        ce_marks_per_s=None if ce_marks is None else ce_marks / span_s,
        random_losses=sum(f["random_loss_segments"] for f in flows),
        queue_mean_bytes=float(np.mean(backlog)) if backlog else 0.0,
        queue_p10_bytes=_pct(backlog, 10),
        queue_p50_bytes=_pct(backlog, 50),
        queue_p95_bytes=_pct(backlog, 95),
        queue_max_bytes=max(backlog) if backlog else 0,
        # The queueing delay the backlog samples imply (the userspace bottleneck's per-packet
        # sojourns are a run total).
        sojourn_mean_ms=float(np.mean(delays_ms)) if delays_ms else None,
        sojourn_p50_ms=_pct(delays_ms, 50) if delays_ms else None,
        sojourn_p95_ms=_pct(delays_ms, 95) if delays_ms else None,
        sojourn_p99_ms=_pct(delays_ms, 99) if delays_ms else None,
    )
    return row


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else 0.0
