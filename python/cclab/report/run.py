"""The report of one run: per-flow and queue time series, CC states, tables, spec, provenance."""

from __future__ import annotations

from typing import Any

import pandas as pd

from cclab.analysis.steady import link_shares_over_time, share_window_s
from cclab.report import plots
from cclab.report.page import Page, esc, frame_table, grid, json_block, key_value_table
from cclab.results import RunResult

# (column, chart title, axis title, unit) of the per-flow series, in the order shown.
FLOW_METRICS = [
    ("throughput_mbps", "Throughput per flow", "Mbit/s", "Mbit/s"),
    ("cwnd_pkts", "Congestion window", "packets", "pkts"),
    ("inflight_pkts", "Packets in flight", "packets", "pkts"),
    ("pacing_rate_mbps", "Pacing rate", "Mbit/s", "Mbit/s"),
    ("srtt_ms", "Smoothed RTT", "ms", "ms"),
    ("bbr_bw_mbps", "BBR bandwidth estimate", "Mbit/s", "Mbit/s"),
    ("bbr_min_rtt_ms", "BBR min RTT", "ms", "ms"),
]
# Queue series: (column, title, axis title, unit, how to merge samples into a bucket).
QUEUE_METRICS = [
    ("queue_bytes", "Bottleneck queue", "bytes", "B", "mean"),
    ("drops", "Drops per sample", "packets", "pkts", "sum"),
    ("utilization", "Link utilization", "fraction busy", "", "mean"),
    ("ce_marks", "CE marks per sample", "packets", "pkts", "sum"),
]


def flow_label(flow_id: int, cc: str) -> str:
    return f"flow {flow_id} ({cc})"


def render_run(result: RunResult, title: str) -> str:
    """The whole page for one run."""
    page = Page(title, _subtitle(result))
    page.section("Overview", _overview(result))
    page.section("Flows", frame_table(result.flows[_shown(result, result.flows.columns)], sortable=True))
    labels = {int(row.flow_id): flow_label(int(row.flow_id), str(row.cc)) for row in result.flows.itertuples()}
    page.section("Flow time series", grid([page.plot(figure) for figure in flow_charts(result.flow_series, labels)]))
    shares = share_chart(result, labels)
    if shares is not None:
        page.section("Share of the link over time", page.plot(shares))
    bands = state_chart(result, labels)
    if bands is not None:
        page.section("CC state", page.plot(bands))
    page.section("Queue", grid([page.plot(figure) for figure in queue_charts(result)]))
    if not result.events.empty:
        page.section("Events", _event_counts(result.events))
    page.section("Spec (resolved config)", json_block(result.spec))
    page.section("Provenance", key_value_table(_flat(result.provenance)), key_value_table(_flat({"stats": result.stats})))
    return page.html()


def _subtitle(result: RunResult) -> str:
    link = result.spec["bottleneck"]
    buffer = link.get("queue_limit_bytes")
    buffer_text = f"{buffer:,} B" if buffer is not None else f"{link.get('queue_limit_packets')} packets"
    aqm = (link.get("aqm") or {}).get("kind", "fifo")
    return (
        f"{result.provenance.get('engine', '?')} engine, seed {result.spec.get('seed')}: "
        f"{link['rate_bps'] / 1e6:g} Mbit/s, {link['rtt_ns'] / 1e6:g} ms, buffer {buffer_text}, {aqm}, "
        f"loss {link.get('loss_probability', 0):g}, {len(result.flows)} flow(s), {result.spec['duration_ns'] / 1e9:g} s"
    )


def _overview(result: RunResult) -> str:
    validity = result.validity
    if validity is None:
        badge = '<span class="badge ok">simulated: no validity checks needed</span>'
    elif validity.get("valid", True):
        badge = '<span class="badge ok">valid run</span>'
    else:
        reasons = "; ".join(map(str, validity.get("reasons", []))) or "no reason given"
        badge = f'<span class="badge bad">INVALID RUN</span> {esc(reasons)}'
    return (
        f"<p>{badge}</p><p>{esc(_steady_text(result.steady_state))}</p><h3>Bottleneck</h3>"
        + key_value_table((key, value) for key, value in result.bottleneck.items() if value is not None and key in _shown(result, [key]))
    )


def _shown(result: RunResult, names: Any) -> list[str]:
    """The metrics worth a row: `whole_run_*` only beside a warm-up (without one they repeat
    the window's values)."""
    warmup = (result.spec.get("warmup_ns") or 0) > 0
    return [name for name in names if warmup or not str(name).startswith("whole_run_")]


def _steady_text(state: dict[str, Any] | None) -> str:
    if not state:
        return "Steady state: not judged."
    whole = " (whole_run_* the whole run)" if state["window_start_s"] > 0 else ""
    window = f"Metrics cover [{state['window_start_s']:g}, {state['window_end_s']:g}] s{whole}. "
    if state.get("converged") is None:
        return window + f"Steady state: not judged ({state.get('reason')})."
    if state["converged"]:
        return window + f"Steady state: converged (shares moved {state['share_drift_pts']:.1f} points between the last two quarters)."
    return window + (
        f"NOT CONVERGED: shares moved {state['share_drift_pts']:.1f} points between the last two quarters and the window's "
        f"shares are {state.get('startup_bias_pts') or 0:.1f} points from its last half's (threshold {state['threshold_pts']:g})."
    )


