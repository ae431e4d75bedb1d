"""Which executor runs a sweep's batches: local worker processes or a Ray cluster.

Its own module so that `executor` (the interface and the local executor) and
`executor_ray` (which builds on it) never import each other: only this chooser knows both.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

from cclab.errors import CclabError
from cclab.executor import Executor, LocalProcessExecutor


EXECUTOR_NAMES = ("local", "ray")


@dataclass(frozen=True)
class ExecutorChoice:
    """Where a batch of runs goes: "local" (worker processes on this machine) or "ray"
    (a Ray cluster: `address` "HOST:PORT", or "auto"/None: RAY_ADDRESS, else the cluster
    started on this machine with `ray start`)."""

    kind: str = "local"
    address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in EXECUTOR_NAMES:
            raise CclabError(f"--executor: must be one of {', '.join(EXECUTOR_NAMES)} (got {self.kind!r})")
        if self.address is not None and self.kind != "ray":
            raise CclabError("--address: only with --executor ray")

    def preflight(self, *, kernel: bool = False) -> None:
        """Fail in one line, before anything runs or is written, if Ray is missing, the
        cluster's address does not answer or (`kernel`) no node takes kernel runs."""
        if self.kind == "ray":
            from cclab.executor_ray import preflight

            preflight(self.address, kernel=kernel)

    def make(self, jobs: int) -> Executor:
        """An executor for one batch; `jobs` is the local process count (Ray's cluster
        resources decide its own parallelism)."""
        if self.kind == "ray":
            from cclab.executor_ray import RayExecutor

            return RayExecutor(self.address)
        return LocalProcessExecutor(jobs)


_CURRENT: contextvars.ContextVar[ExecutorChoice] = contextvars.ContextVar("cclab_executor", default=ExecutorChoice())


def current_executor() -> ExecutorChoice:
    """The choice in force: the innermost `use_executor`, else local."""
    return _CURRENT.get()


@contextlib.contextmanager
def use_executor(choice: ExecutorChoice) -> Iterator[ExecutorChoice]:
    """Run every sweep started inside the block (studies, validation sets) with `choice`."""
    token = _CURRENT.set(choice)
    try:
        yield choice
    finally:
        _CURRENT.reset(token)
