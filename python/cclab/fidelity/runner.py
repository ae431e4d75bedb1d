"""`cclab validate`: run a validation set on both engines, compare, write the report.

Runs go into `OUT/runs/` through the sweep runner (atomic, resumable, Ctrl-C keeps what
finished), keyed by config, engine and model version: a rerun only runs what is missing,
and a changed simulator reruns only the simulator's side. The simulator's runs go first,
in parallel; the kernel's follow one at a time, since kernel runs share the host. A
kernel run that fails its validity checks is run once more; if it fails again its case
is reported but left out of the figures of merit.
"""

from __future__ import annotations

import json
import shutil
import sys
import time

from pathlib import Path

import pandas as pd

from cclab.errors import CclabError, SpecError
from cclab.fidelity.compare import CaseComparison, ValidationReport, compare_case, summarize
from cclab.fidelity.report import write_report
from cclab.fidelity.sets import Case, ValidationSet, get_set
from cclab.results import RunResult
from cclab.sweep import Expansion, RunSpec, default_jobs, run_key, run_planned

ENGINES = ("sim", "kernel")


def _plan(cases: list[Case], engine: str) -> dict[str, list[RunSpec]]:
    """Each case's runs on `engine`: one per repetition, seeds counting up from the case's."""
    planned = {}
    for case in cases:
        base = case.scenario()
        planned[case.name] = []
        for repetition in range(case.repetitions):
            scenario = base.model_copy(update={"seed": base.seed + repetition})
            planned[case.name].append(RunSpec(run_key(scenario.resolve(), engine), scenario, {"case": case.name}, repetition, engine))
    return planned


def _progress(line: str) -> None:
    sys.stderr.write(line + "\n")


def run_validation(
    set_name: str,
    out_dir: Path,
    *,
    jobs: int | None = None,
    progress: bool = True,
    retry_invalid: bool = True,
) -> ValidationReport:
    from cclab.store import finished_runs

    started = time.perf_counter()
    validation_set = get_set(set_name)
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecError(f"--out {out_dir}: exists and is not a directory")
    plans = {engine: _plan(validation_set.cases, engine) for engine in ENGINES}
    # Check the kernel side before the simulator's runs: no root or no tc fails here.
    # On a cluster the kernel runs go to other hosts, which check themselves.
    from cclab.engines.kernel.preflight import preflight
    from cclab.executor_choice import current_executor

    refused: dict[str, str] = {}  # case -> why this host's kernel engine cannot run it
    if current_executor().kind == "local":
        first_error: CclabError | None = None
        for name, specs in plans["kernel"].items():
            try:
                preflight(specs[0].scenario.resolve())
            except CclabError as error:
                refused[name] = error.line
                first_error = first_error or error
        # Nothing runnable (no root, no tc): the whole set is refused in one line.
        if first_error is not None and len(refused) == len(plans["kernel"]):
            raise first_error
    else:
        current_executor().preflight(kernel=True)
    # A case the kernel engine refuses here (e.g. a CC this kernel lacks) is left out, with why.
    for name in refused:
        for engine in ENGINES:
            plans[engine].pop(name)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "set.json").write_text(
        json.dumps({"set": validation_set.name, "cases": [{"name": c.name, "regime": c.regime, "pair": c.pair, "spec": c.spec} for c in validation_set.cases]}, indent=2)
        + "\n",
        encoding="utf-8",
    )
    for engine in ENGINES:
        engine_jobs = jobs if jobs is not None and engine == "sim" else default_jobs(engine)
        expansion = Expansion(runs=[spec for specs in plans[engine].values() for spec in specs])
        if progress:
            _progress(f"{validation_set.name}: {len(validation_set.cases)} cases, {len(expansion.runs)} runs on the {engine} engine")
        run_planned(f"validate-{validation_set.name}-{engine}", expansion, out_dir, engine_label=engine, jobs=engine_jobs, progress=progress)
        if engine == "kernel" and retry_invalid:
            invalid = [spec for spec in expansion.runs if _invalid(out_dir, spec.run_key)]
            if invalid:
                if progress:
                    _progress(f"running {len(invalid)} invalid kernel run(s) once more: " + ", ".join(s.axis_values["case"] for s in invalid))
                for spec in invalid:
                    shutil.rmtree(out_dir / "runs" / spec.run_key)
                run_planned(f"validate-{validation_set.name}-kernel-retry", Expansion(runs=invalid), out_dir, engine_label=engine, jobs=1, progress=progress)

    finished = finished_runs(out_dir)
    comparisons, excluded = [], []
    shown: dict[str, dict[str, RunResult]] = {}  # case -> engine -> the run its figure draws
    for case in validation_set.cases:
        if case.name in refused:
            excluded.append(f"{case.name}: the kernel engine cannot run it here ({refused[case.name]})")
            continue
        keys = {engine: [spec.run_key for spec in plans[engine][case.name]] for engine in ENGINES}
        if not all(key in finished for engine in ENGINES for key in keys[engine]):
            excluded.append(f"{case.name}: a run failed (see failures.jsonl)")
            continue
        sims = [RunResult.read(finished[key]) for key in keys["sim"]]
        kernels = {key: RunResult.read(finished[key]) for key in keys["kernel"]}
        valid = {key: run for key, run in kernels.items() if (run.validity or {}).get("valid", True)}
        if not valid:
            reasons = "; ".join((next(iter(kernels.values())).validity or {}).get("reasons", []))
            excluded.append(f"{case.name}: kernel run invalid ({reasons})")
            continue
        comparisons.append(compare_case(case, sims, list(valid.values())))
        shown[case.name] = {"sim": sims[0], "kernel": next(iter(valid.values()))}
    summary = summarize(comparisons)
    pd.DataFrame([c.row() for c in comparisons]).to_csv(out_dir / "comparison.csv", index=False)
    report = ValidationReport(validation_set, out_dir, comparisons, excluded, summary, time.perf_counter() - started, out_dir / "summary.md")
    write_report(report, shown)
    return report


def _invalid(out_dir: Path, key: str) -> bool:
    meta = out_dir / "runs" / key / "result.json"
    if not meta.is_file():
        return False
    validity = json.loads(meta.read_text(encoding="utf-8")).get("validity") or {}
    return validity.get("valid") is False
