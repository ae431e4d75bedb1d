"""`cclab validate --set quick` end to end: both engines, the report, and resuming."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from cclab.results import RunResult
from cclab.store import finished_runs
from conftest import run_cli
from kernelcase import host_timing_only, requires_kernel_engine

pytestmark = requires_kernel_engine


def test_validate_runs_both_engines_reports_every_case_and_reuses_finished_runs(tmp_path: Path) -> None:
    out = tmp_path / "validate"
    done = run_cli("validate", "--set", "quick", "--out", out)
    assert done.returncode == 0, done.stderr
    assert "goodput median |error|" in done.stdout
    runs = finished_runs(out)
    engines = [RunResult.read(path).provenance["engine"] for path in runs.values()]
    # Four runs each (the mixed case twice); an invalid kernel run is run once more,
    # replacing the first attempt.
    assert sorted(engines) == ["kernel"] * 4 + ["sim"] * 4
    with open(out / "comparison.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    summary = (out / "summary.md").read_text(encoding="utf-8")
    compared = {row["case"] for row in rows}
    left_out = summary.count("kernel run invalid")
    assert len(compared) + left_out == 3
    if not compared:
        # validate compares valid kernel runs only; a host that made all three late leaves
        # nothing to judge the report or the reuse by (kernelcase.assert_sound).
        late = [RunResult.read(path).validity["reasons"] for path in runs.values() if RunResult.read(path).provenance["engine"] == "kernel"]
        assert all(host_timing_only(reasons) for reasons in late), late
        pytest.skip(f"host timing cannot judge this run (every kernel run late: {late[0][0]})")
    for row in rows:
        # Goodput is bounded by the link: 20 Mbit/s, less headers.
        assert 0 < float(row["sim_goodput_mbps"]) <= 20 and 0 < float(row["kernel_goodput_mbps"]) <= 20
        assert (out / "figures" / f"{row['case']}.png").stat().st_size > 10_000
        assert f"figures/{row['case']}.png" in summary
    assert (out / "figures" / "goodput_scatter.png").is_file()

    # Every call runs an invalid kernel run once more (by design), and its case's simulator
    # runs then follow the new run's starts: only the other cases' runs must stay as they are.
    retried = {_case(path) for path in runs.values() if (RunResult.read(path).validity or {}).get("valid") is False}
    stored = {key: path.stat().st_mtime_ns for key, path in runs.items() if _case(path) not in retried}
    if not stored:
        # Every case holds an invalid kernel run, which each call runs again: nothing is left
        # to judge the reuse by. Only the host may have caused that.
        late = [RunResult.read(path).validity["reasons"] for path in runs.values() if (RunResult.read(path).validity or {}).get("valid") is False]
        assert all(host_timing_only(reasons) for reasons in late), late
        pytest.skip(f"host timing cannot judge the reuse (every case has a late kernel run: {late[0][0]})")
    again = run_cli("validate", "--set", "quick", "--out", out)
    assert again.returncode == 0, again.stderr
    # Finished runs are reused, not run again.
    assert {key: path.stat().st_mtime_ns for key, path in finished_runs(out).items() if _case(path) not in retried} == stored
    assert len(stored) >= 2  # a case's two runs were reused

    # --case: that case alone, from the runs already there.
    one = sorted(compared - retried)[0]
    only = run_cli("validate", "--set", "quick", "--case", one, "--out", out)
    assert only.returncode == 0, only.stderr
    with open(out / "comparison.csv", encoding="utf-8") as handle:
        assert {row["case"] for row in csv.DictReader(handle)} == {one}
    assert {key: path.stat().st_mtime_ns for key, path in finished_runs(out).items() if _case(path) not in retried} == stored


def _case(run_dir: Path) -> str:
    return json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["axis_values"]["case"]

