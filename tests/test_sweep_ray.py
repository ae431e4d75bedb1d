"""Sweeps on a Ray cluster: a head and a second node, each a `ray start` on this machine.

The cluster is small (one CPU per node, 100 MB object stores, no dashboard) and is
stopped at the end of the module, even when a test fails. Deselect with -m 'not ray'.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from cclab.executor_choice import ExecutorChoice
from cclab.store import finished_runs, load_failures, load_flows, load_series
from cclab.sweep import Expansion, RunSpec, Sweep, expand, run_planned, run_sweep

pytestmark = [pytest.mark.ray, pytest.mark.sim]

# The nodes, this process and the drivers it starts share a token of their own, so that
# nothing else can use the test cluster and no token in ~/.ray changes the test. Ray reads
# these once, when first imported: so before the import below.
os.environ["RAY_AUTH_MODE"] = "token"
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"

ray = pytest.importorskip("ray")

from cclab.executor_ray import KERNEL_RESOURCE, connect  # noqa: E402  (needs ray)
from conftest import with_default_sigint  # noqa: E402

RAY = Path(sys.executable).with_name("ray")
NODE_OPTIONS = ["--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--object-store-memory", str(100 * 1024 * 1024), "--disable-usage-stats"]


@dataclass
class Cluster:
    address: str
    second_node: subprocess.Popen[bytes]  # `ray start` of the second node: its raylet and workers descend from it


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_node(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(RAY), "start", *args, *NODE_OPTIONS],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the node's every process, stopped together
        )


def wait_started(process: subprocess.Popen[bytes], log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while "Ray runtime started" not in log.read_text(errors="replace"):
        assert process.poll() is None, f"ray start exited: {log.read_text(errors='replace')[-2000:]}"
        assert time.monotonic() < deadline, f"ray start did not finish: {log.read_text(errors='replace')[-2000:]}"
        time.sleep(0.2)


def stop_node(process: subprocess.Popen[bytes]) -> None:
    """`ray start --block` stops its processes on SIGTERM; whatever is left of its group is killed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    temp = Path(tempfile.mkdtemp(prefix="cclab-ray-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    address = f"127.0.0.1:{free_port()}"
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        head_log = temp / "head.log"
        nodes.append(start_node(["--head", "--port", address.rsplit(":", 1)[1], "--include-dashboard", "false", "--temp-dir", str(temp)], head_log))
        wait_started(nodes[0], head_log)
        second_log = temp / "second.log"
        nodes.append(start_node(["--address", address, "--resources", json.dumps({KERNEL_RESOURCE: 1})], second_log))
        wait_started(nodes[1], second_log)
        connect(address)
        deadline = time.monotonic() + 60
        while sum(1 for node in ray.nodes() if node["Alive"]) < 2:
            assert time.monotonic() < deadline, "the second node did not join"
            time.sleep(0.2)
        yield Cluster(address, nodes[1])
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for node in reversed(nodes):
            stop_node(node)
        shutil.rmtree(temp, ignore_errors=True)


def sweep_of(duration_s: float, repetitions: int, name: str = "ray") -> Sweep:
    # At 1 Gbit/s the simulator takes about 40 ms per simulated second (2 cores, unloaded).
    return Sweep.from_dict(
        {
            "name": name,
            "base": {"duration_s": duration_s, "bottleneck": {"rate_mbps": 1000, "rtt_ms": 10}, "flows": [{"cc": "cubic"}]},
            "axes": {"flows.0.cc": ["cubic", "bbr"]},
            "repetitions": repetitions,
        }
    )


def run_meta(out: Path) -> list[dict]:
    return [json.loads((folder / "run.json").read_text()) for folder in finished_runs(out).values()]


def stamps(out: Path) -> dict[str, tuple[int, int]]:
    """run_key -> (inode, mtime) of its result.json: any rewrite changes them."""
    return {key: ((folder / "result.json").stat().st_ino, (folder / "result.json").stat().st_mtime_ns) for key, folder in finished_runs(out).items()}


def assert_each_run_stored_once(out: Path, sweep: Sweep) -> None:
    keys = {spec.run_key for spec in expand(sweep)}
    assert set(finished_runs(out)) == keys
    assert not [entry.name for entry in (out / "runs").iterdir() if entry.name.startswith(".")]
    flows = load_flows(out)
    assert len(flows) == len(keys) and set(flows["run_key"]) == keys


def test_a_sweep_on_a_ray_cluster_stores_the_same_flows_bit_for_bit_as_a_local_sweep(cluster: Cluster, tmp_path: Path) -> None:
    sweep = sweep_of(duration_s=10, repetitions=2)
    local = run_sweep(sweep, tmp_path / "local", jobs=1, progress=False)
    on_ray = run_sweep(sweep, tmp_path / "ray", progress=False, executor=ExecutorChoice("ray", cluster.address))
    assert (local.done, on_ray.done, on_ray.failed) == (4, 4, [])
    assert on_ray.where == " on Ray (2 nodes)" and "with 2 jobs on Ray (2 nodes)" in on_ray.summary_lines()[0]

    # Which machine ran a run is the only thing that may differ (here both are this one).
    local_flows, ray_flows = (load_flows(tmp_path / side) for side in ("local", "ray"))
    assert (local_flows["host"] == socket.gethostname()).all() and (ray_flows["host"] == socket.gethostname()).all()
    pd.testing.assert_frame_equal(local_flows.drop(columns="host"), ray_flows.drop(columns="host"), check_exact=True)
    for series in ("flow_series", "queue_series", "events"):
        frames = [load_series(tmp_path / side, series).sort_values(["run_key", "time_s"], kind="stable").reset_index(drop=True) for side in ("local", "ray")]
        pd.testing.assert_frame_equal(*frames, check_exact=True)

    # One task per run, spread over both nodes' CPUs; run.json says where each ran.
    assert {(meta["executor"], meta["ray_node_id"]) for meta in run_meta(tmp_path / "local")} == {("local", None)}
    assert {meta["ray_node_id"] for meta in run_meta(tmp_path / "ray")} == alive_nodes()
    assert {meta["executor"] for meta in run_meta(tmp_path / "ray")} == {"ray"}


def test_a_run_that_raises_on_a_worker_is_recorded_as_failed_and_the_others_finish(cluster: Cluster, tmp_path: Path) -> None:
    good = expand(sweep_of(duration_s=2, repetitions=1))
    # model_copy does not validate: the worker's Scenario.from_dict raises on it, as a bug would.
    broken = good[0].scenario.model_copy(update={"duration_s": -1.0})
    bad = RunSpec("0badbadbadbadbad", broken, {"case": "broken"}, 0, "sim")
    report = run_planned("broken", Expansion(runs=[*good, bad]), tmp_path, engine_label="sim", jobs=1, progress=False, executor=ExecutorChoice("ray", cluster.address))
    assert report.done == 2
    assert [failure["run_key"] for failure in report.failed] == ["0badbadbadbadbad"]
    assert report.failed[0]["error"].startswith("duration_s: ")
    logged = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert [(entry["run_key"], entry["error"]) for entry in logged] == [("0badbadbadbadbad", report.failed[0]["error"])]
    assert list(load_failures(tmp_path)["run_key"]) == ["0badbadbadbadbad"]
    assert logged[0]["host"] == socket.gethostname() and logged[0]["ray_node_id"] in alive_nodes()
    assert set(finished_runs(tmp_path)) == {spec.run_key for spec in good}


def alive_nodes() -> set[str]:
    return {node["NodeID"] for node in ray.nodes() if node["Alive"]}


def test_kernel_runs_go_only_to_nodes_that_offer_the_kernel_host_resource(cluster: Cluster, tmp_path: Path) -> None:
    # Broken kernel runs: each fails on its worker before the kernel engine touches the host,
    # and failures.jsonl names the node it ran on.
    spec = expand(sweep_of(duration_s=2, repetitions=1))[0]
    broken = spec.scenario.model_copy(update={"duration_s": -1.0, "engine": "kernel"})
    runs = [RunSpec(f"0badkernel{index:06d}", broken.model_copy(update={"seed": index}), {"case": "kernel"}, 0, "kernel") for index in range(4)]
    report = run_planned("kernel", Expansion(runs=runs), tmp_path, engine_label="kernel", jobs=1, progress=False, executor=ExecutorChoice("ray", cluster.address))
    assert len(report.failed) == 4 and report.jobs == 1  # one kernel host
    kernel_hosts = {node["NodeID"] for node in ray.nodes() if node["Alive"] and node["Resources"].get(KERNEL_RESOURCE)}
    assert len(kernel_hosts) == 1 and len(alive_nodes()) == 2
    logged = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert {entry["ray_node_id"] for entry in logged} == kernel_hosts


def test_a_cluster_with_no_kernel_host_is_refused_for_kernel_runs_in_one_line() -> None:
    from cclab.errors import CclabError
    from cclab.executor_ray import check_resources

    class Cluster2Cpus:
        def cluster_resources(self) -> dict[str, float]:
            return {"CPU": 2.0, "memory": 1e9}

    assert check_resources(Cluster2Cpus(), kernel=False) == (2, 0)
    with pytest.raises(CclabError, match=r"no node of the cluster offers cclab_kernel_host for kernel runs; start kernel hosts with: ray start --address HEAD:PORT --resources '\{\"cclab_kernel_host\": 1\}'"):
        check_resources(Cluster2Cpus(), kernel=True)


def descendants(pid: int) -> list[int]:
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(child) for child in children] + [grandchild for child in children for grandchild in descendants(int(child))]


def busy_workers(node: subprocess.Popen[bytes]) -> list[int]:
    """The node's worker processes running a run: Ray titles them after the task's function."""
    busy = []
    for pid in descendants(node.pid):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::_run_remote"):
                busy.append(pid)
        except OSError:
            pass
    return busy


def test_a_worker_killed_mid_run_has_its_run_retried_and_every_run_is_stored_once(cluster: Cluster, tmp_path: Path) -> None:
    sweep = sweep_of(duration_s=100, repetitions=2)  # 4 runs of about 1 s
    killed: list[int] = []

    def kill_a_busy_worker_of_the_second_node() -> None:
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            busy = busy_workers(cluster.second_node)
            if busy:
                time.sleep(0.3)  # mid-run
                for pid in busy:
                    os.kill(pid, signal.SIGKILL)
                killed.extend(busy)
            time.sleep(0.05)

    killer = threading.Thread(target=kill_a_busy_worker_of_the_second_node)
    killer.start()
    try:
        report = run_sweep(sweep, tmp_path, progress=False, executor=ExecutorChoice("ray", cluster.address))
    finally:
        killer.join()
    assert killed, "no run was seen running on the second node"
    assert (report.done, report.failed) == (4, [])
    assert_each_run_stored_once(tmp_path, sweep)


KILLED_SWEEP = """\
name = "killed"
repetitions = 4

[base]
duration_s = 20
[base.bottleneck]
rate_mbps = 1000
rtt_ms = 10
[[base.flows]]
cc = "cubic"

[axes]
"flows.0.cc" = ["cubic", "bbr"]
"""


def test_a_driver_killed_mid_sweep_resumes_on_the_cluster_without_losing_or_redoing_a_run(cluster: Cluster, tmp_path: Path) -> None:
    sweep_file, out = tmp_path / "killed.toml", tmp_path / "out"  # 8 runs of under a second
    sweep_file.write_text(KILLED_SWEEP, encoding="utf-8")
    command = [sys.executable, "-m", "cclab", "sweep", str(sweep_file), "--out", str(out), "--executor", "ray", "--address", cluster.address]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(finished_runs(out)) < 2:
        assert driver.poll() is None, "the sweep ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.communicate()
    survived = stamps(out)
    assert 2 <= len(survived) < 8

    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert f"{8 - len(survived)} done, {len(survived)} resumed, 0 skipped, 0 failed of 8 runs" in done.stdout
    assert {key: stamps(out)[key] for key in survived} == survived
    assert_each_run_stored_once(out, Sweep.from_toml(sweep_file))


def test_ctrl_c_stops_a_sweep_on_the_cluster_with_no_run_counted_as_failed_and_a_rerun_finishes_it(cluster: Cluster, tmp_path: Path) -> None:
    sweep_file, out = tmp_path / "killed.toml", tmp_path / "out"
    sweep_file.write_text(KILLED_SWEEP, encoding="utf-8")
    command = [sys.executable, "-m", "cclab", "sweep", str(sweep_file), "--out", str(out), "--executor", "ray", "--address", cluster.address]
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=with_default_sigint)
    deadline = time.monotonic() + 60
    while len(finished_runs(out)) < 1:
        assert driver.poll() is None, "the sweep ended before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(driver.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    stdout, stderr = driver.communicate(timeout=60)
    assert driver.returncode == 130, stderr
    assert "interrupted: finished runs are kept" in stderr and "Traceback" not in stderr
    assert "0 failed" in stdout and "not run (interrupted)" in stdout
    assert not (out / "failures.jsonl").exists()
    kept = stamps(out)
    again = run_sweep(sweep_file, out, progress=False, executor=ExecutorChoice("ray", cluster.address))
    assert (again.resumed, again.done, again.failed) == (len(kept), 8 - len(kept), [])
    assert {key: stamps(out)[key] for key in kept} == kept
    assert_each_run_stored_once(out, Sweep.from_toml(sweep_file))


