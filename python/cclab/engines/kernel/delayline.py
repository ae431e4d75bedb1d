"""Path delay: the native NFQUEUE delay line (crates/cclab-delayline) in the router namespace.

This kernel has no sch_netem, so the whole RTT is added on the ACK direction by holding
NFQUEUE verdicts (docs/KERNEL_TESTBED.md). For a single-bottleneck dumbbell the
sender sees the same RTT as if the delay were split between directions.

The same process runs the userspace bottleneck where the AQM qdisc is missing (aqm.py,
`bottleneck_args`): one event loop on CPU0 for the ACK delay and the data-direction shaper.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from cclab.engines.kernel.errors import KernelEngineError
from cclab.units import frame_bytes_of

#: The delay line owns CPU0; veth receive work is steered to the other CPUs (RPS).
DELAY_LINE_CPU = 0
READY_TIMEOUT_S = 10.0
BINARY_NAME = "cclab-delayline"


def find_binary() -> str | None:
    """$CCLAB_DELAYLINE, then the workspace's target/delayline/release (where `make install`
    builds it), target/{release,debug} (a `cargo build` by hand), then $PATH."""
    env = os.environ.get("CCLAB_DELAYLINE")
    if env:
        return env if os.access(env, os.X_OK) else None
    repo = Path(__file__).resolve().parents[4]
    for folder in (("delayline", "release"), ("release",), ("debug",)):
        candidate = repo.joinpath("target", *folder, BINARY_NAME)
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(BINARY_NAME)


def queues_for(delays_ns: list[int]) -> tuple[list[int], dict[int, int]]:
    """One NFQUEUE queue per distinct delay: (queue of each flow, delay of each queue)."""
    distinct = sorted(set(delays_ns))
    queue_of_delay = {d: q for q, d in enumerate(distinct)}
    return [queue_of_delay[d] for d in delays_ns], {q: d for d, q in queue_of_delay.items()}


def bottleneck_args(queue: int, config: dict, burst_bytes: int) -> list[str]:
    """Arguments of the delay line's userspace bottleneck (crates/cclab-delayline/src/bottleneck.rs):
    the rate and tbf's burst, the scenario's buffer as its hard limit, the resolved AQM and the
    device's psched_mtu (the hosts' MTU + 14)."""
    b = config["bottleneck"]
    if b.get("queue_limit_bytes") is not None:
        limit = ["--limit-bytes", str(int(b["queue_limit_bytes"]))]
    else:
        limit = ["--limit-packets", str(int(b["queue_limit_packets"]))]
    return [
        "--bottleneck", str(queue), "--rate-bps", str(int(b["rate_bps"])), "--burst-bytes", str(burst_bytes),
        *limit, "--aqm-json", json.dumps(b.get("aqm") or {"kind": "fifo"}), "--seed", str(int(config.get("seed", 1))),
        "--series-interval-ns", str(int(config.get("queue_sample_interval_ns", 1_000_000))),
        "--psched-mtu-bytes", str(frame_bytes_of(config)),
    ]  # fmt: skip


class DelayLine:
    def __init__(
        self, router_ns: str, delays_by_queue: dict[int, int], workdir: Path, bottleneck: list[str] | None = None
    ) -> None:
        binary = find_binary()
        if binary is None:
            raise KernelEngineError("cclab-delayline is not built: run `cargo build --release -p cclab-delayline`")
        self.ready = workdir / "delayline.ready"
        self.report_path = workdir / "delayline.json"
        self.stderr_path = workdir / "delayline.stderr"
        args = ["ip", "netns", "exec", router_ns, binary, "--cpu", str(DELAY_LINE_CPU)]
        for queue, delay in sorted(delays_by_queue.items()):
            args += ["--queue", f"{queue}:{delay}"]
        args += bottleneck or []
        args += ["--ready-file", str(self.ready), "--report", str(self.report_path)]
        self.command = args
        # `ip netns exec` execs the program, so this pid is the delay line's own.
        with open(self.stderr_path, "w") as stderr:  # the child keeps its own copy
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self.ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise KernelEngineError(f"delay line failed to start: {self.stderr_path.read_text().strip()}")
            time.sleep(0.01)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> dict | None:
        """Stops it (SIGTERM makes it write its report) and returns the report, if any."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            return json.loads(self.report_path.read_text())
        except (OSError, ValueError):
            return None
