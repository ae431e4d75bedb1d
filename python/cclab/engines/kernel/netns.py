"""Network namespaces owned by one run: creation, registry, teardown, stale cleanup.

Every namespace is named `cclab-<run id>-<role>`. Before one is created its name is written
to `/run/cclab/<run id>.json` together with the owning pid (and that pid's start time, so a
reused pid is not mistaken for the owner). A later run deletes namespaces whose owner is
dead. Nothing outside these namespaces is ever changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

from pyroute2 import IPRoute

RUN_DIR = Path("/run/cclab")
NETNS_DIR = Path("/run/netns")
NAME_PREFIX = "cclab-"
# setns(2) namespace type, include/uapi/linux/sched.h
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def new_run_id() -> str:
    """Eight hex digits: unique across concurrent runs, short enough for readable names."""
    return secrets.token_hex(4)


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks), or None if no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_alive(record: dict) -> bool:
    pid = int(record.get("pid", 0))
    return pid > 0 and _start_time(pid) == record.get("pid_start")


def list_cclab_namespaces() -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(NAME_PREFIX))


def pids_in(name: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=10)
    return [int(x) for x in out.stdout.split() if x.isdigit()]


def remove_namespace(name: str) -> None:
    """Kills what still runs inside (only processes this engine started there) and deletes it."""
    for pid in pids_in(name):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


def cleanup_stale() -> list[str]:
    """Deletes `cclab-*` namespaces whose owning process is dead (or that no live run owns)."""
    # List namespaces before reading the registry: an owner writes its record before it
    # creates a namespace, so every namespace listed here already has a visible record.
    present = list_cclab_namespaces()
    live: set[str] = set()
    if RUN_DIR.is_dir():
        for record_path in RUN_DIR.glob("*.json"):
            try:
                record = json.loads(record_path.read_text())
            except (OSError, ValueError):
                continue
            if _owner_alive(record):
                live.update(record.get("namespaces", []))
            else:
                record_path.unlink(missing_ok=True)
    removed = [name for name in present if name not in live]
    for name in removed:
        remove_namespace(name)
    return removed


class RunNamespaces:
    """The namespaces of one run; `destroy()` is idempotent and safe from atexit."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.names: list[str] = []
        self.record_path = RUN_DIR / f"{run_id}.json"
        self.destroyed = False
        # A forked child (pyroute2 forks for netns work) inherits atexit handlers; only the
        # process that created the namespaces may delete them.
        self.owner_pid = os.getpid()

    def name(self, role: str) -> str:
        return f"{NAME_PREFIX}{self.run_id}-{role}"

    def _write_record(self, names: list[str]) -> None:
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        record = {"pid": os.getpid(), "pid_start": _start_time(os.getpid()), "namespaces": names}
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.record_path)

    def create(self, role: str) -> str:
        name = self.name(role)
        self._write_record([*self.names, name])
        self.names.append(name)
        # iproute2 rather than pyroute2.netns: the latter forks helpers that can unwind
        # through the caller's stack (and its cleanup) in the child.
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True, timeout=30)
        return name

    def destroy(self) -> None:
        if self.destroyed or os.getpid() != self.owner_pid:
            return
        for name in reversed(self.names):
            remove_namespace(name)
        self.record_path.unlink(missing_ok=True)
        self.destroyed = True


@contextlib.contextmanager
def inside(name: str) -> Iterator[None]:
    """Moves the calling thread into namespace `name` (sockets opened here stay in it)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(str(NETNS_DIR / name), os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} failed")
        yield
    finally:
        _libc.setns(own, CLONE_NEWNET)
        os.close(own)
        os.close(target)


def iproute_in(name: str) -> IPRoute:
    """An rtnetlink socket bound to namespace `name` (opened there; no helper process)."""
    with inside(name):
        return IPRoute()


def ns_run(name: str, *args: str, check: bool = True, input_text: str | None = None) -> str:
    """Runs a command inside namespace `name` (argument list, no shell) and returns stdout."""
    out = subprocess.run(
        ["ip", "netns", "exec", name, *args], capture_output=True, text=True, timeout=60, input=input_text
    )
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} in {name} failed: {out.stderr.strip()}")
    return out.stdout
