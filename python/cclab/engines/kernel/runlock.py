"""One kernel-engine run at a time on this host.

Two runs at once on a 2-core machine distort each other (the delay line owns CPU0, receive
work is steered to the other CPUs), so `run()` holds an exclusive flock on a file under
/run for the whole run, setup to teardown. A second run waits for it; the lock is released
when the holder's file descriptor closes, so a killed run never leaves it held.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

LOCK_PATH = Path(os.environ.get("CCLAB_KERNEL_LOCK", "/run/cclab-kernel.lock"))


@contextlib.contextmanager
def exclusive_run(path: Path | None = None) -> Iterator[None]:
    """Holds the host-wide kernel-run lock; waits (saying so once on stderr) if it is taken."""
    path = path or LOCK_PATH
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"cclab: another kernel-engine run holds {path}; waiting for it to finish", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the flock
