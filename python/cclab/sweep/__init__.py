"""Sweeps: a base scenario, axes over its fields, repetitions and skip rules, expanded into runs.

A sweep file (TOML):

    name = "demo"                      # optional; default: the file's stem
    base = "../cubic.toml"             # or an inline [base] table in scenario-spec form
    repetitions = 2                    # seeds base.seed, base.seed + 1, ...
    queue_sample_interval_ms = 10      # default 10 for sweeps (a scenario's default is 1)

    [axes]                             # dotted spec field -> list of values
    "bottleneck.rate_mbps" = [10, 100]
    "bottleneck.buffer" = ["100KB", "1bdp"]
    "bottleneck.loss" = [0.0, 0.01]
    "flows.0" = [{ cc = "cubic" }, { cc = "bbr" }, { cc = "bbr", probe_bw_gain = 1.5 }]  # several fields at once

    [[skip]]                           # combinations not to run, listed with the reason
    reason = "the gain variant is only studied under loss"
    when = { "flows.0" = { cc = "bbr", probe_bw_gain = 1.5 }, "bottleneck.loss" = 0.0 }

`expand(sweep)` validates every combination before anything runs: a combination that
makes an invalid scenario is one `SpecError` line naming the axis and value.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cclab.errors import SpecError
from cclab.progress import SweepProgressBar
from cclab.spec import EngineName, _show

if TYPE_CHECKING:
    from cclab.executor import Executor
    from cclab.executor_choice import ExecutorChoice

from cclab.sweep.grid import (
    Expansion,
    RunSpec,
    Skipped,
    SkipRule,
    Sweep,
    expand,
    expand_all,
    run_key,
    value_at,
)

# ---- running --------------------------------------------------------------------------------


@dataclass
class SweepReport:
    out_dir: Path
    engine: str
    jobs: int
    planned: int  # distinct runs after skips
    done: int = 0  # run by this call
    resumed: int = 0  # found finished on disk, not run again
    failed: list[dict[str, Any]] = field(default_factory=list)  # run_key, axis_values, repetition, error
    skipped: list[Skipped] = field(default_factory=list)
    duplicates: int = 0
    interrupted: bool = False
    where: str = ""  # " on Ray (N nodes)" for a cluster; "" on this machine
    wall_s: float = 0.0
    run_wall_s: float = 0.0  # summed wall time of the runs done, as measured in the workers
    run_cpu_s: float = 0.0  # summed CPU time of the runs done (engine + storing), in the workers

    @property
    def remaining(self) -> int:
        return self.planned - self.done - self.resumed - len(self.failed)

    def summary_lines(self) -> list[str]:
        lines = [
            f"{self.out_dir}: {self.done} done, {self.resumed} resumed, {len(self.skipped)} skipped, "
            f"{len(self.failed)} failed"
            + (f", {self.remaining} not run (interrupted)" if self.interrupted else "")
            + f" of {self.planned} runs; {self.wall_s:.1f} s wall with {self.jobs} job{'s' if self.jobs != 1 else ''}{self.where}"
        ]
        reasons: dict[str, int] = {}
        for skipped in self.skipped:
            reasons[skipped.reason] = reasons.get(skipped.reason, 0) + 1
        lines += [f"  skipped {count}: {reason}" for reason, count in reasons.items()]
        if self.duplicates:
            lines.append(f"  {self.duplicates} combinations repeat an earlier run's config and share its result")
        for failure in self.failed[:5]:
            values = ", ".join(f"{p} = {_show(v)}" for p, v in failure["axis_values"].items())
            lines.append(f"  failed {failure['run_key']} ({values}; repetition {failure['repetition']}): {failure['error']}")
        if len(self.failed) > 5:
            lines.append(f"  ... {len(self.failed) - 5} more failures in {self.out_dir / 'failures.jsonl'}")
        return lines


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep: finished runs are stored; `report` says how far it got."""

    def __init__(self, report: SweepReport) -> None:
        super().__init__("sweep interrupted")
        self.report = report


def default_jobs(engine: str) -> int:
    """All CPUs for the simulator; one run at a time on the kernel (runs share the machine)."""
    if engine == "kernel":
        return 1
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_sweep(
    sweep: Sweep | str | PathLike[str],
    out_dir: str | PathLike[str],
    engine: str | None = None,
    jobs: int | None = None,
    progress: bool = True,
    executor: Executor | ExecutorChoice | None = None,
    force: bool = False,
) -> SweepReport:
    """Run every run of the sweep not yet in `out_dir/runs/`, in parallel; see module doc.

    `executor`: where the runs go (an `ExecutorChoice`, e.g. Ray; default: the one set by
    `use_executor`, else this machine's processes), or an `Executor` to use once.
    `force`: run even runs past the soft cost limits of `cclab.engines.budget`.

    Raises SpecError or RunTooCostly (nothing written) for an invalid sweep or a run it would
    refuse, and SweepInterrupted on Ctrl-C.
    """
    from cclab.engines import budget

    started = time.perf_counter()
    if not isinstance(sweep, Sweep):
        sweep = Sweep.from_toml(sweep)
    expansion = expand_all(sweep, engine)
    from cclab.store import runs_dir  # pandas: after the sweep file's refusals
    engines = sorted({spec.engine for spec in expansion.runs}) or [engine or sweep.base_scenario.engine]
    engine_label = "+".join(engines)
    jobs = min(default_jobs(engine_name) for engine_name in engines) if jobs is None else jobs
    if jobs < 1:
        raise SpecError(f"jobs: must be >= 1 (got {jobs})")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecError(f"--out {out_dir}: exists and is not a directory")
    # Every run is judged before the first starts: a grid with one runaway point is refused whole.
    for spec in expansion.runs:
        where = "run " + ", ".join(f"{axis}={value}" for axis, value in spec.axis_values.items()) if spec.axis_values else ""
        budget.check(budget.estimate(spec.scenario.resolve(), spec.engine), force=force, where=where)

    runs_dir(out_dir).mkdir(parents=True, exist_ok=True)
    _write_manifest(out_dir, sweep, engine_label, expansion)
    return run_planned(
        sweep.name, expansion, out_dir, engine_label=engine_label, jobs=jobs, progress=progress, executor=executor, started=started
    )


