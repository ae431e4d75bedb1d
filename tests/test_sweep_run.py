"""Running sweeps: parallel runs stored atomically, resume after SIGKILL, clean Ctrl-C, failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cclab.results import RunResult
from cclab.store import finished_runs, load_failures, load_flows
from cclab.sweep import Sweep, expand, run_sweep
from conftest import with_default_sigint

pytestmark = pytest.mark.sim

SMALL = {
    "base": {
        "duration_s": 2,
        "bottleneck": {"rate_mbps": 10, "rtt_ms": 10, "buffer": "1bdp"},
        "flows": [{"cc": "cubic"}],
    },
    "axes": {"bottleneck.rate_mbps": [10, 20], "flows.0.cc": ["cubic", "bbr"]},
    "repetitions": 2,
}

# Long enough per run (about 0.05-0.1 s at 1 Gbit/s) that a kill lands between runs.
SLOW_SWEEP = """\
name = "slow"
repetitions = 6

[base]
duration_s = 6
[base.bottleneck]
rate_mbps = 1000
rtt_ms = 10
[[base.flows]]
cc = "cubic"

[axes]
"flows.0.cc" = ["cubic", "bbr", "reno"]
"""


def stamps(out: Path) -> dict[str, tuple[int, int]]:
    """run_key -> (inode, mtime) of its result.json: any rewrite changes them."""
    result = {}
    for key, folder in finished_runs(out).items():
        info = (folder / "result.json").stat()
        result[key] = (info.st_ino, info.st_mtime_ns)
    return result


def assert_only_complete_runs(out: Path) -> None:
    for entry in (out / "runs").iterdir():
        assert not entry.name.startswith("."), f"leftover staging folder {entry.name}"
        names = {p.name for p in entry.iterdir()}
        assert {"result.json", "spec.json", "run.json", "flows.parquet", "flow_series.parquet", "queue_series.parquet", "events.parquet"} <= names
        RunResult.read(entry)


def test_a_sweep_runs_every_combination_in_parallel_and_a_rerun_redoes_nothing(tmp_path: Path) -> None:
    sweep = Sweep.from_dict(SMALL)
    report = run_sweep(sweep, tmp_path, jobs=2, progress=False)
    assert (report.done, report.resumed, report.failed, report.planned) == (8, 0, [], 8)
    assert set(finished_runs(tmp_path)) == {spec.run_key for spec in expand(sweep)}
    assert_only_complete_runs(tmp_path)
    for spec in expand(sweep):
        stored = RunResult.read(tmp_path / "runs" / spec.run_key)
        assert stored.spec == spec.scenario.resolve()
        meta = json.loads((tmp_path / "runs" / spec.run_key / "run.json").read_text())
        assert meta["axis_values"] == spec.axis_values and meta["repetition"] == spec.repetition
    before = stamps(tmp_path)
    again = run_sweep(sweep, tmp_path, jobs=2, progress=False)
    assert (again.done, again.resumed) == (0, 8)
    assert stamps(tmp_path) == before
    manifest = json.loads((tmp_path / "sweeps" / "sweep.json").read_text())
    assert len(manifest["runs"]) == 8


def test_a_run_that_raises_is_recorded_as_failed_and_the_sweep_goes_on(tmp_path: Path, monkeypatch) -> None:
    from cclab.engines.sim import SimEngine

    original = SimEngine.run

    def flaky(self, scenario):
        if scenario.bottleneck.rate_mbps == 20 and scenario.flows[0].cc == "bbr":
            raise RuntimeError("injected failure\nsecond line")
        return original(self, scenario)

    monkeypatch.setattr(SimEngine, "run", flaky)
    report = run_sweep(Sweep.from_dict(SMALL), tmp_path, jobs=1, progress=False)
    assert report.done == 6
    assert len(report.failed) == 2
    assert {f["error"] for f in report.failed} == {"RuntimeError: injected failure second line"}
    logged = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert sorted(f["run_key"] for f in logged) == sorted(f["run_key"] for f in report.failed)
    assert all(f["axis_values"] == {"bottleneck.rate_mbps": 20, "flows.0.cc": "bbr"} for f in logged)
    assert len(finished_runs(tmp_path)) == 6
    assert sorted(load_failures(tmp_path)["run_key"]) == sorted(f["run_key"] for f in report.failed)
    # Failed runs are not finished: the next sweep tries them again.
    monkeypatch.setattr(SimEngine, "run", original)
    again = run_sweep(Sweep.from_dict(SMALL), tmp_path, jobs=1, progress=False)
    assert (again.done, again.resumed, again.failed) == (2, 6, [])
    assert load_failures(tmp_path).empty


def start_sweep(sweep_file: Path, out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cclab", "sweep", str(sweep_file), "--out", str(out), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job would be
        preexec_fn=with_default_sigint,
    )


def wait_for_runs(out: Path, count: int, process: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while len(finished_runs(out)) < count:
        assert process.poll() is None, "the sweep ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_sweep_killed_with_sigkill_resumes_without_redoing_finished_runs(tmp_path: Path) -> None:
    sweep_file = tmp_path / "slow.toml"
    sweep_file.write_text(SLOW_SWEEP, encoding="utf-8")
    out = tmp_path / "out"
    process = start_sweep(sweep_file, out, "--jobs", "2")
    wait_for_runs(out, 3, process)
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    survived = stamps(out)
    assert 3 <= len(survived) < 18

    done = subprocess.run(
        [sys.executable, "-m", "cclab", "sweep", str(sweep_file), "--out", str(out), "--jobs", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"{18 - len(survived)} done, {len(survived)} resumed, 0 skipped, 0 failed of 18 runs" in done.stdout
    after = stamps(out)
    assert {key: after[key] for key in survived} == survived
    assert len(after) == 18
    assert_only_complete_runs(out)
    flows = load_flows(out)
    assert len(flows) == 18 and set(flows["run_key"]) == set(after)
    assert sorted(flows.groupby("cc")["seed"].apply(sorted).tolist()) == [[1, 2, 3, 4, 5, 6]] * 3


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_ctrl_c_stops_a_sweep_with_only_complete_runs_on_disk_and_a_rerun_finishes_it(jobs: str, tmp_path: Path) -> None:
    sweep_file = tmp_path / "slow.toml"
    sweep_file.write_text(SLOW_SWEEP, encoding="utf-8")
    out = tmp_path / "out"
    process = start_sweep(sweep_file, out, "--jobs", jobs)
    wait_for_runs(out, 2, process)
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert "not run (interrupted)" in stdout
    assert_only_complete_runs(out)
    kept = stamps(out)
    again = run_sweep(sweep_file, out, progress=False, jobs=2)
    assert again.resumed == len(kept) and again.done == 18 - len(kept)
    assert {key: stamps(out)[key] for key in kept} == kept


def test_a_worker_that_dies_fails_only_its_own_run_and_the_others_finish(tmp_path: Path, monkeypatch) -> None:
    from cclab.engines.sim import SimEngine

    original = SimEngine.run

    def deadly(self, scenario):
        # Workers are forked, so they run this patched method too.
        if scenario.bottleneck.rate_mbps == 20 and scenario.flows[0].cc == "bbr" and scenario.seed == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, scenario)

    monkeypatch.setattr(SimEngine, "run", deadly)
    report = run_sweep(Sweep.from_dict(SMALL), tmp_path, jobs=2, progress=False)
    assert [f["axis_values"] for f in report.failed] == [{"bottleneck.rate_mbps": 20, "flows.0.cc": "bbr"}]
    assert [f["repetition"] for f in report.failed] == [0]
    assert "worker process died" in report.failed[0]["error"]
    assert report.done == 7
    assert_only_complete_runs(tmp_path)
    assert not list((tmp_path / "runs").glob(".*"))


def test_the_demo_sweep_of_the_readme_runs_and_lists_what_it_skipped_and_why(tmp_path: Path) -> None:
    from conftest import EXAMPLES, run_cli

    out = tmp_path / "demo"
    done = run_cli("sweep", EXAMPLES / "sweeps" / "demo.toml", "--out", out, "--jobs", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "10 done, 0 resumed, 2 skipped, 0 failed of 10 runs" in lines[0]
    assert lines[1] == "  skipped 2: BBR's probe gain only matters where the buffer is shallow"
    assert "demo" in done.stderr and "10/10" in done.stderr  # the progress bar
    flows = load_flows(out)
    assert len(flows) == 10 and (flows["goodput_mbps"] > 0).all()
    assert (out / "flows.parquet").is_file()
    again = run_cli("sweep", EXAMPLES / "sweeps" / "demo.toml", "--out", out)
    assert "0 done, 10 resumed, 2 skipped" in again.stdout
