"""Has a run reached its steady state? A verdict from the per-flow throughput series.

The rule (docs/ARCHITECTURE.md, "Steady state"): split the measured window
[warmup_s, end] into quarters; over the last quarter and the quarter before it, take
each flow's share of the bytes delivered and the flows' total goodput as a fraction of
the link's goodput ceiling. The run has converged when

- no share and not the utilization moved by more than `DRIFT_THRESHOLD_PTS` percentage
  points between the two quarters (the end of the run is steady), and
- no flow's share over the whole window is further than that from its share over the
  window's last half (the reported numbers are not dragged by a start-up transient:
  a run whose end is steady but whose window starts in the transient gets a suggested
  warm-up instead of a longer duration).

Why this rule: a transient (BBR draining a deep buffer that CUBIC keeps filling, a
late flow ramping up, RTT unfairness settling) shows as shares that still move from
one stretch of the run to the next, while a steady state repeats itself. Quarters are
long enough to average over CUBIC's sawtooth and BBR's 10 s PROBE_RTT cycle in runs of
a minute or more, and comparing the two most recent ones judges the part of the run a
longer run would keep. Five points is below any difference the studies draw a
conclusion from, and above what the sawtooth of two same-RTT CUBIC flows leaves
between quarters.

Pure functions over DataFrames; nothing here runs anything.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cclab.analysis.fairness import GOODPUT_PER_LINE_RATE, jain_index

#: Largest move of a flow's share (or of the utilization) between the last two quarters
#: of the window, in percentage points, for a run to count as converged.
DRIFT_THRESHOLD_PTS = 5.0
#: Fewer flow samples than this per quarter cannot show a trend: no verdict.
MIN_SAMPLES_PER_QUARTER = 2


@dataclass
class SteadyState:
    """The verdict on one run; `converged` is None when the window is too short to judge."""

    window_start_s: float
    window_end_s: float
    converged: bool | None
    #: The largest move of one flow's share between the last two quarters, in points.
    share_drift_pts: float | None
    #: The move of the flows' total goodput over the link's ceiling, in points.
    utilization_drift_pts: float | None
    #: The largest gap between a flow's share over the window and over its last half, in points.
    startup_bias_pts: float | None = None
    threshold_pts: float = DRIFT_THRESHOLD_PTS
    #: Not converged: the next duration worth trying (the window doubled, same warm-up).
    suggested_duration_s: float | None = None
    #: Not converged only through the start-up: a warm-up that leaves it out (the last half).
    suggested_warmup_s: float | None = None
    #: Each flow's share of the last quarter, by flow_id.
    last_quarter_shares: dict[str, float] = field(default_factory=dict)
    #: Jain's index of the flows' goodput over the whole window.
    jain_index: float | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        """One line for a person: what did not settle and what to try."""
        if self.converged is None:
            return f"steady state: not judged ({self.reason})"
        if self.converged:
            return f"steady state: converged (shares moved {self.share_drift_pts:.1f} points between the last two quarters)"
        if self.suggested_warmup_s is not None:
            return (
                f"not converged: the end of the run is steady, but shares over [{self.window_start_s:g}, "
                f"{self.window_end_s:g}] s are {self.startup_bias_pts:.1f} points from those of its last half "
                f"(threshold {self.threshold_pts:g}): a start-up transient; try warmup_s = {self.suggested_warmup_s:g}"
            )
        return (
            f"not converged: shares moved {self.share_drift_pts:.1f} points (utilization {self.utilization_drift_pts:.1f}) "
            f"between the last two quarters of [{self.window_start_s:g}, {self.window_end_s:g}] s "
            f"(threshold {self.threshold_pts:g}); try duration_s = {self.suggested_duration_s:g} "
            f"or cclab run --until-steady"
        )


def verdict(
    flow_series: pd.DataFrame,
    *,
    warmup_s: float,
    end_s: float,
    rate_bps: float,
    flows: pd.DataFrame | None = None,
) -> SteadyState:
    """The steady-state verdict of a run from its `flow_series` (time_s, flow_id,
    throughput_mbps). `flows` (flow_id, goodput_mbps, completed) adds Jain's index over
    the window and leaves out finite flows that completed, whose end is no transient."""
    window_s = end_s - warmup_s
    quarter_s = window_s / 4
    jain = _jain(flows)
    base = {"window_start_s": warmup_s, "window_end_s": end_s, "jain_index": jain}
    # Plain arrays once: a run's verdict is taken at every store, and pandas' indexing cost
    # more than the sums (11.5 ms a verdict over the table, 5.6 over arrays).
    series = _Series(flow_series)
    if flows is not None and "completed" in flows.columns:
        series = series.without(flows.loc[flows["completed"].astype(bool), "flow_id"].to_numpy())
    if window_s <= 0:
        return SteadyState(**base, converged=None, share_drift_pts=None, utilization_drift_pts=None, reason="the run ended before its warm-up")
    if series.time_s.size == 0:
        return SteadyState(**base, converged=None, share_drift_pts=None, utilization_drift_pts=None, reason="no flow runs to the end")
    before = series.quarter(end_s - 2 * quarter_s, end_s - quarter_s)
    last = series.quarter(end_s - quarter_s, end_s)
    fewest_samples = series.fewest_samples_after(end_s - 2 * quarter_s)
    if fewest_samples < 2 * MIN_SAMPLES_PER_QUARTER or before.sum() <= 0 or last.sum() <= 0:
        return SteadyState(
            **base, converged=None, share_drift_pts=None, utilization_drift_pts=None,
            reason=f"the window's quarters ({quarter_s:g} s) hold too few samples or no traffic",
        )  # fmt: skip
    ids = sorted(set(before.index) | set(last.index))
    before, last = before.reindex(ids, fill_value=0.0), last.reindex(ids, fill_value=0.0)
    share_drift = float(np.max(np.abs(last / last.sum() - before / before.sum()))) * 100
    ceiling_mbps = rate_bps / 1e6 * GOODPUT_PER_LINE_RATE
    interval_s = series.interval_s()
    # Mean goodput per quarter: the bytes of its samples over its length.
    util_before = before.sum() * interval_s / quarter_s / ceiling_mbps
    util_last = last.sum() * interval_s / quarter_s / ceiling_mbps
    util_drift = float(abs(util_last - util_before)) * 100
    end_steady = bool(share_drift <= DRIFT_THRESHOLD_PTS and util_drift <= DRIFT_THRESHOLD_PTS)
    whole = series.quarter(warmup_s, end_s).reindex(ids, fill_value=0.0)
    last_half = before + last
    bias = float(np.max(np.abs(whole / whole.sum() - last_half / last_half.sum()))) * 100
    converged = end_steady and bias <= DRIFT_THRESHOLD_PTS
    return SteadyState(
        **base,
        converged=converged,
        share_drift_pts=share_drift,
        utilization_drift_pts=util_drift,
        startup_bias_pts=bias,
        suggested_duration_s=None if converged else warmup_s + 2 * window_s,
        suggested_warmup_s=warmup_s + window_s / 2 if end_steady and not converged else None,
        last_quarter_shares={str(i): float(v / last.sum()) for i, v in last.items()},
    )


def warmup_s_of(result: Any) -> float:
    """The warm-up a `RunResult` was measured after (`[output] warmup_s`; 0 without one):
    series statistics that should match the result's metrics start there too."""
    return float(result.spec.get("warmup_ns", 0)) / 1e9


