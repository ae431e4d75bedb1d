"""Figures for many flows on one bottleneck, readable at a glance; each saved as PNG and SVG.

- `run_timeseries`: stacked panels sharing the time axis: per-flow throughput (one
  colour per CC, legend per CC), each CC's share, queue occupancy in KB with the BDP on a
  secondary axis, and the drop rate per second.
- `cdf_figure`: per-flow throughput CDFs, one line per group.
- `xy_figure`: lines against a swept parameter, with an optional band (e.g. quartiles).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from cclab.analysis import fairness, queue  # noqa: E402

#: One colour per CC everywhere (colour-blind-safe Dark2 hues).
CC_COLORS = {"bbr": "#d95f02", "bbr2": "#e6ab02", "bbr3": "#e7298a", "cubic": "#1b9e77", "reno": "#7570b3"}
OTHER_COLOR = "#666666"
#: How figures and tables name each CC ("bbr" is BBRv1).
CC_LABELS = {"bbr": "BBRv1", "bbr2": "BBRv2", "bbr3": "BBRv3", "cubic": "CUBIC", "reno": "Reno", "dctcp": "DCTCP", "prague": "Prague"}
#: PNG resolution; and savefig's own pad around a tight box (rcParams["savefig.pad_inches"]).
PNG_DPI = 130
TIGHT_PAD_IN = 0.1
#: The queue panel draws at most this many bins (mean line, min-max band).
MAX_QUEUE_POINTS = 2000


def cc_color(cc: str) -> str:
    return CC_COLORS.get(str(cc).lower(), OTHER_COLOR)


def cc_label(cc: str) -> str:
    return CC_LABELS.get(str(cc).lower(), str(cc))


def save(fig: plt.Figure, stem: Path) -> list[Path]:
    """Write `stem`.png and `stem`.svg and close the figure."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    # Not with_suffix: a stem like "duel_0.5bdp" has a dot that is not a suffix.
    paths = [stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.svg"]
    # The tight box (what bbox_inches="tight" finds, with its 0.1 in pad) is measured once, in
    # inches, and given to both files: "tight" would draw each figure once more per file.
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(TIGHT_PAD_IN)
    fig.savefig(paths[0], dpi=PNG_DPI, bbox_inches=box)
    fig.savefig(paths[1], bbox_inches=box)
    plt.close(fig)
    return paths


def _cc_legend(ax: plt.Axes, counts: Mapping[str, int]) -> None:
    handles = [Line2D([], [], color=cc_color(cc), lw=2, label=f"{cc_label(cc)} ({n} flow{'s' if n != 1 else ''})") for cc, n in counts.items()]
    ax.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.8)


