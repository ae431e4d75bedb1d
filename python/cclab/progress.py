"""Progress bars with an ETA on stderr: one for a sweep's runs, one for a single run's time.

stdout stays free for results (`--json` prints exactly one object there).
"""

from __future__ import annotations

import time
from types import TracebackType

# A run shorter than this shows no bar: a flash of one would only be noise.
SHOW_AFTER_S = 2.0


def _progress(*columns: object, auto_refresh: bool):  # -> rich.progress.Progress
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        *columns,
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        auto_refresh=auto_refresh,
    )


class SweepProgressBar:
    """Runs done out of all, failures, elapsed time and ETA."""

    def __init__(self, total: int, name: str) -> None:
        from rich.progress import MofNCompleteColumn, TextColumn

        # No refresh thread: the pool may need to fork workers again (after a worker
        # died), and forking a process with threads is unsafe.
        self._progress = _progress(MofNCompleteColumn(), TextColumn("{task.fields[failed]}"), auto_refresh=False)
        self._task = self._progress.add_task(name, total=total, failed="")
        self._progress.start()

    def advance(self, failed: int) -> None:
        self._progress.update(self._task, advance=1, failed=f"{failed} failed" if failed else "")
        self._progress.refresh()

    def close(self) -> None:
        self._progress.stop()


class RunProgressBar:
    """One run's progress in its own (simulated or real) seconds, called as
    `bar(done_s, total_s)` by an engine; drawn only once the run has lasted SHOW_AFTER_S."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._started = time.monotonic()
        self._progress = None
        self._task = None

    def __call__(self, done_s: float, total_s: float) -> None:
        if self._progress is None:
            if time.monotonic() - self._started < SHOW_AFTER_S:
                return
            from rich.progress import TextColumn

            self._progress = _progress(TextColumn("{task.completed:.1f}/{task.total:g} s"), auto_refresh=False)
            self._task = self._progress.add_task(self._label, total=total_s)
            self._progress.start()
        self._progress.update(self._task, completed=min(done_s, total_s), total=total_s)
        self._progress.refresh()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __enter__(self) -> RunProgressBar:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()
