"""Plumbing shared by the many-flow studies (shallow-buffers, fairness-share, kfoury2021).

Not a study itself (no NAME): runs a grid through the sweep runner into `out_dir/runs/`,
returns the store's per-flow rows of exactly that grid with the axis values as columns,
reads a run's time series, and writes Markdown tables.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cclab.results import RunResult


@dataclass
class Grid:
    """One sweep's runs: `flows` has one row per flow per run (the store's columns plus
    one column per axis, named as the study asked), `invalid` the runs left out."""

    flows: pd.DataFrame
    invalid: pd.DataFrame
    out_dir: Path

    def run(self, run_key: str) -> RunResult:
        return RunResult.read(self.out_dir / "runs" / run_key)

    def runs(self) -> pd.DataFrame:
        """One row per run: run_key and the axis columns (and the store's run-level columns)."""
        return self.flows.drop_duplicates("run_key").reset_index(drop=True)


def run_grid(
    out_dir: Path,
    name: str,
    base: Mapping[str, Any],
    axes: Mapping[str, Sequence[Any]],
    *,
    columns: Mapping[str, str],
    engine: str,
    jobs: int | None,
    include_invalid: bool,
    skip: Sequence[Mapping[str, Any]] = (),
) -> Grid:
    """Run `base` over `axes` on `engine` (runs already on disk are not redone).

    `columns` names the column each axis's value goes in (e.g. {"bottleneck.buffer": "x_buffer"}),
    so that the study does not depend on how the store names axis columns. `skip` takes the
    sweep's skip rules ({"reason": ..., "when": {path: value}}).
    """
    from cclab.store import load_flows
    from cclab.sweep import Sweep, expand, run_sweep

    sweep = Sweep.from_dict({"name": name, "base": dict(base), "axes": {k: list(v) for k, v in axes.items()}, "skip": [dict(r) for r in skip]})
    sys.stderr.write(f"{name}: {len(expand(sweep, engine))} runs on the {engine} engine\n")
    run_sweep(sweep, out_dir, engine=engine, jobs=jobs)
    specs = expand(sweep, engine)
    labels = pd.DataFrame(
        [{"run_key": s.run_key, **{columns[path]: value for path, value in s.axis_values.items()}} for s in specs]
    )
    flows = load_flows(out_dir)
    flows = flows[flows["run_key"].isin(labels["run_key"])]
    flows = flows.drop(columns=[c for c in labels.columns if c != "run_key" and c in flows.columns])
    flows = flows.merge(labels, on="run_key", how="left")
    valid = flows["valid"].fillna(True).astype(bool) if "valid" in flows.columns else pd.Series(True, index=flows.index)
    invalid = flows[~valid].drop_duplicates("run_key")
    if not include_invalid:
        flows = flows[valid]
    return Grid(flows=flows.reset_index(drop=True), invalid=invalid.reset_index(drop=True), out_dir=Path(out_dir))


def bdp_label(value: float) -> str:
    """An axis value for a buffer of `value` BDP, as the spec writes it."""
    return f"{value:g}bdp"


def md_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[str], formats: Mapping[str, str] | None = None) -> str:
    """A Markdown table of `rows` with `columns`; `formats` maps a column to a format spec."""
    formats = formats or {}
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            if value is None or (isinstance(value, float) and value != value):
                cells.append("–")
            elif column in formats:
                cells.append(format(value, formats[column]))
            else:
                cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def invalid_note(grid: Grid, include_invalid: bool) -> str:
    """A sentence on runs the kernel engine marked invalid, with its reasons (empty if none)."""
    if grid.invalid.empty:
        return ""
    action = "included anyway (--include-invalid), flagged" if include_invalid else "left out of the numbers"
    reasons: set[str] = set()
    for run_key in grid.invalid["run_key"]:
        validity = grid.run(run_key).validity or {}
        reasons.update(str(r) for r in validity.get("reasons", []))
    why = f" Reasons: {'; '.join(sorted(reasons))}." if reasons else ""
    return f"\n{len(grid.invalid)} kernel run(s) failed the engine's validity checks and were {action}.{why}\n"


def verdict(confirmed: bool | None) -> str:
    if confirmed is None:
        return "**not testable here**"
    return "**confirmed**" if confirmed else "**contradicted**"
