"""Plotly figures as plain dicts ({"data": [...], "layout": {...}}), drawn by plotly.js.

No Python plotting API is needed: the report writes these dicts as JSON. Long series are
averaged into at most MAX_POINTS time buckets per trace, so a 60 s run sampled every
millisecond stays a few hundred kilobytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from cclab.report.page import plain

MAX_POINTS = 3000

# One colour per flow, the same in every chart (a flow absent from one chart keeps its colour).
FLOW_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]

# CC modes (BBR states, Reno/CUBIC phases) and Linux ca_states, each a fixed colour.
STATE_COLOURS = {
    "startup": "#d62728", "drain": "#ff9896", "probe_bw": "#2ca02c", "probe_bw_down": "#98df8a",
    "probe_bw_cruise": "#2ca02c", "probe_bw_refill": "#17becf", "probe_bw_up": "#1f77b4", "probe_rtt": "#9467bd",
    "slow_start": "#ff7f0e", "congestion_avoidance": "#1f77b4",
    "open": "#c7e9c0", "disorder": "#fdd0a2", "cwr": "#bcbddc", "recovery": "#fd8d3c", "loss": "#a50f15",
}  # fmt: skip
_OTHER_STATE_COLOURS = ["#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#393b79", "#637939"]


def flow_colour(flow_id: int) -> str:
    return FLOW_COLOURS[flow_id % len(FLOW_COLOURS)]


def _values(values: Any) -> list[Any]:
    return [plain(v) for v in (values.tolist() if hasattr(values, "tolist") else values)]


def bucketed(frame: pd.DataFrame, time_column: str, how: dict[str, str], max_points: int = MAX_POINTS) -> tuple[pd.DataFrame, float | None]:
    """At most `max_points` rows: rows grouped into equal time buckets, each column reduced
    by `how` ("mean" or "sum"); the bucket width in seconds, or None if nothing was merged."""
    if len(frame) <= max_points:
        return frame, None
    start, end = float(frame[time_column].min()), float(frame[time_column].max())
    width = (end - start) / max_points or 1.0
    bucket = ((frame[time_column] - start) // width).clip(upper=max_points - 1)
    grouped = frame.groupby(bucket, sort=True)
    reduced = grouped.agg({time_column: "mean", **how})
    return reduced.reset_index(drop=True), width


@dataclass(frozen=True)
class Line:
    name: str
    x: Sequence[Any]
    y: Sequence[Any]
    colour: str | None = None


def time_chart(title: str, y_title: str, unit: str, lines: Sequence[Line], *, step: bool = False, shapes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Lines against time, one trace each; hovering shows the trace's name, time and value."""
    data = []
    for line in lines:
        trace: dict[str, Any] = {
            "type": "scatter",
            "mode": "lines",
            "name": line.name,
            "x": _values(line.x),
            "y": _values(line.y),
            "hovertemplate": f"{line.name}<br>t = %{{x:.3f}} s<br>%{{y:.4~g}} {unit}<extra></extra>",
        }
        if line.colour:
            trace["line"] = {"color": line.colour, "width": 1.5}
        if step:
            trace["line"] = {**trace.get("line", {}), "shape": "hv"}
        data.append(trace)
    layout = _layout(title, "time (s)", y_title)
    layout["hovermode"] = "x"
    if shapes:
        layout["shapes"] = shapes
    return {"data": data, "layout": layout}