def share_chart(result: RunResult, labels: dict[int, str]) -> dict[str, Any] | None:
    """Each flow's rolling share of the link, with the warm-up and the two quarters the
    steady-state verdict compares shaded."""
    duration_s = result.spec["duration_ns"] / 1e9
    window_s = share_window_s(duration_s)
    shares = link_shares_over_time(result.flow_series, rate_bps=result.spec["bottleneck"]["rate_bps"], window_s=window_s)
    if shares.empty:
        return None
    lines = []
    for flow_id, label in labels.items():
        rows = shares.loc[shares["flow_id"] == flow_id, ["time_s", "share"]]
        if not rows.empty:
            rows, _ = plots.bucketed(rows, "time_s", {"share": "mean"})
            lines.append(plots.Line(label, rows["time_s"], rows["share"] * 100, plots.flow_colour(flow_id)))
    state = result.steady_state or {}
    start = float(state.get("window_start_s", 0.0))
    end = float(state.get("window_end_s", duration_s))
    quarter = (end - start) / 4
    shapes = [
        {"type": "rect", "xref": "x", "yref": "paper", "x0": x0, "x1": x1, "y0": 0, "y1": 1, "fillcolor": colour, "opacity": 0.12, "line": {"width": 0}}
        for x0, x1, colour in ((0.0, start, "#888888"), (end - 2 * quarter, end - quarter, "#1f77b4"), (end - quarter, end, "#ff7f0e"))
        if x1 > x0
    ]
    title = f"Share of the link per flow, rolling {window_s:g} s (grey: warm-up; blue, orange: the quarters the verdict compares)"
    return plots.time_chart(title, "% of the link's goodput", "%", lines, shapes=shapes)


def _event_counts(events: pd.DataFrame) -> str:
    """How many events of each kind each flow (or the bottleneck) had; the rows are in events.parquet."""
    counts = events.assign(flow=events["flow_id"].astype("string").fillna("bottleneck")).pivot_table(
        index="flow", columns="kind", values="time_s", aggfunc="count", fill_value=0
    )
    return frame_table(counts.reset_index()) + '<p class="muted">Every event with its time and detail is in events.parquet.</p>'


def _flat(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    items: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            items += _flat(value, f"{name}.")
        else:
            items.append((name, value))
    return items


def flow_charts(series: pd.DataFrame, labels: dict[int, str]) -> list[dict[str, Any]]:
    """One chart per metric any flow reports, one trace per flow that reports it."""
    charts = []
    for column, title, axis, unit in FLOW_METRICS:
        lines = []
        for flow_id, label in labels.items():
            rows = series.loc[series["flow_id"] == flow_id, ["time_s", column]].dropna()
            if rows.empty:
                continue  # e.g. a CUBIC flow in a BBR-only chart
            rows, width = plots.bucketed(rows, "time_s", {column: "mean"})
            lines.append(plots.Line(label, rows["time_s"], rows[column], plots.flow_colour(flow_id)))
        if lines:
            charts.append(plots.time_chart(title, axis, unit, lines))
    return charts


def queue_charts(result: RunResult) -> list[dict[str, Any]]:
    queue = result.queue_series
    limit = result.spec["bottleneck"].get("queue_limit_bytes")
    charts = []
    for column, title, axis, unit, how in QUEUE_METRICS:
        rows = queue[["time_s", column]].dropna()
        if rows.empty:
            continue  # ce_marks from an engine or result that has none
        rows, width = plots.bucketed(rows.astype({column: "float64"}), "time_s", {column: how})
        if width is not None and how == "sum":
            title = f"{title.replace(' per sample', '')} per {width * 1e3:.3g} ms"
        shapes = None
        if column == "queue_bytes" and limit is not None:
            # The buffer as a dashed line (a shape, so the chart keeps one trace).
            shapes = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": limit, "y1": limit, "line": {"dash": "dash", "color": "#d62728", "width": 1}}]
            title = f"{title} (dashed: buffer {limit:,} B)"
        charts.append(plots.time_chart(title, axis, unit, [plots.Line(column, rows["time_s"], rows[column], "#1d2f4f")], shapes=shapes))
    return charts


def state_chart(result: RunResult, labels: dict[int, str]) -> dict[str, Any] | None:
    """CC mode (BBR state, slow start / congestion avoidance) and Linux loss state per flow."""
    duration_s = result.spec["duration_ns"] / 1e9
    ends = {int(row.flow_id): _end(row, duration_s) for row in result.flows.itertuples()}
    events = result.events
    rows = []
    for flow_id, label in labels.items():
        for kind, name in (("cc_mode", "mode"), ("ca_state", "loss state")):
            changes = events[(events["kind"] == kind) & (events["flow_id"] == flow_id)]
            changes = list(zip(changes["time_s"].tolist(), changes["detail"].tolist(), strict=True))
            if not changes and kind == "cc_mode":
                changes = _sampled_changes(result.flow_series, flow_id)
            if changes:
                rows.append((f"{label} {name}", _segments(changes, ends[flow_id])))
    return plots.state_bands("CC mode and loss state per flow", rows) if rows else None


def _end(row: Any, duration_s: float) -> float:
    end = getattr(row, "end_s", None)
    return float(end) if end is not None and pd.notna(end) else duration_s


def _sampled_changes(series: pd.DataFrame, flow_id: int) -> list[tuple[float, str]]:
    """Where the sampled cc_mode changes, for an engine that records no mode events."""
    rows = series.loc[series["flow_id"] == flow_id, ["time_s", "cc_mode"]].dropna()
    changes: list[tuple[float, str]] = []
    for time_s, mode in zip(rows["time_s"].tolist(), rows["cc_mode"].tolist(), strict=True):
        if not changes or changes[-1][1] != mode:
            changes.append((time_s, str(mode)))
    return changes


def _segments(changes: list[tuple[float, str]], end_s: float) -> list[tuple[float, float, str]]:
    segments = []
    for index, (start, state) in enumerate(changes):
        stop = changes[index + 1][0] if index + 1 < len(changes) else max(end_s, start)
        segments.append((float(start), float(stop), str(state)))
    return segments