def verdict_of(result: Any) -> SteadyState:
    """The verdict of a `RunResult` (its spec carries the window and the link's rate)."""
    spec = result.spec
    warmup_s = warmup_s_of(result)
    if "duration_ns" not in spec or "rate_bps" not in spec.get("bottleneck", {}):
        return SteadyState(warmup_s, None, None, None, None, reason="the spec names no duration or rate")  # type: ignore[arg-type]
    end_s = float(result.stats.get("simulated_s") or spec["duration_ns"] / 1e9)
    return verdict(result.flow_series, warmup_s=warmup_s, end_s=end_s, rate_bps=spec["bottleneck"]["rate_bps"], flows=result.flows)


#: The rolling window of the share-over-time figure: a fraction of the run, at least 1 s.
SHARE_WINDOW_FRACTION = 0.02
MIN_SHARE_WINDOW_S = 1.0


def link_shares_over_time(flow_series: pd.DataFrame, *, rate_bps: float, window_s: float) -> pd.DataFrame:
    """Each flow's share of the link's goodput ceiling over a rolling `window_s` (trailing,
    in whole samples): columns time_s, flow_id, share (0..1). Shares of the link, not of
    the traffic, so a link the flows leave idle shows as shares summing below 1."""
    series = flow_series[["time_s", "flow_id", "throughput_mbps"]].dropna()
    if series.empty:
        return pd.DataFrame({"time_s": [], "flow_id": [], "share": []})
    interval_s = _interval_s(series["time_s"].to_numpy()) or window_s
    samples = max(1, round(window_s / interval_s))
    ceiling_mbps = rate_bps / 1e6 * GOODPUT_PER_LINE_RATE
    wide = series.pivot_table(index="time_s", columns="flow_id", values="throughput_mbps", aggfunc="sum").sort_index()
    # A flow not yet started (or finished) delivers nothing in that sample.
    rolling = wide.fillna(0.0).rolling(samples, min_periods=1).mean() / ceiling_mbps
    long = rolling.reset_index().melt(id_vars="time_s", var_name="flow_id", value_name="share")
    return long.sort_values(["flow_id", "time_s"], kind="stable").reset_index(drop=True)


