"""How long `cclab run` takes to stop after Ctrl-C in the middle of a long simulation.

    .venv/bin/python bench/ctrl_c_latency.py [REPEATS]

Each repeat writes a 100-flow, 1 Gbit/s, 600 s spec (about half a minute of simulation),
starts `cclab run`, sends SIGINT once the progress bar shows its ETA, and prints one JSON line:
seconds from the signal to the process's exit, and its exit status (130 expected). The
binding looks for signals every 0.1 s of wall time (crates/cclab-py), so on a quiet machine
this is well under a second; tests/test_run_budget.py checks the behaviour (exit 130, nothing
written) with a bound loose enough for a busy one. Figures: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
duration_s = 600
[bottleneck]
rate_mbps = 1000
rtt_ms = 20
[[flows]]
cc = "cubic"
count = 100
"""


def interrupt_once(folder: Path) -> dict[str, float | int]:
    spec = folder / "long.toml"
    spec.write_text(SPEC, encoding="utf-8")
    log = folder / "stderr.txt"
    with open(log, "w", encoding="utf-8") as errors:
        process = subprocess.Popen([sys.executable, "-m", "cclab", "run", str(spec), "--out", str(folder / "out")],
                                   stdout=subprocess.DEVNULL, stderr=errors, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    while "ETA" not in log.read_text(encoding="utf-8"):
        if process.poll() is not None:
            raise SystemExit(f"cclab run ended before it could be interrupted: {log.read_text(encoding='utf-8')}")
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    sent = time.monotonic()
    process.wait()
    return {"stopped_after_s": round(time.monotonic() - sent, 3), "exit": process.returncode}


def main(repeats: int) -> None:
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            print(json.dumps(interrupt_once(Path(folder))), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
