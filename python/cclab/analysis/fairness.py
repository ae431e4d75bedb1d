"""Fairness between flows sharing a bottleneck: Jain's index, each CC's share, throughput CDFs.

Pure functions over the result DataFrames (`RunResult.flows`, `RunResult.flow_series`,
or the store's `load_flows`/`load_series`, which add `run_key`). Nothing here runs
anything or draws anything.

Jain's index (R. Jain, D. Chiu, W. Hawe, "A Quantitative Measure of Fairness and
Discrimination for Resource Allocation in Shared Computer Systems", DEC-TR-301, 1984):

    J(x_1..x_n) = (sum x_i)^2 / (n * sum x_i^2)

It is 1 when every flow gets the same and 1/n when one flow gets everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from cclab.units import FRAME_BYTES, MSS_BYTES

#: One flow's goodput ceiling as a fraction of the line rate (docs/ARCHITECTURE.md:
#: tbf counts 1514-byte frames that carry 1448 bytes of payload).
GOODPUT_PER_LINE_RATE = MSS_BYTES / FRAME_BYTES


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index of `values` (throughputs of the flows), in [1/n, 1].

    NaN when every value is zero (nobody got anything: fairness is undefined);
    ValueError when there are no values or a value is negative.
    """
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        raise ValueError("Jain's index of no flows is undefined")
    if np.any(x < 0) or not np.all(np.isfinite(x)):
        raise ValueError("Jain's index needs finite, non-negative values")
    sum_sq = float(np.sum(x * x))
    if sum_sq == 0.0:
        return float("nan")
    return float(np.sum(x) ** 2 / (x.size * sum_sq))


def jain_by_group(flows: pd.DataFrame, by: Sequence[str] = ("run_key",), value: str = "goodput_mbps") -> pd.DataFrame:
    """Jain's index over the flows of each group (e.g. each run): columns `*by`, `n_flows`, `jain`."""
    rows = [
        {**dict(zip(by, key if isinstance(key, tuple) else (key,))), "n_flows": len(group), "jain": jain_index(group[value])}
        for key, group in flows.groupby(list(by), sort=True, dropna=False)
    ]
    return pd.DataFrame(rows, columns=[*by, "n_flows", "jain"])


def windowed_throughput(flow_series: pd.DataFrame, window_s: float) -> pd.DataFrame:
    """Each flow's mean throughput in consecutive windows of `window_s`.

    Columns: `window_start_s`, `flow_id` (and `run_key` if present), `throughput_mbps`.
    A sample at time t covers the interval before t, so it falls in window floor((t - eps)/w).
    """
    if window_s <= 0:
        raise ValueError("window_s must be > 0")
    keys = (["run_key"] if "run_key" in flow_series.columns else []) + ["flow_id"]
    frame = flow_series[[*keys, "time_s", "throughput_mbps"]].copy()
    # Samples stamp the end of their interval; nudge so that t = 1.0 belongs to [0, 1).
    frame["window_start_s"] = np.floor((frame["time_s"] - 1e-9) / window_s).clip(lower=0) * window_s
    out = frame.groupby([*keys[:-1], "window_start_s", "flow_id"], sort=True)["throughput_mbps"].mean()
    return out.reset_index()


def jain_over_time(flow_series: pd.DataFrame, window_s: float = 1.0, active_only: bool = True) -> pd.DataFrame:
    """Jain's index over flows in each time window (`window_start_s`, `n_flows`, `jain`).

    With `active_only`, a flow counts in a window only if it delivered something there,
    so flows that have not started or have finished do not read as starved.
    """
    windows = windowed_throughput(flow_series, window_s)
    if active_only:
        windows = windows[windows["throughput_mbps"] > 0]
    by = (["run_key"] if "run_key" in windows.columns else []) + ["window_start_s"]
    return jain_by_group(windows, by=by, value="throughput_mbps")


