"""The report of a sweep folder: goodput across each axis, goodput per run, the flows table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from cclab.analysis.spread import seed_spread, seed_spread_note
from cclab.report import plots
from cclab.report.page import Page, cell_text, esc, frame_table, grid
from cclab.store import load_failures, load_flows, load_series

# Network columns of the flows table that a sweep's axes may vary, with their axis titles.
NETWORK_AXES = {
    "rate_mbps": "rate (Mbit/s)",
    "rtt_ms": "RTT (ms)",
    "buffer": "buffer",
    "loss": "random loss",
    "aqm": "queue discipline",
    "n_flows": "flows",
    "duration_s": "duration (s)",
}
# Beyond this many runs a bar per run is unreadable: the axis charts remain.
MAX_BARS = 150
# A small sweep also shows each run's throughput over time, one chart per run.
MAX_RUN_CHARTS = 24


def render_sweep(out_dir: Path, title: str) -> str:
    flows = load_flows(out_dir)
    page = Page(title, _subtitle(out_dir, flows))
    if flows.empty:
        page.section("Runs", "<p>No finished runs yet.</p>")
        return page.html()
    network = [name for name in NETWORK_AXES if flows[name].nunique(dropna=True) > 1]
    # A flow field set in some runs only (a BBR gain beside plain CUBIC) varies too.
    flow_axes = [name for name in flows.columns if name.startswith("flows_") and flows[name].astype("string").nunique(dropna=False) > 1]
    flows = flows.assign(report_kind=_kinds(flows, flow_axes), report_run=_run_labels(flows, network + flow_axes))
    charts = [page.plot(figure) for figure in axis_charts(flows, network)]
    # Runs in the order of their axis values (buffers by the bytes they stand for).
    order = ["buffer_bytes" if name == "buffer" else name for name in network + flow_axes] + ["repetition", "run_key", "flow_id"]
    flows = flows.sort_values(order, kind="stable", key=_sortable).reset_index(drop=True)
    bars = run_chart(flows, ", ".join(network + flow_axes))
    if bars is not None:
        charts.append(page.plot(bars))
    page.section("Goodput", grid(charts) if charts else "<p>One run: nothing varies.</p>")
    page.section("Runs", frame_table(_runs_table(flows, network + flow_axes), sortable=True))
    if flows["repetition"].nunique() > 1:
        # Repetitions (seeds) of one point: how far they moved, per flow.
        spread = seed_spread(flows)
        spread = spread[[c for c in spread.columns if spread[c].nunique(dropna=False) > 1 or c in ("cc", "flow_id", "seeds", "median", "iqr")]]
        page.section("Run-to-run spread", f"<p>{esc(seed_spread_note(flows, table_file=None))}</p>" + frame_table(spread, sortable=True))
    if flows["run_key"].nunique() <= MAX_RUN_CHARTS:
        page.section("Throughput of each run", grid([page.plot(figure) for figure in run_throughput_charts(out_dir, flows)]))
    page.section("Flows table", frame_table(flows.drop(columns=["report_kind", "report_run"]), sortable=True))
    failures = load_failures(out_dir)
    if not failures.empty:
        page.section("Failed runs", frame_table(failures.assign(axis_values=failures["axis_values"].map(json.dumps))))
    return page.html()


def _subtitle(out_dir: Path, flows: pd.DataFrame) -> str:
    names = sorted(path.stem for path in (out_dir / "sweeps").glob("*.json"))
    sweeps = ", ".join(names) if names else "sweep"
    engines = ", ".join(sorted(flows["engine"].dropna().unique())) if not flows.empty else "-"
    return f"{sweeps}: {flows['run_key'].nunique()} finished run(s), {len(flows)} flow(s); engine {engines}"


def _sortable(column: pd.Series) -> pd.Series:
    # An axis column may mix types (a field some flows lack): compare those as text.
    return column if pd.api.types.is_numeric_dtype(column) else column.astype("string")


def _kinds(flows: pd.DataFrame, flow_axes: list[str]) -> pd.Series:
    """What tells flows apart in a chart: the CC, and flow-axis values besides the CC."""
    extra = [name for name in flow_axes if not name.endswith("_cc")]

    def kind(row: pd.Series) -> str:
        parts = [str(row["cc"])]
        parts += [f"{name.split('_', 2)[-1]}={cell_text(row[name])}" for name in extra if cell_text(row[name])]
        return ", ".join(parts)

    return flows.apply(kind, axis=1) if len(flows) else pd.Series(dtype="string")


def _run_labels(flows: pd.DataFrame, axes: list[str]) -> pd.Series:
    """A run's axis values ("20, 100KB, bbr"), made unique with its key where two runs share them."""

    def label(row: pd.Series) -> str:
        parts = [cell_text(row[name]) or "-" for name in axes]
        if flows["repetition"].nunique() > 1:
            parts.append(f"rep {row['repetition']}")
        return ", ".join(parts) or str(row["run_key"])

    labels = flows.apply(label, axis=1) if len(flows) else pd.Series(dtype="string")
    per_run = labels.groupby(flows["run_key"]).first()
    shared = set(per_run[per_run.duplicated(keep=False)])
    return pd.Series([f"{text} ({key})" if text in shared else text for text, key in zip(labels, flows["run_key"], strict=True)], index=flows.index)