def state_bands(title: str, rows: Sequence[tuple[str, Sequence[tuple[float, float, str]]]]) -> dict[str, Any]:
    """Coloured bands: each row (a flow's CC mode or loss state) is a run of (start, end, state)
    segments drawn as horizontal bars; one trace per state, named in the legend."""
    by_state: dict[str, dict[str, list[Any]]] = {}
    for label, segments in rows:
        for start, end, state in segments:
            entry = by_state.setdefault(state, {"y": [], "x": [], "base": [], "customdata": []})
            entry["y"].append(label)
            entry["x"].append(end - start)
            entry["base"].append(start)
            entry["customdata"].append([round(start, 6), round(end, 6)])
    others = iter(_OTHER_STATE_COLOURS * 10)
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": state,
            **values,
            "marker": {"color": STATE_COLOURS.get(state) or next(others)},
            "hovertemplate": f"%{{y}}: {state}<br>%{{customdata[0]:.3f}} – %{{customdata[1]:.3f}} s<extra></extra>",
        }
        for state, values in by_state.items()
    ]
    layout = _layout(title, "time (s)", "")
    layout["barmode"] = "overlay"
    layout["bargap"] = 0.25
    layout["height"] = 140 + 34 * len(rows)
    layout["legend"] = {"orientation": "v", "x": 1.01, "y": 1}
    # The first flow on top.
    layout["yaxis"] = {"categoryorder": "array", "categoryarray": [label for label, _ in reversed(rows)], "automargin": True}
    return {"data": data, "layout": layout}


def points_chart(title: str, x_title: str, y_title: str, series: Sequence[dict[str, Any]], *, categorical_x: bool) -> dict[str, Any]:
    """Markers (one trace per series dict with name, x, y, text) for values across a sweep axis."""
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": s["name"],
            "x": _values(s["x"]),
            "y": _values(s["y"]),
            "text": _values(s["text"]),
            "marker": {"size": 8, "opacity": 0.8},
            "hovertemplate": f"{s['name']}<br>{x_title} = %{{x}}<br>{y_title} = %{{y:.4~g}}<br>%{{text}}<extra></extra>",
        }
        for s in series
    ]
    layout = _layout(title, x_title, y_title)
    layout["hovermode"] = "closest"
    if categorical_x:
        layout["xaxis"]["type"] = "category"
    return {"data": data, "layout": layout}


def stacked_bars(title: str, x_title: str, y_title: str, categories: Sequence[str], series: Sequence[dict[str, Any]]) -> dict[str, Any]:
    data = [
        {
            "type": "bar",
            "name": s["name"],
            "x": list(categories),
            "y": _values(s["y"]),
            "hovertemplate": f"%{{x}}<br>{s['name']}: %{{y:.4~g}} {y_title}<extra></extra>",
        }
        for s in series
    ]
    layout = _layout(title, x_title, y_title)
    layout["barmode"] = "stack"
    layout["legend"] = {"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 1, "xanchor": "right"}
    layout["hovermode"] = "closest"
    layout["xaxis"]["type"] = "category"
    return {"data": data, "layout": layout}


def heatmap(title: str, x: Sequence[Any], y: Sequence[Any], z: np.ndarray, *, x_title: str, y_title: str, z_title: str, hover: list[list[str]] | None = None) -> dict[str, Any]:
    """One heatmap trace on categorical axes, coloured around zero: red above (BBR ahead), blue below."""
    trace: dict[str, Any] = {
        "type": "heatmap",
        "x": [str(v) for v in x],
        "y": [str(v) for v in y],
        "z": [[plain(v) for v in row] for row in z.tolist()],
        "zmid": 0,
        "colorscale": "RdBu",
        "colorbar": {"title": {"text": z_title}},
        "hoverongaps": False,
    }
    if hover is not None:
        trace["customdata"] = hover
        trace["hovertemplate"] = f"{x_title} %{{x}}, {y_title} %{{y}}<br>{z_title} = %{{z:.4~g}}<br>%{{customdata}}<extra></extra>"
    else:
        trace["hovertemplate"] = f"{x_title} %{{x}}, {y_title} %{{y}}<br>{z_title} = %{{z:.4~g}}<extra></extra>"
    layout = _layout(title, x_title, y_title)
    layout["xaxis"]["type"] = "category"
    layout["yaxis"]["type"] = "category"
    return {"data": [trace], "layout": layout}


def _layout(title: str, x_title: str, y_title: str) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 14}},
        "xaxis": {"title": {"text": x_title}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "automargin": True},
        "margin": {"l": 60, "r": 20, "t": 40, "b": 45},
        "legend": {"orientation": "h", "y": -0.25},
        "hoverlabel": {"namelength": -1},
    }