def cc_shares(
    flows: pd.DataFrame, rate_mbps: float | None = None, by: Sequence[str] = (), duration_s: float | None = None
) -> pd.DataFrame:
    """Each CC's goodput and share, per group `by` (e.g. `("run_key",)`).

    Shares are of the payload bytes delivered (`bytes_delivered`), not sums of per-flow
    goodputs: a finite flow's goodput is over its own active time, so summing goodputs of
    flows active over different intervals can exceed the link. Columns: `*by`, `cc`,
    `n_flows`, `share`, `goodput_mbps` (the CC's bytes over the measured time: `duration_s`,
    or the store's `duration_s - warmup_s`; without either, the sum of the
    flows' goodputs) and, when `rate_mbps` is given, `link_share` (of the link's goodput
    ceiling, rate x 1448/1514).
    """
    keys = [*by, "cc"]
    frame = flows.copy()
    if "bytes_delivered" not in frame.columns:  # only goodputs known: all flows span the run
        frame["bytes_delivered"] = frame["goodput_mbps"]
    if duration_s is not None:
        frame["_mbps"] = frame["bytes_delivered"] * 8 / duration_s / 1e6
    elif "duration_s" in frame.columns:
        # The store's flows table: bytes are counted after the run's warm-up.
        measured_s = frame["duration_s"] - (frame["warmup_s"].fillna(0.0) if "warmup_s" in frame.columns else 0.0)
        frame["_mbps"] = frame["bytes_delivered"] * 8 / measured_s / 1e6
    else:
        frame["_mbps"] = frame["goodput_mbps"]
    sums = frame.groupby(keys, sort=True, dropna=False).agg(
        n_flows=("cc", "size"), bytes_delivered=("bytes_delivered", "sum"), goodput_mbps=("_mbps", "sum")
    )
    sums = sums.reset_index()
    if by:
        totals = sums.groupby(list(by), dropna=False)["bytes_delivered"].transform("sum")
    else:
        totals = sums["bytes_delivered"].sum()
    sums["share"] = sums["bytes_delivered"] / totals
    if rate_mbps is not None:
        sums["link_share"] = sums["goodput_mbps"] / (rate_mbps * GOODPUT_PER_LINE_RATE)
    return sums.drop(columns="bytes_delivered")


def cc_shares_over_time(flow_series: pd.DataFrame, cc_of_flow: pd.Series | dict, window_s: float = 1.0) -> pd.DataFrame:
    """Each CC's share of the delivered throughput in each window.

    `cc_of_flow` maps flow_id to CC (e.g. `flows.set_index("flow_id")["cc"]`). Returns a
    wide frame indexed by `window_start_s` with one column per CC; each row sums to 1
    (windows where nothing was delivered are dropped).
    """
    windows = windowed_throughput(flow_series, window_s)
    windows["cc"] = windows["flow_id"].map(dict(cc_of_flow))
    per_cc = windows.pivot_table(index="window_start_s", columns="cc", values="throughput_mbps", aggfunc="sum", fill_value=0.0)
    total = per_cc.sum(axis=1)
    shares = per_cc[total > 0].div(total[total > 0], axis=0)
    shares.columns = [str(c) for c in shares.columns]
    return shares


def share_quartiles(shares: pd.DataFrame) -> pd.DataFrame:
    """The 25th, 50th and 75th percentiles of each CC's share over time (one row per CC)."""
    q = shares.quantile([0.25, 0.5, 0.75]).T
    q.columns = ["p25", "p50", "p75"]
    q.index.name = "cc"
    return q.reset_index()


def throughput_cdf(values: Iterable[float]) -> pd.DataFrame:
    """The empirical CDF of per-flow throughputs: sorted `value` and `cdf` = i/n."""
    x = np.sort(np.asarray(list(values), dtype=float))
    return pd.DataFrame({"value": x, "cdf": np.arange(1, x.size + 1) / max(1, x.size)})


def summary_stats(values: Iterable[float]) -> dict[str, float]:
    """Mean, standard deviation (population), min, max and Jain's index of per-flow values."""
    x = np.asarray(list(values), dtype=float)
    return {
        "mean": float(np.mean(x)),
        "std": float(np.std(x)),
        "min": float(np.min(x)),
        "max": float(np.max(x)),
        "jain": jain_index(x),
    }