def share_window_s(duration_s: float) -> float:
    return max(MIN_SHARE_WINDOW_S, SHARE_WINDOW_FRACTION * duration_s)


def steady_label(state: dict[str, Any] | None) -> str:
    """A table cell for a run's verdict: "yes", "no (transient)" or "not judged"."""
    converged = (state or {}).get("converged")
    return "not judged" if converged is None else ("yes" if converged else "no (transient)")


def why_not_converged(state: dict[str, Any]) -> str:
    """A few words on what kept a run from converging (for a line of progress)."""
    if state.get("converged") is None:
        return f"not judged: {state.get('reason')}"
    if state.get("suggested_warmup_s") is not None:
        return f"its start-up still weighs {state['startup_bias_pts']:.1f} points on the shares"
    return f"shares moved {state['share_drift_pts']:.1f} points, utilization {state['utilization_drift_pts']:.1f}"


def not_converged_line(state: dict[str, Any] | None) -> str | None:
    """The one line `cclab run` prints on stderr for a run that did not settle, else None."""
    if not state or state.get("converged") is not False:
        return None
    return SteadyState(**state).line()


def transient_note(flows: pd.DataFrame) -> str:
    """A sentence for a study's summary: how many of its runs had not converged, from the
    store's flows table (`run_key`, `steady_converged`)."""
    if flows.empty or "steady_converged" not in flows.columns:
        return "Steady state: no verdicts (results older than the verdict)."
    runs = flows.drop_duplicates("run_key")["steady_converged"]
    transient = int((runs == False).sum())  # noqa: E712 (a nullable boolean column)
    unjudged = int(runs.isna().sum())
    text = (
        f"Steady state: {transient} of {len(runs)} runs had not converged by their end "
        f"(shares or utilization moving more than {DRIFT_THRESHOLD_PTS:g} points between the last two quarters of "
        f"the measured window, or the window's shares that far from its last half's); their numbers describe a transient."
    )
    if unjudged:
        text += f" {unjudged} runs were too short, or their flows finished too early, to judge."
    return text


class _Series:
    """A flow series' time, flow and throughput columns as arrays, without rows of `done` flows."""

    def __init__(self, flow_series: pd.DataFrame) -> None:
        self.time_s = flow_series["time_s"].to_numpy()
        self.flow_id = flow_series["flow_id"].to_numpy()
        self.throughput_mbps = flow_series["throughput_mbps"].to_numpy()

    def without(self, done: np.ndarray) -> _Series:
        keep = ~np.isin(self.flow_id, done)
        self.time_s, self.flow_id, self.throughput_mbps = self.time_s[keep], self.flow_id[keep], self.throughput_mbps[keep]
        return self

    def quarter(self, start_s: float, end_s: float) -> pd.Series:
        """Sum of each flow's per-interval throughput over samples in (start_s, end_s], by flow_id
        (pandas' groupby sum, so the same compensated sums as over the table)."""
        rows = (self.time_s > start_s) & (self.time_s <= end_s + 1e-9)
        return pd.Series(self.throughput_mbps[rows]).groupby(self.flow_id[rows]).sum()

    def fewest_samples_after(self, start_s: float) -> int:
        """The fewest samples any flow has after `start_s` (0 if none has any)."""
        _, counts = np.unique(self.flow_id[self.time_s > start_s], return_counts=True)
        return int(counts.min()) if counts.size else 0

    def interval_s(self) -> float:
        return _interval_s(self.time_s)


def _interval_s(time_s: np.ndarray) -> float:
    """The series' sampling interval: the median step between its distinct sample times."""
    times = np.sort(pd.unique(time_s))
    return float(np.median(np.diff(times))) if times.size > 1 else 0.0


def _jain(flows: pd.DataFrame | None) -> float | None:
    if flows is None or flows.empty or "goodput_mbps" not in flows.columns:
        return None
    value = jain_index(flows["goodput_mbps"].fillna(0.0).clip(lower=0.0))
    return None if np.isnan(value) else float(value)
