"""Run-to-run spread: how much a point of a sweep moves between seeds (or kernel repetitions).

A point is one network and flow mix (every spec column of the flows table but the seed);
its spread is the interquartile range of each flow's goodput across the point's runs.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only; never open a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from cclab.analysis.timeseries import cc_color  # noqa: E402

# What makes two runs the same point: the spec's columns in a flows table (store.flow_rows),
# less the seed and the run key.
POINT_COLUMNS = (
    "sweep", "engine", "duration_s", "rate_mbps", "rtt_ms", "buffer_bytes", "loss", "aqm", "n_flows", "warmup_s",
    "flow_id", "cc", "probe_bw_gain", "size_bytes", "extra_rtt_ms", "rwnd_bytes", "sndbuf_bytes", "rcvbuf_bytes",
    "start_s", "ecn",
)  # fmt: skip


def seed_spread(flows: pd.DataFrame, metric: str = "goodput_mbps") -> pd.DataFrame:
    """One row per point and flow: `seeds`, the metric's median, p25, p75 and `iqr`."""
    keys = [c for c in POINT_COLUMNS if c in flows.columns]
    values = pd.to_numeric(flows[metric], errors="coerce")
    grouped = flows.assign(_v=values).groupby(keys, dropna=False)["_v"]
    table = grouped.agg(seeds="count", median="median", p25=lambda v: v.quantile(0.25), p75=lambda v: v.quantile(0.75))
    table["iqr"] = table["p75"] - table["p25"]
    return table.reset_index()


def seed_spread_note(flows: pd.DataFrame, table_file: str | None = "spread.csv") -> str:
    """One paragraph for a summary: the spread across seeds, or how to see it; `table_file`
    names where the per-point table is written, if anywhere."""
    if flows.empty or "repetition" not in flows.columns:
        return "No runs."
    seeds = int(flows["repetition"].nunique())
    if seeds < 2:
        return ("One seed per point, so no run-to-run spread is shown; `cclab reproduce NAME --seeds 5` runs five "
                "(the simulator's seeded jitter makes them differ as kernel repetitions do).")  # fmt: skip
    table = seed_spread(flows)
    table = table[table["seeds"] >= 2]
    relative = (table["iqr"] / table["median"].where(table["median"] > 0)).dropna()
    worst = table.loc[table["iqr"].idxmax()]
    return (
        f"{seeds} seeds per point; each flow's goodput moves between seeds by an interquartile range of "
        f"{np.median(table['iqr']):.2f} Mbit/s at the median flow ({np.median(relative):.0%} of its median goodput; "
        f"p90 {np.quantile(relative, 0.9):.0%}), at most {worst['iqr']:.2f} Mbit/s ({worst['cc']} flow {int(worst['flow_id'])} "
        f"at {worst['rate_mbps']:g} Mbit/s, {worst['rtt_ms']:g} ms)."
        + (f" Per point and flow: {table_file}." if table_file else "")
    )


def spread_figure(table: pd.DataFrame, title: str) -> Figure:
    """Each point's flows (from `seed_spread`) as their median goodput with the interquartile
    range across seeds as an error bar, sorted by median, one colour per CC."""
    table = table[table["seeds"] >= 2].sort_values("median").reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for cc, group in table.groupby("cc", sort=True):
        colour = cc_color(str(cc))
        ax.errorbar(group.index, group["median"], yerr=[group["median"] - group["p25"], group["p75"] - group["median"]],
                    fmt="o", markersize=3, capsize=2, color=colour, label=str(cc))  # fmt: skip
    ax.set_xlabel("flow at a point of the sweep (sorted by median goodput)")
    ax.set_ylabel("goodput (Mbit/s): median, bars p25-p75")
    seeds = int(table["seeds"].max()) if len(table) else 0
    ax.set_title(f"{title}: run-to-run spread over {seeds} seeds")
    ax.grid(True, alpha=0.3)
    ax.legend(title="CC", loc="upper left")
    fig.tight_layout()
    return fig
