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
from dataclasses import replace

from pathlib import Path

import pandas as pd

from cclab.errors import CclabError, SpecError
from cclab.fidelity.compare import SPREAD_MIN_REPETITIONS, CaseComparison, ValidationReport, compare_case, summarize
from cclab.fidelity.report import write_report
from cclab.fidelity.sets import Case, ValidationSet, requested
from cclab.results import RunResult
from cclab.spec import Scenario
from cclab.sweep import Expansion, RunSpec, default_jobs, run_key, run_planned

# The kernel runs first: each simulator run starts its flows when its kernel twin's did.
ENGINES = ("kernel", "sim")


def _plan(cases: list[Case], engine: str, kernel_starts: dict[str, list[list[float] | None]] | None = None) -> dict[str, list[RunSpec]]:
    """Each case's runs on `engine`: one per repetition, seeds counting up from the case's.
    `kernel_starts`: per case and repetition, how late each flow started on the kernel."""
    planned = {}
    for case in cases:
        base = case.scenario()
        planned[case.name] = []
        lateness = (kernel_starts or {}).get(case.name, [])
        for repetition in range(case.repetitions):
            scenario = base.model_copy(update={"seed": base.seed + repetition})
            if repetition < len(lateness) and lateness[repetition]:
                scenario = with_start_lateness(scenario, lateness[repetition])
            planned[case.name].append(RunSpec(run_key(scenario.resolve(), engine), scenario, {"case": case.name}, repetition, engine))
    return planned


def kernel_start_lateness_s(run_dir: Path) -> list[float] | None:
    """How much later than the earliest flow each flow's data began on a kernel run, against
    when the simulator begins it (one path RTT after its start, past the handshake); None
    without the record. Runs from before the first data segment was stamped are paired on
    their data SYNs instead (a bulk flow's aimed one path RTT before its start, a finite
    flow's at it). iperf3 clients launched while another starts up are late by a few ms
    (measured: p90 2.7 ms between flows of one RTT; a 20 ms flow launched after a 40 or 80
    ms one 0.4-12 ms), and a flow's data follows its SYN by two path RTTs plus 0.8-13.7 ms
    more (p50 1.7): enough to move who meets whose queue."""
    try:
        result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
        config = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    starts = (result.get("provenance") or {}).get("flow_starts") or []
    flows = config.get("flows") or []
    if len(starts) != len(flows):
        return None
    rtt_ns = config["bottleneck"]["rtt_ns"]
    pairs = list(zip(starts, flows, strict=True))
    if all(s.get("first_data_s") is not None for s in starts):
        late = [s["first_data_s"] - (f["start_ns"] + rtt_ns + f["extra_rtt_ns"]) / 1e9 for s, f in pairs]
    elif all(s.get("data_syn_s") is not None for s in starts):
        late = [s["data_syn_s"] - (f["start_ns"] - (0 if f.get("size_bytes") else rtt_ns + f["extra_rtt_ns"])) / 1e9 for s, f in pairs]
    else:
        return None
    earliest = min(late)
    return [round(x - earliest, 6) for x in late]


def with_start_lateness(scenario: Scenario, lateness_s: list[float]) -> Scenario:
    """The scenario with each flow (entries with a count split into single flows, in the
    order `resolve` numbers them) starting `lateness_s[flow_id]` later."""
    single = [entry.model_copy(update={"count": 1}) for entry in scenario.flows for _ in range(entry.count)]
    if len(single) != len(lateness_s):
        return scenario
    flows = [f.model_copy(update={"start_s": f.start_s + late}) for f, late in zip(single, lateness_s, strict=True)]
    return scenario.model_copy(update={"flows": flows})


def with_repetitions(validation_set: ValidationSet, repetitions: int) -> ValidationSet:
    """The set with each repetition case (SPREAD_MIN_REPETITIONS runs or more) run at least `repetitions` times."""
    cases = [
        replace(case, repetitions=max(case.repetitions, repetitions)) if case.repetitions >= SPREAD_MIN_REPETITIONS else case
        for case in validation_set.cases
    ]
    return replace(validation_set, cases=cases)


def _progress(line: str) -> None:
    sys.stderr.write(line + "\n")


def run_validation(
    set_name: str,
    out_dir: Path,
    *,
    jobs: int | None = None,
    progress: bool = True,
    retry_invalid: bool = True,
    repetitions: int | None = None,
    cases: list[str] | None = None,
) -> ValidationReport:
    """`repetitions`: at least this many runs an engine for the cases that compare medians
    and spreads (those of SPREAD_MIN_REPETITIONS runs or more); their first runs are reused.
    `cases`: only these cases of the set."""
    from cclab.store import finished_runs

    started = time.perf_counter()
    validation_set = requested(set_name, cases, repetitions)
    if repetitions is not None:
        validation_set = with_repetitions(validation_set, repetitions)
    if out_dir.exists() and not out_dir.is_dir():
        raise SpecError(f"--out {out_dir}: exists and is not a directory")
    plans = {"kernel": _plan(validation_set.cases, "kernel")}
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
        plans["kernel"].pop(name)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "set.json").write_text(
        json.dumps({"set": validation_set.name, "cases": [{"name": c.name, "regime": c.regime, "pair": c.pair, "spec": c.spec} for c in validation_set.cases]}, indent=2)
        + "\n",
        encoding="utf-8",
    )
    for engine in ENGINES:
        if engine == "sim":
            # Each simulator run starts its flows as late, relative to each other, as its
            # kernel twin's did: the comparison is then of the engines, not of the launches.
            finished_kernel = finished_runs(out_dir)
            kernel_starts = {
                name: [kernel_start_lateness_s(finished_kernel[spec.run_key]) if spec.run_key in finished_kernel else None for spec in specs]
                for name, specs in plans["kernel"].items()
            }
            cases = [case for case in validation_set.cases if case.name not in refused]
            plans["sim"] = _plan(cases, "sim", kernel_starts)
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
