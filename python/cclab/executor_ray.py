"""Runs of a sweep on a Ray cluster: `RayExecutor`, behind the same `Executor` interface.

    pip install "cclab[ray]"                                     # on the driver and every node
    ray start --head --port 6379                                 # one machine
    ray start --address HEAD:6379 [--resources '{"cclab_kernel_host": 1}']   # each other one
    cclab sweep grid.toml --executor ray --address HEAD:6379
    cclab sweep grid.toml --executor ray     # a cluster on this machine, else a local one started for it

Each run is one Ray task. A simulator run asks for one CPU, so simulator runs fan out over
every CPU of the cluster. A kernel run also asks for one unit of the custom resource
`cclab_kernel_host`, which a node offers once (`--resources '{"cclab_kernel_host": 1}'`):
so kernel runs go one per node at a time, and only to nodes that offer to run them (root,
tc, iperf3). A sweep's simulator runs all finish before its kernel runs start, so that
they do not load the kernel hosts.

The workers only run the engine and send the `RunResult` back; the driver (the machine
that runs `cclab sweep`) stores it under `runs/<run_key>/` exactly as a local sweep does
(`executor.store_run`, atomic). The store therefore needs no shared filesystem, resume
works as locally (a killed driver loses only the runs in flight; the next sweep skips
every stored run), and each run is stored once even if Ray ran it twice. A worker or
node that dies mid-run has its run retried elsewhere (`MAX_RETRIES` times); a run that
raises is a failed outcome with its one-line error, recorded in failures.jsonl.

Every node needs the same cclab (with its built simulator) importable by the Python
that `ray start` ran. Ray is imported only here, and only when asked for.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cclab.errors import CclabError
from cclab.executor import Executor, RunOutcome, RunTask, error_line_of, run_task, store_run

if TYPE_CHECKING:
    from cclab.results import RunResult

# The custom resource a node offers once to take kernel runs, one at a time.
KERNEL_RESOURCE = "cclab_kernel_host"
# Ray runs a task again when its worker or node dies (not when it raises); 3 is Ray's default.
MAX_RETRIES = 3
# How long to wait for a HOST:PORT to accept a connection before calling it unreachable.
CONNECT_TIMEOUT_S = 5.0
# ray.wait returns at least this often, so that Ctrl-C is handled promptly.
WAIT_S = 0.5

INSTALL_HINT = 'Ray is not installed; install it with: pip install "cclab[ray]"'


def preflight(address: str | None, *, kernel: bool = False) -> None:
    """One line, before anything runs or is written: Ray is missing, HOST:PORT does not
    answer, there is no cluster to connect to, or (`kernel`) no node takes kernel runs.
    Connects (see `connect`)."""
    if importlib.util.find_spec("ray") is None:
        raise CclabError(f"--executor ray: {INSTALL_HINT}")
    if address is not None and address != "auto":
        host, port = _host_port(address)
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as error:
            reason = error.strerror or type(error).__name__
            raise CclabError(f"--address {address}: no Ray cluster answers there ({reason})") from None
    check_resources(connect(address), kernel=kernel)


# The address this module connected to; a connection is kept for the life of the process
# (every batch of a study or validation set reuses it; Ray disconnects at exit).
_connected: list[str | None] = []


#: What Ray says when "auto" finds no cluster on this machine (ray._private.services).
NO_RUNNING_CLUSTER = "Could not find any running Ray instance"


def connect(address: str | None) -> Any:
    """Connect this process to the cluster at `address` (once) and return the ray module.
    Without an address: RAY_ADDRESS, else a cluster running on this machine, else (as
    `ray.init()` does) a local cluster started for this process, which says so on stderr. A
    connection the caller made itself with ray.init is used as it is."""
    ray = _import_ray()
    may_start_local = address is None and not os.environ.get("RAY_ADDRESS")
    address = address or "auto"
    if ray.is_initialized():
        if not _connected or _connected[0] == address:
            return ray
        ray.shutdown()  # ours, to another cluster
    _connected.clear()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a lab tool does not report usage
    # Errors come back as outcomes: stderr stays for progress.
    options = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
    try:
        ray.init(address=address, **options)
    except Exception as error:  # ConnectionError, version mismatch, ...: one line
        if not (may_start_local and NO_RUNNING_CLUSTER in str(error)):
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise CclabError(f"--executor ray: cannot connect to the Ray cluster at {address}: {first}") from None
        _start_local(ray, options)
    _connected.append(address)
    return ray


def _start_local(ray: Any, options: dict[str, Any]) -> None:
    """A cluster of this machine alone, for this process; it takes kernel runs too (one at a
    time, as a kernel host started by hand would)."""
    try:
        ray.init(resources={KERNEL_RESOURCE: 1}, **options)
    except Exception as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CclabError(f"--executor ray: no Ray cluster runs here and a local one did not start: {first}") from None
    cpus = int(ray.cluster_resources().get("CPU", 0))
    sys.stderr.write(f"--executor ray: no Ray cluster runs here; started a local one ({cpus} CPUs) for this command\n")


def check_resources(ray: Any, *, kernel: bool) -> tuple[int, int]:
    """The cluster's CPUs and kernel hosts; one line if it cannot take the runs."""
    resources = ray.cluster_resources()
    cpus, hosts = int(resources.get("CPU", 0)), int(resources.get(KERNEL_RESOURCE, 0))
    if cpus < 1:
        raise CclabError("--executor ray: the cluster offers no CPU to run on")
    if kernel and hosts < 1:
        raise CclabError(
            f"--executor ray: no node of the cluster offers {KERNEL_RESOURCE} for kernel runs; "
            f"start kernel hosts with: ray start --address HEAD:PORT --resources '{{\"{KERNEL_RESOURCE}\": 1}}'"
        )
    return cpus, hosts


