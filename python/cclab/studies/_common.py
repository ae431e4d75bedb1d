"""What the issue-4 studies share: running a sweep into the study folder and reading
back only its runs, markdown tables, verdicts and figure saving.

A module whose name starts with `_` is not a study (see `cclab.studies.discover`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from cclab.analysis.figures import save_figure
from cclab.sweep import Sweep
from cclab.sweep import Sweep, expand

# Sample series more coarsely than a single run does: studies read per-flow totals, and
# a 640-run grid with 1 ms queue samples would store tens of millions of rows.
STUDY_FLOW_SAMPLE_INTERVAL_MS = 500.0
STUDY_QUEUE_SAMPLE_INTERVAL_MS = 100.0


@dataclass
class StudyCall:
    """One `cclab reproduce`: every study sweep runs at least `seeds` seeds per point, and
    `run_keys` collects the runs it planned, so that what run_study appends (transient
    count, spread) covers this call's runs, not a folder's runs of an older model."""

    seeds: int = 1
    run_keys: set[str] = field(default_factory=set)


_CALL: ContextVar[StudyCall | None] = ContextVar("study_call", default=None)


@contextmanager
def study_call(seeds: int = 1) -> Iterator[StudyCall]:
    call = StudyCall(seeds)
    token = _CALL.set(call)
    try:
        yield call
    finally:
        _CALL.reset(token)


def progress(line: str) -> None:
    sys.stderr.write(line + "\n")


def run_study_sweep(
    sweep: Sweep, out_dir: Path, *, engine: str, jobs: int | None, include_invalid: bool
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run `sweep` into `out_dir/runs/` (finished runs are skipped) and return the flows
    of exactly this sweep's runs, without the kernel engine's invalid runs unless asked.

    The second value tells what happened: runs, wall seconds, runs dropped as invalid.
    """
    from cclab.store import load_flows
    from cclab.sweep import run_sweep

    call = _CALL.get()
    if call is not None and call.seeds > sweep.repetitions:
        sweep = sweep.model_copy(update={"repetitions": call.seeds})
    started = time.monotonic()
    run_sweep(sweep, out_dir, engine=engine, jobs=jobs)
    wall_s = time.monotonic() - started
    keys = {spec.run_key for spec in expand(sweep, engine)}
    if call is not None:
        call.run_keys |= keys
    flows = load_flows(out_dir)
    flows = flows[flows["run_key"].isin(keys)].reset_index(drop=True)
    invalid = flows["valid"].eq(False) if "valid" in flows.columns else pd.Series(False, index=flows.index)
    dropped = int(flows.loc[invalid, "run_key"].nunique())
    if not include_invalid:
        flows = flows[~invalid].reset_index(drop=True)
    info = {"runs": len(keys), "wall_s": wall_s, "invalid_runs": dropped, "included_invalid": include_invalid}
    return flows, info


def save(figure: Figure, out_dir: Path, stem: str) -> str:
    """Save as PNG and SVG under `out_dir/figures/`; the markdown link to the PNG."""
    save_figure(figure, out_dir / "figures", stem)
    return f"![{stem}](figures/{stem}.png)"


def fmt(value: Any, digits: int = 1) -> str:
    """A number for a summary table: `n/a` for missing, thousands separated for counts."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, (int,)) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1000):
        return f"{int(value):,}"
    return f"{value:.{digits}f}"


def pct(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value * 100:.{digits}f}%"


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def verdict(holds: bool | None) -> str:
    return "n/a (not in this grid)" if holds is None else ("**holds**" if holds else "**does not hold**")


def run_facts(engine: str, quick: bool, info: dict[str, Any]) -> str:
    invalid = info["invalid_runs"]
    note = (
        f"{invalid} invalid run(s) {'included' if info['included_invalid'] else 'left out (use --include-invalid to keep them)'}"
        if invalid
        else "no invalid runs"
    )
    return (
        f"Engine: `{engine}`{' (quick subset)' if quick else ''}. Runs: {info['runs']}, "
        f"sweep wall time {info['wall_s']:.0f} s (runs already on disk are not redone); {note}."
    )


def one_flow_loss_sweep(
    name: str, *, duration_s: float, rate_mbps: float, rtt_ms: float, buffer: str, losses: Sequence[float], flow_axis: tuple[str, list[Any]]
) -> Sweep:
    """One flow across random-loss rates (rebbr, cliff); `flow_axis` varies the flow (CC or a whole flow table)."""
    axis_path, axis_values = flow_axis
    return Sweep(
        name=name,
        base={
            "duration_s": duration_s,
            "bottleneck": {"rate_mbps": rate_mbps, "rtt_ms": rtt_ms, "buffer": buffer},
            "flows": [{"cc": "bbr"}],
        },
        axes={"bottleneck.loss": list(losses), axis_path: list(axis_values)},
        flow_sample_interval_ms=STUDY_FLOW_SAMPLE_INTERVAL_MS,
        queue_sample_interval_ms=STUDY_QUEUE_SAMPLE_INTERVAL_MS,
    )


def user_cc(cc: str) -> tuple[str, str]:
    """A study's `--cc` (a user's C source in BBR's place): what its specs name (the source's
    absolute path, with `:NAME` if given) and what its results name (`FILE.c:MAP`). One-line
    SpecError if it is not a source or cannot be used."""
    from cclab.errors import SpecError
    from cclab.spec.bpf_source import is_source
    from cclab.spec.bpf_source import load as load_source

    if not is_source(cc):
        raise SpecError(f"--cc: a C source FILE.c[:NAME] of a congestion control (got {cc!r}); the built-in ones are in the grid already")
    try:
        label = load_source(cc, Path.cwd()).label
    except ValueError as error:
        raise SpecError(f"--cc: {error}") from None
    file, sep, name = cc.partition(":")
    return str(Path(file).resolve()) + sep + name, label