def axis_charts(flows: pd.DataFrame, network: list[str]) -> list[dict[str, Any]]:
    """Goodput of each flow against each varying network axis, one trace per kind of flow."""
    charts = []
    for axis in network:
        categorical = not pd.api.types.is_numeric_dtype(flows[axis])
        # Buffers as written ("100KB", "1bdp") go in the order of the bytes they stand for.
        ordered = flows.sort_values(["buffer_bytes" if axis == "buffer" else axis, "run_key", "flow_id"])
        series = [
            {
                "name": kind,
                "x": group[axis].astype(str) if categorical else group[axis],
                "y": group["goodput_mbps"],
                "text": [f"run {r.run_key} flow {r.flow_id}: {r.report_run}" for r in group.itertuples()],
            }
            for kind, group in ordered.groupby("report_kind", sort=True)
        ]
        chart = plots.points_chart(f"Goodput per flow by {NETWORK_AXES[axis]}", NETWORK_AXES[axis], "goodput (Mbit/s)", series, categorical_x=categorical)
        if categorical:
            chart["layout"]["xaxis"].update(categoryorder="array", categoryarray=list(dict.fromkeys(ordered[axis].astype(str))))
        charts.append(chart)
    return charts


def run_chart(flows: pd.DataFrame, label_axes: str) -> dict[str, Any] | None:
    """Total goodput of each run, stacked by kind of flow; runs in the order of `flows`."""
    runs = flows.drop_duplicates("run_key")["report_run"].tolist()  # in the order given
    if len(runs) > MAX_BARS or len(runs) < 2:
        return None
    totals = flows.pivot_table(index="report_run", columns="report_kind", values="goodput_mbps", aggfunc="sum").reindex(runs)
    series = [{"name": kind, "y": totals[kind]} for kind in totals.columns]
    return plots.stacked_bars("Goodput per run (stacked by flow kind)", f"run: {label_axes or 'key'}", "Mbit/s", runs, series)


def run_throughput_charts(out_dir: Path, flows: pd.DataFrame) -> list[dict[str, Any]]:
    """Each run's throughput per flow against time, titled with the run's axis values."""
    runs = flows.drop_duplicates("run_key").set_index("run_key")["report_run"]
    series = load_series(out_dir, "flow_series", list(runs.index))
    ccs = flows.set_index(["run_key", "flow_id"])["cc"]
    charts = []
    for key, label in runs.items():
        rows = series[series["run_key"] == key]
        lines = [
            plots.Line(f"flow {flow_id} ({ccs.get((key, flow_id), '?')})", group["time_s"], group["throughput_mbps"], plots.flow_colour(int(flow_id)))
            for flow_id, group in rows.sort_values("time_s").groupby("flow_id", sort=True)
        ]
        charts.append(plots.time_chart(f"{label}", "Mbit/s", "Mbit/s", lines))
    return charts


def _runs_table(flows: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    grouped = flows.groupby("run_key", sort=True)
    table = grouped[["sweep", "engine", "repetition", *axes]].first()
    table["valid"] = grouped["valid"].all()
    table["flows"] = grouped.size()
    table["total goodput (Mbit/s)"] = grouped["goodput_mbps"].sum()
    table["retransmits"] = grouped["retrans_segments"].sum()
    table["utilization"] = grouped["bottleneck_utilization"].first() if "bottleneck_utilization" in flows else None
    return table.reset_index()