def run_planned(
    name: str,
    expansion: Expansion,
    out_dir: Path,
    *,
    engine_label: str,
    jobs: int,
    progress: bool = True,
    executor: Executor | ExecutorChoice | None = None,
    started: float | None = None,
) -> SweepReport:
    """Run the planned runs not yet stored in `out_dir/runs/` (see `run_sweep`); callers
    that plan runs themselves (the validation set) share the store, resume and Ctrl-C."""
    from cclab.executor import Executor, RunTask, clean_staging
    from cclab.executor_choice import current_executor
    from cclab.store import finished_runs, runs_dir, write_flows_table

    started = time.perf_counter() if started is None else started
    root = runs_dir(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    clean_staging(root)
    finished = finished_runs(out_dir)
    todo = [spec for spec in expansion.runs if spec.run_key not in finished]
    # Longest runs first, so that no long run is left alone on one worker at the end.
    todo.sort(key=_cost_estimate, reverse=True)
    report = SweepReport(
        out_dir=out_dir,
        engine=engine_label,
        jobs=min(jobs, max(len(todo), 1)),
        planned=len(expansion.runs),
        resumed=len(expansion.runs) - len(todo),
        skipped=expansion.skipped,
        duplicates=len(expansion.duplicates),
    )
    by_key = {spec.run_key: spec for spec in todo}
    tasks = [
        RunTask(
            run_key=spec.run_key,
            engine=spec.engine,
            scenario=spec.scenario.model_dump(mode="json"),
            axis_values=spec.axis_values,
            repetition=spec.repetition,
            sweep=name,
            runs_dir=str(root),
        )
        for spec in todo
    ]
    if not isinstance(executor, Executor):
        executor = (executor or current_executor()).make(report.jobs)
    bar = None
    try:
        with executor:
            outcomes = executor.submit(tasks)
            if tasks:
                report.jobs, report.where = min(executor.jobs, len(tasks)), executor.describe()
            bar = SweepProgressBar(len(tasks), name) if progress and tasks else None
            for outcome in outcomes:
                if outcome.ok:
                    report.done += 1
                    report.run_wall_s += outcome.wall_s
                    report.run_cpu_s += outcome.cpu_s
                else:
                    spec = by_key[outcome.run_key]
                    failure = {
                        "run_key": outcome.run_key,
                        "axis_values": spec.axis_values,
                        "repetition": spec.repetition,
                        "error": outcome.error,
                    }
                    report.failed.append(failure)
                    where = {"host": outcome.host, "ray_node_id": outcome.ray_node_id}
                    _append_failure(out_dir, {**failure, "engine": spec.engine, **where, "time": time.time()})
                if bar is not None:
                    bar.advance(len(report.failed))
        if bar is not None:
            bar.close()
            bar = None
        clean_staging(root)
        if report.done or not (out_dir / "flows.parquet").exists():
            write_flows_table(out_dir)
    except KeyboardInterrupt:
        report.interrupted = report.remaining > 0
        clean_staging(root, stopped=os.getpid())
        report.wall_s = time.perf_counter() - started
        raise SweepInterrupted(report) from None
    finally:
        if bar is not None:
            bar.close()
    report.wall_s = time.perf_counter() - started
    return report


def _cost_estimate(spec: RunSpec) -> float:
    """The run's estimated wall time (cclab.engines.budget): the longest runs start first."""
    from cclab.engines import budget

    return budget.estimate(spec.scenario.resolve(), spec.engine).wall_s


def _write_manifest(out_dir: Path, sweep: Sweep, engine: str, expansion: Expansion) -> None:
    manifest = {
        "sweep": sweep.model_dump(mode="json"),
        "engine": engine,
        "runs": [
            {"run_key": s.run_key, "engine": s.engine, "axis_values": s.axis_values, "repetition": s.repetition, "seed": s.seed}
            for s in expansion.runs
        ],
        "skipped": [{"axis_values": s.axis_values, "reason": s.reason} for s in expansion.skipped],
        "duplicates": [{"run_key": s.run_key, "axis_values": s.axis_values, "repetition": s.repetition} for s in expansion.duplicates],
    }
    folder = out_dir / "sweeps"
    folder.mkdir(exist_ok=True)
    staging = folder / f".{sweep.name}.json.partial"
    staging.write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(staging, folder / f"{sweep.name}.json")


def _append_failure(out_dir: Path, failure: dict[str, Any]) -> None:
    with open(out_dir / "failures.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(failure, allow_nan=False) + "\n")


# ---- helpers --------------------------------------------------------------------------------


__all__ = [
    "EngineName",
    "Expansion",
    "RunSpec",
    "SkipRule",
    "Skipped",
    "Sweep",
    "expand",
    "expand_all",
    "run_sweep",
    "SweepReport",
    "SweepInterrupted",
    "run_key",
    "value_at",
]