def _host_port(address: str) -> tuple[str, int]:
    rest = address.split("://", 1)[-1]  # ray://HOST:PORT (Ray Client) too
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise CclabError(f"--address: expected auto or HOST:PORT (got {address!r})")
    return host.strip("[]"), int(port)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise CclabError(f"--executor ray: {INSTALL_HINT}") from None
    return ray


@dataclass(frozen=True)
class _RemoteRun:
    """What a worker sends back: the result, or the one-line error it raised."""

    result: RunResult | None
    error: str | None
    wall_s: float
    cpu_s: float
    host: str
    node_id: str


def _run_remote(task: RunTask) -> _RemoteRun:
    """The Ray task: run the engine on this node; never raises for a failed run."""
    import ray

    started, cpu_started = time.perf_counter(), time.process_time()
    result, error = None, None
    try:
        result = run_task(task)
    except (KeyboardInterrupt, SystemExit):
        raise  # a cancelled task (Ctrl-C on the driver): the kernel engine tears down
    except BaseException as raised:  # a bug, or a Rust panic (a BaseException)
        error = error_line_of(raised)
    wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    return _RemoteRun(result, error, wall_s, cpu_s, socket.gethostname(), ray.get_runtime_context().get_node_id())


class RayExecutor(Executor):
    """One Ray task per run on the cluster at `address` (see the module doc)."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self.jobs = 1  # known once connected: the cluster's CPUs (or kernel hosts)
        self._ray: Any = None
        self._pending: dict[Any, RunTask] = {}
        self.nodes = 0

    def submit(self, tasks: Sequence[RunTask]) -> Iterator[RunOutcome]:
        if not tasks:
            return iter(())
        self._ray = connect(self.address)
        self.nodes = sum(1 for node in self._ray.nodes() if node.get("Alive"))
        sims = [task for task in tasks if task.engine != "kernel"]
        kernels = [task for task in tasks if task.engine == "kernel"]
        cpus, hosts = check_resources(self._ray, kernel=bool(kernels))
        self.jobs = cpus if sims else min(cpus, hosts)
        remote = self._ray.remote(_run_remote)
        self._submit(remote, sims)  # at once, before returning, as the interface asks
        return self._as_finished(remote, kernels)

    def describe(self) -> str:
        return f" on Ray ({self.nodes} node{'s' if self.nodes != 1 else ''})"

    def _submit(self, remote: Any, tasks: Sequence[RunTask]) -> None:
        for task in tasks:
            options: dict[str, Any] = {"num_cpus": 1, "max_retries": MAX_RETRIES}
            if task.engine == "kernel":
                options["resources"] = {KERNEL_RESOURCE: 1}
            self._pending[remote.options(**options).remote(task)] = task

    def _as_finished(self, remote: Any, later: Sequence[RunTask]) -> Iterator[RunOutcome]:
        ray = self._ray
        while self._pending or later:
            if not self._pending:  # the simulator's runs are done: now the kernel's
                self._submit(remote, later)
                later = []
            refs = list(self._pending)
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=WAIT_S)
            for ref in ready:
                yield self._outcome(self._pending.pop(ref), ref)

    def _outcome(self, task: RunTask, ref: Any) -> RunOutcome:
        errors = self._ray.exceptions
        try:
            remote: _RemoteRun = self._ray.get(ref)
        except (errors.OwnerDiedError, errors.LocalRayletDiedError):
            # This process's own link to the cluster is gone: on Ctrl-C Ray's core worker
            # shuts down before Python sees KeyboardInterrupt. The sweep stops as interrupted
            # (finished runs kept, a rerun resumes), and the run is not a failure.
            raise KeyboardInterrupt from None
        except errors.RayError as error:  # its worker or node died on every try
            line = error_line_of(error).split(" ray::", 1)[0]
            return RunOutcome(task.run_key, False, f"Ray could not run it ({MAX_RETRIES + 1} tries; its worker or node died): {line}")
        where = {"host": remote.host, "ray_node_id": remote.node_id}
        if remote.result is None:
            return RunOutcome(task.run_key, False, remote.error, remote.wall_s, remote.cpu_s, **where)
        try:
            raced = store_run(task, remote.result, executor="ray", ray_node_id=remote.node_id)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:
            line = f"storing it failed: {error_line_of(error)}"
            return RunOutcome(task.run_key, False, line, remote.wall_s, remote.cpu_s, **where)
        return RunOutcome(task.run_key, True, None, remote.wall_s, remote.cpu_s, raced, **where)

    def shutdown(self, *, kill: bool = False) -> None:
        ray = self._ray
        if ray is None:
            return
        if kill:
            # Not forced: the task gets KeyboardInterrupt, so a kernel run tears down its namespaces.
            for ref in self._pending:
                try:
                    ray.cancel(ref)
                except Exception:  # the link to the cluster is already gone: Ray ends the job's tasks
                    break
        self._pending = {}
