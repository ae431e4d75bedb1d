"""Figures of `cclab validate`: each case's two engines on the same axes, and the set at a glance."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from cclab.analysis.timeseries import save  # noqa: E402
from cclab.fidelity.compare import GOODPUT_MEDIAN_MAX_ERROR, GOODPUT_P90_MAX_ERROR, CaseComparison  # noqa: E402
from cclab.results import RunResult  # noqa: E402

ENGINE_STYLES = {"sim": {"ls": "-", "lw": 1.3}, "kernel": {"ls": "--", "lw": 1.3}}
FLOW_COLORS = plt.get_cmap("tab10").colors
# Throughput per 50 ms sample is mostly packet-count noise; a 0.5 s mean shows the trend.
THROUGHPUT_SMOOTH_S = 0.5
REGIME_MARKERS = {"buffer": "o", "loss": "s", "gain": "^", "flows": "D", "rtt": "v", "bbr23": "P", "aqm": "X"}


def _smoothed(rows: pd.DataFrame, column: str, window_s: float) -> pd.Series:
    interval = float(np.median(np.diff(rows["time_s"]))) if len(rows) > 1 else window_s
    span = max(1, round(window_s / interval)) if interval > 0 else 1
    return rows[column].rolling(span, min_periods=1).mean()


def case_figure(case: str, runs: dict[str, RunResult], stem: Path) -> list[Path]:
    """cwnd, throughput, queue and RTT over time; one colour per flow, sim solid, kernel dashed."""
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(10, 9), height_ratios=[2.2, 2, 1.6, 1.6])
    ax_cwnd, ax_tp, ax_q, ax_rtt = axes
    flow_labels: dict[int, str] = {}
    for engine, result in runs.items():
        style = ENGINE_STYLES[engine]
        for flow_id, rows in result.flow_series.groupby("flow_id", sort=True):
            rows = rows.sort_values("time_s")
            color = FLOW_COLORS[int(flow_id) % len(FLOW_COLORS)]
            cc = result.flows.loc[result.flows["flow_id"] == flow_id, "cc"]
            flow_labels[int(flow_id)] = f"flow {flow_id} ({str(cc.iloc[0]).upper() if len(cc) else '?'})"
            ax_cwnd.plot(rows["time_s"], rows["cwnd_pkts"], color=color, **style)
            ax_tp.plot(rows["time_s"], _smoothed(rows, "throughput_mbps", THROUGHPUT_SMOOTH_S), color=color, **style)
            ax_rtt.plot(rows["time_s"], rows["srtt_ms"], color=color, **style)
        queue = result.queue_series.sort_values("time_s")
        ax_q.plot(queue["time_s"], queue["queue_bytes"] / 1e3, color="black" if engine == "sim" else "#d95f02", **style, alpha=0.8)
    limit = runs["sim"].bottleneck.get("queue_limit_bytes")
    if limit:
        ax_q.axhline(limit / 1e3, color="grey", lw=0.8, ls=":")
    ax_cwnd.set_ylabel("cwnd (packets)")
    ax_tp.set_ylabel(f"throughput (Mbit/s,\n{THROUGHPUT_SMOOTH_S:g} s mean)")
    ax_q.set_ylabel("queue (KB)")
    ax_rtt.set_ylabel("smoothed RTT (ms)")
    ax_rtt.set_xlabel("time (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    handles = [Line2D([], [], color=FLOW_COLORS[i % len(FLOW_COLORS)], lw=2, label=label) for i, label in sorted(flow_labels.items())]
    handles += [Line2D([], [], color="black", label=engine, **ENGINE_STYLES[engine]) for engine in runs]
    ax_cwnd.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.85, ncol=2)
    ax_q.legend(
        handles=[Line2D([], [], color="black", label="sim", **ENGINE_STYLES["sim"]), Line2D([], [], color="#d95f02", label="kernel", **ENGINE_STYLES["kernel"])],
        loc="upper right",
        fontsize=8,
    )
    ax_cwnd.set_title(f"{case}: simulator (solid) and kernel (dashed)")
    fig.tight_layout()
    return save(fig, stem)


def goodput_scatter(comparisons: Sequence[CaseComparison], stem: Path) -> list[Path]:
    """Simulator against kernel goodput per case, on log axes with the error bands."""
    fig, ax = plt.subplots(figsize=(6.5, 6))
    values = [v for c in comparisons for v in (c.sim_goodput_mbps, c.kernel_goodput_mbps) if v > 0]
    low, high = (min(values) / 1.5, max(values) * 1.5) if values else (0.1, 100)
    line = np.geomspace(low, high, 50)
    ax.plot(line, line, color="black", lw=0.8)
    for band, alpha in ((GOODPUT_P90_MAX_ERROR, 0.08), (GOODPUT_MEDIAN_MAX_ERROR, 0.15)):
        ax.fill_between(line, line * (1 - band), line * (1 + band), color="#1b9e77", alpha=alpha, lw=0)
    for regime, marker in REGIME_MARKERS.items():
        chosen = [c for c in comparisons if c.regime == regime]
        if chosen:
            ax.scatter([c.kernel_goodput_mbps for c in chosen], [c.sim_goodput_mbps for c in chosen], marker=marker, label=regime, s=28, alpha=0.85)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("kernel goodput (Mbit/s)")
    ax.set_ylabel("simulator goodput (Mbit/s)")
    ax.set_title(f"goodput per case (bands: ±{GOODPUT_MEDIAN_MAX_ERROR:.0%}, ±{GOODPUT_P90_MAX_ERROR:.0%})")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return save(fig, stem)


def error_bars(comparisons: Sequence[CaseComparison], stem: Path) -> list[Path]:
    """Goodput error and retransmission ratio per case, sorted by goodput error."""
    ordered = sorted(comparisons, key=lambda c: c.goodput_error)
    fig, (ax_err, ax_rt) = plt.subplots(1, 2, figsize=(12, max(4, 0.24 * len(ordered) + 1)), sharey=True)
    y = np.arange(len(ordered))
    ax_err.barh(y, [100 * c.goodput_error for c in ordered], color=["#1b9e77" if c.goodput_error <= GOODPUT_P90_MAX_ERROR else "#d95f02" for c in ordered])
    ax_err.axvline(100 * GOODPUT_MEDIAN_MAX_ERROR, color="grey", lw=0.8, ls=":")
    ax_err.axvline(100 * GOODPUT_P90_MAX_ERROR, color="grey", lw=0.8, ls="--")
    ax_err.set_yticks(y, [c.case for c in ordered], fontsize=7)
    ax_err.set_xlabel("goodput |sim - kernel| / kernel (%)")
    ratios = [c.retrans_ratio if c.retrans_ratio is not None and np.isfinite(c.retrans_ratio) and c.retrans_ratio > 0 else np.nan for c in ordered]
    ax_rt.scatter(ratios, y, color="#7570b3", s=18)
    ax_rt.axvspan(0.5, 2.0, color="#1b9e77", alpha=0.12, lw=0)
    ax_rt.set_xscale("log")
    ax_rt.set_xlabel("retransmissions sim / kernel (band: within 2x)")
    for ax in (ax_err, ax_rt):
        ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    return save(fig, stem)