def cli(*args: str, hide_ray: bool = False) -> subprocess.CompletedProcess[str]:
    prelude = "import sys; sys.modules['ray'] = None; " if hide_ray else "import sys; "
    return subprocess.run(
        [sys.executable, "-c", prelude + "from cclab.cli import app; app(prog_name='cclab')", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.mark.parametrize("command", ["sweep", "reproduce", "validate"])
def test_asking_for_ray_without_ray_installed_is_one_error_line_with_exit_2(command: str, tmp_path: Path) -> None:
    target = {"sweep": [str(Path(__file__).parent.parent / "examples" / "sweeps" / "demo.toml")], "reproduce": ["cliff", "--quick"], "validate": ["--set", "quick"]}[command]
    done = cli(command, *target, "--out", str(tmp_path / "out"), "--executor", "ray", hide_ray=True)
    assert done.returncode == 2
    assert done.stderr == 'error: --executor ray: Ray is not installed; install it with: pip install "cclab[ray]"\n'
    assert not (tmp_path / "out").exists()


def test_an_address_where_no_cluster_answers_is_one_error_line_with_exit_2(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    demo = Path(__file__).parent.parent / "examples" / "sweeps" / "demo.toml"
    done = cli("sweep", str(demo), "--out", str(tmp_path / "out"), "--executor", "ray", "--address", address)
    assert done.returncode == 2
    assert done.stderr == f"error: --address {address}: no Ray cluster answers there (Connection refused)\n"
    assert not (tmp_path / "out").exists()