def run_timeseries(
    flow_series: pd.DataFrame,
    queue_series: pd.DataFrame,
    flows: pd.DataFrame,
    *,
    rate_bps: float,
    rtt_s: float,
    title: str,
    stem: Path,
    smooth_s: float = 0.5,
    share_window_s: float = 1.0,
) -> list[Path]:
    """The four-panel time-series figure of one run. Returns the PNG and SVG paths."""
    cc_of_flow = dict(zip(flows["flow_id"], flows["cc"].astype(str)))
    counts = flows["cc"].astype(str).value_counts().sort_index().to_dict()
    bdp = queue.bdp_bytes(rate_bps, rtt_s)
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(10, 10), height_ratios=[3, 1.6, 2, 1.4])
    ax_tp, ax_share, ax_q, ax_drop = axes

    # Per-flow throughput, smoothed so that 100 flows stay readable.
    n = len(cc_of_flow)
    alpha, width = (0.9, 1.2) if n <= 8 else (max(0.15, 4 / n), 0.7)
    for flow_id, rows in flow_series.groupby("flow_id", sort=True):
        rows = rows.sort_values("time_s")
        interval = float(np.median(np.diff(rows["time_s"]))) if len(rows) > 1 else smooth_s
        span = max(1, round(smooth_s / interval)) if interval > 0 else 1
        smoothed = rows["throughput_mbps"].rolling(span, min_periods=1).mean()
        ax_tp.plot(rows["time_s"], smoothed, color=cc_color(cc_of_flow.get(flow_id, "")), alpha=alpha, lw=width)
    ax_tp.set_ylabel(f"throughput per flow\n(Mbit/s, {smooth_s:g} s mean)")
    ax_tp.set_ylim(bottom=0)
    _cc_legend(ax_tp, counts)
    ax_tp.set_title(title)

    # Each CC's share of the delivered throughput.
    shares = fairness.cc_shares_over_time(flow_series, cc_of_flow, share_window_s)
    if not shares.empty:
        ccs = list(shares.columns)
        ax_share.stackplot(
            shares.index + share_window_s / 2, [shares[c] for c in ccs], colors=[cc_color(c) for c in ccs],
            labels=[cc_label(c) for c in ccs], alpha=0.85, step="mid",
        )  # fmt: skip
        ax_share.legend(loc="upper right", fontsize=8, framealpha=0.8)
    ax_share.set_ylim(0, 1)
    ax_share.set_ylabel(f"share of goodput\n({share_window_s:g} s windows)")

    # Queue occupancy: binned mean with the min-max band; BDP on the right-hand axis.
    occ = queue.occupancy(queue_series, bdp)
    if not occ.empty:
        span_s = float(occ["time_s"].max() - occ["time_s"].min()) or 1.0
        bin_s = max(span_s / MAX_QUEUE_POINTS, float(np.median(np.diff(occ["time_s"]))) if len(occ) > 1 else 1.0)
        bins = occ.groupby(np.floor(occ["time_s"] / bin_s) * bin_s)["queue_bytes"].agg(["mean", "min", "max"]) / 1e3
        ax_q.fill_between(bins.index, bins["min"], bins["max"], color="#4c72b0", alpha=0.25, lw=0, label="min-max")
        ax_q.plot(bins.index, bins["mean"], color="#4c72b0", lw=0.9, label="mean")
        ax_q.legend(loc="upper right", fontsize=8, framealpha=0.8)
    ax_q.set_ylabel("queue (KB)")
    ax_q.set_ylim(bottom=0)
    right = ax_q.secondary_yaxis("right", functions=(lambda kb: kb * 1e3 / bdp, lambda b: b * bdp / 1e3))
    right.set_ylabel("queue (BDP)")

    # Drop rate per second, as a percentage of the packets reaching the queue.
    drops = queue.drop_rate(queue_series, rate_bps, bin_s=1.0)
    ax_drop.bar(drops["time_s"], drops["drop_percent"], width=1.0, align="edge", color="#c44e52")
    ax_drop.set_ylabel("drops\n(% per second)")
    ax_drop.set_xlabel("time (s)")
    ax_drop.set_ylim(bottom=0)
    for ax in axes:
        ax.grid(True, alpha=0.3)
    fig.align_ylabels(axes)
    return save(fig, stem)


def cdf_figure(
    groups: Mapping[str, Sequence[float]],
    *,
    xlabel: str,
    title: str,
    stem: Path,
    colors: Mapping[str, str] | None = None,
    vlines: Mapping[str, float] | None = None,
) -> list[Path]:
    """One empirical CDF per group (e.g. per buffer size), as steps.

    The x axis turns logarithmic when a few flows take tens of times the median, so
    that one outlier does not squash every other flow against the axis.
    """
    fig, ax = plt.subplots(figsize=(7, 4.5))
    everything = np.concatenate([np.asarray(v, dtype=float) for v in groups.values()]) if groups else np.array([])
    positive = everything[everything > 0]
    logx = positive.size > 0 and positive.max() > 20 * np.median(positive)
    for label, values in groups.items():
        cdf = fairness.throughput_cdf(values)
        ax.step(cdf["value"], cdf["cdf"], where="post", label=label, color=(colors or {}).get(label))
    for label, value in (vlines or {}).items():
        ax.axvline(value, color="#444444", ls="--", lw=0.8, label=label)
    ax.set_xlabel(xlabel + (" (log scale)" if logx else ""))
    ax.set_ylabel("fraction of flows (CDF)")
    ax.set_ylim(0, 1.02)
    if logx:
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, stem)


def xy_figure(
    lines: Mapping[str, pd.DataFrame],
    *,
    x: str,
    y: str,
    xlabel: str,
    ylabel: str,
    title: str,
    stem: Path,
    band: tuple[str, str] | None = None,
    logx: bool = False,
    colors: Mapping[str, str] | None = None,
    hlines: Mapping[str, float] | None = None,
    vlines: Mapping[str, float] | None = None,
) -> list[Path]:
    """Lines of `y` against `x`, one per entry of `lines`; `band` names low/high columns to shade."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, frame in lines.items():
        frame = frame.sort_values(x)
        color = (colors or {}).get(label)
        (line,) = ax.plot(frame[x], frame[y], marker="o", ms=4, label=label, color=color)
        if band is not None:
            ax.fill_between(frame[x], frame[band[0]], frame[band[1]], color=line.get_color(), alpha=0.2, lw=0)
    for label, value in (hlines or {}).items():
        ax.axhline(value, color="#444444", ls="--", lw=0.8, label=label)
    for label, value in (vlines or {}).items():
        ax.axvline(value, color="#444444", ls=":", lw=0.8, label=label)
    if logx:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return save(fig, stem)
