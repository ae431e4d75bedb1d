"""Running a batch of runs: the `Executor` interface and the local process-pool executor.

A sweep hands an executor `RunTask`s (small, picklable: the scenario in spec form, the
engine, where to write) and receives `RunOutcome`s as runs finish, in any order. The
work of one run is `execute(task)`: run the engine (`run_task`), then store the result
under `runs/<run_key>/` (`store_run`). A cluster executor runs `run_task` on another
machine and `store_run` where the store is (`cclab.executor_ray`).

Which executor a batch uses is an `ExecutorChoice` (`cclab.executor_choice`: "local", or "ray" with a cluster
address): passed to `run_sweep`/`run_planned`, or set for a block of code with
`use_executor(choice)`, which is how `cclab reproduce` reaches every study's sweeps.

Atomicity: a run is written (RunResult.write, itself atomic) into a hidden staging
folder `runs/.staging-<pid>/<run_key>`, completed with `run.json`, and renamed to
`runs/<run_key>` in one step. `runs/<run_key>` therefore exists only when complete, and
whatever an interruption leaves behind is hidden and removed by `clean_staging`.
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import shutil
import signal
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from cclab.errors import CclabError

if TYPE_CHECKING:
    from cclab.results import RunResult

RUN_META = "run.json"
STAGING_PREFIX = ".staging-"
RUNNING_PREFIX = ".running-"


@dataclass(frozen=True)
class RunTask:
    run_key: str
    engine: str
    scenario: dict[str, Any]  # spec form (Scenario.model_dump())
    axis_values: dict[str, Any]
    repetition: int
    sweep: str
    runs_dir: str


@dataclass(frozen=True)
class RunOutcome:
    run_key: str
    ok: bool
    error: str | None = None  # one line when not ok
    wall_s: float = 0.0
    cpu_s: float = 0.0  # CPU time of the run in its process: independent of other load
    # Another process (an orphaned worker of a killed sweep) stored the same run first.
    raced: bool = False
    host: str | None = None  # the machine that ran it (None if its worker died)
    ray_node_id: str | None = None  # on a Ray cluster, the node that ran it


def execute(task: RunTask) -> RunOutcome:
    """Run one task and store it; any error becomes a failed outcome with one line."""
    started, cpu_started = time.perf_counter(), time.process_time()
    marker = _running_marker(task)
    try:
        raced = store_run(task, run_task(task), executor="local")
        error_line = None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # a bug, or a Rust panic (a BaseException), must not stop the sweep
        error_line = error_line_of(error)
    finally:
        marker.unlink(missing_ok=True)
    wall_s, cpu_s = time.perf_counter() - started, time.process_time() - cpu_started
    if error_line is not None:
        return RunOutcome(task.run_key, False, error_line, wall_s, cpu_s, host=socket.gethostname())
    return RunOutcome(task.run_key, True, None, wall_s, cpu_s, raced, host=socket.gethostname())


def error_line_of(error: BaseException) -> str:
    """The one line a failed run is recorded with."""
    if isinstance(error, CclabError):
        return error.line
    return " ".join(f"{type(error).__name__}: {error}".split())


def _running_marker(task: RunTask) -> Path:
    """runs/.running-<pid>: names the run this process is busy with, so that a sweep whose
    worker died (killed, out of memory, crashed) can tell which run it was."""
    marker = Path(task.runs_dir) / f"{RUNNING_PREFIX}{os.getpid()}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(task.run_key, encoding="utf-8")
    return marker


def run_task(task: RunTask) -> RunResult:
    """Run the task's scenario on its engine (on whichever machine calls this)."""
    from cclab.engines import get_engine
    from cclab.spec import Scenario

    return get_engine(task.engine).run(Scenario.from_dict(task.scenario))


def store_run(task: RunTask, result: RunResult, *, executor: str, ray_node_id: str | None = None) -> bool:
    """Store a finished run under runs/<run_key> atomically; True if another process
    (an earlier sweep's orphaned worker) stored the same run first.

    run.json says how the run was carried out: the executor and, on Ray, the node's id
    (the host's name is in the result's provenance, where the engine ran).
    """
    runs_dir = Path(task.runs_dir)
    staging = result.write(runs_dir / f"{STAGING_PREFIX}{os.getpid()}" / task.run_key)
    try:
        meta = {
            "run_key": task.run_key,
            "engine": task.engine,
            "sweep": task.sweep,
            "repetition": task.repetition,
            "axis_values": task.axis_values,
            "scenario": task.scenario,
            "executor": executor,
            "ray_node_id": ray_node_id,
        }
        (staging / RUN_META).write_text(json.dumps(meta, indent=2, allow_nan=False) + "\n", encoding="utf-8")
        try:
            staging.rename(runs_dir / task.run_key)
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST):
                return True  # already stored, by an earlier sweep's orphaned worker
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.parent.rmdir()  # this process's staging folder, if now empty
        except OSError:
            pass
    return False


