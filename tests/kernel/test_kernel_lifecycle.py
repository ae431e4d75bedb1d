"""Namespaces never outlive a run: normal end, failure, SIGINT, and a dead earlier owner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cclab.engines.kernel import KernelEngineError, preflight, run
from cclab.engines.kernel import netns as kernel_netns
from cclab.engines.kernel import traffic
from kernelcase import BASE_CONFIG, make_config, requires_kernel_engine

pytestmark = requires_kernel_engine
REPO = Path(__file__).resolve().parents[2]


# Other runs may be going on at the same time (the engine allows it), so each test
# looks only at the namespaces of the run it started.
def namespaces_of(run_id: str) -> list[str]:
    return [n for n in kernel_netns.list_cclab_namespaces() if n.startswith(f"{kernel_netns.NAME_PREFIX}{run_id}-")]


@pytest.fixture
def run_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the id of every run the test starts in this process."""
    from cclab.engines.kernel import engine

    ids: list[str] = []

    def recording_new_run_id() -> str:
        ids.append(kernel_netns.new_run_id())
        return ids[-1]

    monkeypatch.setattr(engine, "new_run_id", recording_new_run_id)
    return ids


def run_id_of_pid(pid: int) -> str | None:
    for record_path in kernel_netns.RUN_DIR.glob("*.json"):
        try:
            if json.loads(record_path.read_text()).get("pid") == pid:
                return record_path.stem
        except (OSError, ValueError):
            continue
    return None


def test_no_namespace_is_left_after_a_normal_run(run_ids: list[str]) -> None:
    result = run(make_config(duration_ns=1_000_000_000))
    assert result["flows"][0]["bytes_delivered"] > 0
    assert len(run_ids) == 1
    assert namespaces_of(run_ids[0]) == []


def test_no_namespace_is_left_after_a_run_that_fails_midway(monkeypatch: pytest.MonkeyPatch, run_ids: list[str]) -> None:
    seen: list[str] = []

    def failing_start_servers(*_args: object, **_kwargs: object) -> list:
        seen.extend(namespaces_of(run_ids[0]))
        raise RuntimeError("injected failure")

    monkeypatch.setattr(traffic, "start_servers", failing_start_servers)
    with pytest.raises(RuntimeError, match="injected failure"):
        run(make_config(duration_ns=1_000_000_000))
    assert len(seen) == 3  # router, receiver, one sender existed when it failed
    assert namespaces_of(run_ids[0]) == []


def test_no_namespace_is_left_after_sigint() -> None:
    config = make_config(duration_ns=30_000_000_000)
    code = f"import json, sys; from cclab.engines.kernel import run; run(json.loads({json.dumps(json.dumps(config))}))"
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'python'}:{REPO}"}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)
    run_id = None
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            run_id = run_id or run_id_of_pid(proc.pid)
            if run_id and len(namespaces_of(run_id)) == 3:
                break
            time.sleep(0.05)
        time.sleep(1.0)  # let traffic start
        assert run_id is not None
        assert len(namespaces_of(run_id)) == 3
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0
    assert b"KeyboardInterrupt" in stderr or b"Interrupted" in stderr
    assert namespaces_of(run_id) == []
    assert not (kernel_netns.RUN_DIR / f"{run_id}.json").exists()


def test_stale_namespaces_of_a_dead_owner_are_removed_and_live_ones_kept() -> None:
    dead = kernel_netns.RunNamespaces("deadbeef")
    dead.create("r")
    record = json.loads(dead.record_path.read_text())
    record["pid_start"] = "0"  # no live process started at tick 0: the owner is dead
    dead.record_path.write_text(json.dumps(record))
    live = kernel_netns.RunNamespaces("0badf00d")
    live.create("r")
    try:
        removed = kernel_netns.cleanup_stale()
        assert "cclab-deadbeef-r" in removed
        assert not any(name.startswith("cclab-0badf00d-") for name in removed)
        assert namespaces_of("deadbeef") == []
        assert namespaces_of("0badf00d") == ["cclab-0badf00d-r"]
    finally:
        live.destroy()
        dead.destroy()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bottleneck": {"rate_bps": 10_000_000_000}}, "beyond what this machine emulates faithfully"),
        ({"flows": [{"cc": "vegas"}]}, "modprobe tcp_vegas"),
        ({"flows": [{"cc": "bbr", "probe_bw_gain": 1.2345}]}, "probe_bw_gain 1.2345 has more than three decimals"),
    ],
)
def test_preflight_refuses_what_it_cannot_run_faithfully_in_one_line(change: dict, message: str) -> None:
    config = make_config(change.get("flows"), **change.get("bottleneck", {}))
    before = kernel_netns.list_cclab_namespaces()
    with pytest.raises(KernelEngineError, match=message) as info:
        preflight(config)
    assert "\n" not in info.value.line
    assert kernel_netns.list_cclab_namespaces() == before
    assert BASE_CONFIG["bottleneck"]["rate_bps"] == 50_000_000  # the shared base is untouched


def test_a_kernel_run_reports_its_progress_in_real_seconds_up_to_its_duration() -> None:
    import cclab
    import cclab.spec

    seen: list[tuple[float, float]] = []
    scenario = cclab.spec.load({"duration_s": 3, "bottleneck": {"rate_mbps": 50, "rtt_ms": 20}, "flows": [{"cc": "cubic"}]})
    started = time.monotonic()
    cclab.run(scenario, "kernel", progress=lambda done_s, total_s: seen.append((done_s, total_s)))
    wall_s = time.monotonic() - started
    done = [d for d, _ in seen]
    assert {t for _, t in seen} == {3.0}
    # Once a second while running: from the start to the end of the 3 s, never backwards.
    assert len(done) >= 3 and done == sorted(done)
    assert done[0] <= 1.0 and done[-1] >= 2.0
    assert done[-1] <= wall_s
