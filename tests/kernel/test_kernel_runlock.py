"""The host-wide kernel-run lock: a second holder waits until the first lets go."""

from __future__ import annotations

import subprocess
import sys
import time

from cclab.engines.kernel.runlock import exclusive_run

HOLDER = """
import sys, time
from pathlib import Path
from cclab.engines.kernel.runlock import exclusive_run
with exclusive_run(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_second_run_waits_for_the_first_and_says_so(tmp_path, capsys):
    lock = tmp_path / "kernel.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "1.0"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        with exclusive_run(lock):
            waited = time.monotonic() - t0
    finally:
        holder.wait(timeout=10)
        holder.stdout.close()
    assert waited > 0.5
    assert "waiting" in capsys.readouterr().err


def test_a_free_lock_is_taken_at_once_and_silently(tmp_path, capsys):
    lock = tmp_path / "kernel.lock"
    t0 = time.monotonic()
    with exclusive_run(lock):
        pass
    with exclusive_run(lock):  # released on exit: a second take does not wait
        pass
    assert time.monotonic() - t0 < 0.5
    assert capsys.readouterr().err == ""