def clean_staging(runs_dir: Path, *, stopped: int | None = None) -> None:
    """Remove the staging folders of processes that are gone (killed sweeps), and that of
    the process `stopped`, which is alive but has stopped running (an interrupted sweep)."""
    if not runs_dir.is_dir():
        return
    for entry in runs_dir.iterdir():
        prefix = next((p for p in (STAGING_PREFIX, RUNNING_PREFIX) if entry.name.startswith(p)), None)
        if prefix is not None:
            pid = entry.name[len(prefix):]
            if not pid.isdigit() or int(pid) == stopped or not _alive(int(pid)):
                if entry.is_dir():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        elif entry.name.startswith(".") and entry.name.endswith((".partial", ".old")):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed process stays a zombie until its parent (or init) reaps it.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


class Executor(ABC):
    """Runs tasks and yields their outcomes as they finish."""

    jobs: int = 1

    @abstractmethod
    def submit(self, tasks: Sequence[RunTask]) -> Iterator[RunOutcome]:
        """Start the tasks (at once, before returning) and iterate their outcomes as they finish."""

    def shutdown(self, *, kill: bool = False) -> None:
        """Release workers; with kill, stop runs in progress (their results are dropped)."""

    def describe(self) -> str:
        """Where the runs went, for the sweep's summary line ("" for this machine)."""
        return ""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.shutdown(kill=error is not None)


class LocalProcessExecutor(Executor):
    """`jobs` worker processes on this machine; with jobs = 1, runs in this process.

    One job runs in-process so that the kernel engine keeps its own signal handling
    (namespace teardown on Ctrl-C) and nothing is paid for starting workers.
    Workers ignore SIGINT: Ctrl-C reaches the sweep, which stops them itself.
    """

    def __init__(self, jobs: int = 1) -> None:
        if jobs < 1:
            raise CclabError(f"--jobs: must be >= 1 (got {jobs})")
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None

    def submit(self, tasks: Sequence[RunTask]) -> Iterator[RunOutcome]:
        if self.jobs == 1:
            return (execute(task) for task in tasks)
        # Submitting forks the workers now, before the caller starts any thread (progress bar).
        pending = self._start(tasks)
        return self._as_finished(pending)

    def _start(self, tasks: Sequence[RunTask]) -> dict[Future[RunOutcome], RunTask]:
        self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=_context(), initializer=_ignore_sigint)
        return {self._pool.submit(execute, task): task for task in tasks}

    def _as_finished(self, pending: dict[Future[RunOutcome], RunTask]) -> Iterator[RunOutcome]:
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            broken: list[RunTask] = []
            for future in finished:
                task = pending.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    broken.append(task)
                    continue
                yield outcome
            if not broken:
                continue
            # A worker died (killed, out of memory, crashed) and the pool killed the
            # others: every unfinished run is lost from it. Each run that was in progress
            # is run again alone, which tells the culprit from its neighbours; then the rest.
            unfinished = broken + [pending.pop(future) for future in list(pending)]
            self.shutdown(kill=True)
            in_progress = _runs_in_progress(unfinished[0].runs_dir)
            for task in unfinished:
                if task.run_key in in_progress:
                    yield self._run_alone(task)
            rest = [task for task in unfinished if task.run_key not in in_progress]
            if rest:
                pending = self._start(rest)

    def _run_alone(self, task: RunTask) -> RunOutcome:
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=_context(), initializer=_ignore_sigint)
        try:
            return self._pool.submit(execute, task).result()
        except BrokenProcessPool:
            _runs_in_progress(task.runs_dir)  # drop its marker
            return RunOutcome(task.run_key, False, "its worker process died while running it (killed, out of memory or crashed)")
        finally:
            self.shutdown()

    def shutdown(self, *, kill: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if kill:
            # ProcessPoolExecutor cannot stop a running task; its workers must be killed.
            processes = list((getattr(pool, "_processes", None) or {}).values())
            for process in processes:
                if process.is_alive():
                    process.kill()
        # Waiting also joins the pool's management thread, so that the next pool may fork.
        pool.shutdown(wait=True, cancel_futures=kill)


def _runs_in_progress(runs_dir: str) -> set[str]:
    """The runs named by the markers of processes that are gone; the markers are removed."""
    keys = set()
    for marker in Path(runs_dir).glob(f"{RUNNING_PREFIX}*"):
        pid = marker.name[len(RUNNING_PREFIX):]
        if pid.isdigit() and not _alive(int(pid)):
            try:
                keys.add(marker.read_text(encoding="utf-8").strip())
            except OSError:
                pass
            marker.unlink(missing_ok=True)
    return keys


def _context() -> multiprocessing.context.BaseContext:
    """fork: workers start at once with cclab already imported, and no script needs an
    `if __name__ == "__main__"` guard (spawn and forkserver import the main module again).
    A process with other threads is not forked safely: then forkserver."""
    if threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["cclab.executor", "cclab.engines.sim", "cclab.results"])
    return context


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
