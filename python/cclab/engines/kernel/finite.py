"""Finite flows (`size_bytes` set): when each one started and when its last byte arrived.

Start: the SYN of the flow's data connection, timed from the sender's side. The iperf3
client first sets up its control connection (a few RTTs, plus process start-up), so neither
the scheduled start nor the client's launch is when the flow's TCP connection began. The
watcher polls sock_diag in each launched flow's sender namespace every millisecond for the
socket bound to the flow's client port: it appears in SYN_SENT the moment connect() sends
the SYN and stays for at least one RTT (the SYN-ACK is delayed by the whole RTT), so it is
never missed, and the SYN lies between the last poll that did not see it and the first that
did; the midpoint is used (error below one poll interval plus one dump, ~1 ms).

End: the receiver (receiver.py, one process in the receiver namespace serving every finite
flow) times the read that brings the byte count to `size_bytes` with the kernel's receive
stamp of the last segment.

The FCT therefore counts the handshake, as the usual definition does: its floor is one RTT
(SYN out, SYN-ACK back) plus the transmission time of the bytes.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from cclab.engines.kernel import probes
from cclab.engines.kernel.netns import ns_run
from cclab.engines.kernel.traffic import FlowPlan

RECEIVER_SCRIPT = Path(__file__).with_name("receiver.py")
START_POLL_INTERVAL_S = 0.001
RECEIVER_STOP_TIMEOUT_S = 10.0


#: How long a stopped flow's last segments may take to leave the bottleneck queue.
QUEUE_DRAIN_TIMEOUT_S = 2.0


def stop_at_run_end(p: FlowPlan, client: subprocess.Popen) -> None:
    """Stops a finite flow that is still going when the run ends. Killing the client is not
    enough: its orphaned socket would go on sending what it had queued (megabytes, with
    autotuned buffers), so the data socket is destroyed too (`ss -K`, SOCK_DESTROY), which
    resets the connection and ends its traffic at once."""
    client.kill()
    ns_run(p.sender_ns, "ss", "-K", "-tn", "sport", "=", f":{p.ports.client}", check=False)


def wait_queue_empty(tbf: probes.TbfProbe) -> None:
    """Waits (briefly) for segments already in the bottleneck queue to reach the receiver,
    so that the router's and the receiver's packet counters agree."""
    deadline = time.monotonic() + QUEUE_DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        stats = tbf.sample()
        if stats is None or stats.backlog_bytes == 0:
            return
        time.sleep(0.005)


class Receiver:
    """receiver.py in the receiver namespace, serving the finite flows' iperf3 ports."""

    def __init__(self, receiver_ns: str, plans: list[FlowPlan], workdir: Path) -> None:
        plan_path = workdir / "receiver-plan.json"
        self.report_path = workdir / "receiver-report.json"
        flows = [{"flow_id": p.flow_id, "port": p.ports.server, "size_bytes": p.size_bytes} for p in plans]
        plan_path.write_text(json.dumps({"flows": flows}))
        self.log_path = workdir / "receiver.log"
        with open(self.log_path, "w") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", receiver_ns, sys.executable, str(RECEIVER_SCRIPT),
                 str(plan_path), str(self.report_path)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True,
            )  # fmt: skip

    def set_run_end(self, at_s: float) -> None:
        """Bytes arriving after `at_s` (time.monotonic()) are not counted."""
        with contextlib.suppress(OSError):
            self.proc.stdin.write(f"{at_s!r}\n")
            self.proc.stdin.flush()

    def stop(self) -> dict[int, dict]:
        """Ends the receiver (it reports what it has) and returns its record per flow id;
        an empty dict if it wrote none."""
        if self.proc.poll() is None:
            self.proc.terminate()  # `ip netns exec` execs the script: same pid
        try:
            self.proc.wait(timeout=RECEIVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            report = json.loads(self.report_path.read_text())
        except (OSError, ValueError):
            return {}
        return {int(f["flow_id"]): f for f in report["flows"]}

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text()[-300:].strip()
        return ""


class StartWatcher:
    """Times the SYN of each finite flow's data connection (module docstring)."""

    def __init__(self, plans: list[FlowPlan]) -> None:
        self._probes = {p.flow_id: probes.TcpInfoProbe(p.sender_ns, p.ports.client) for p in plans}
        self._last_miss_s: dict[int, float] = {}
        self.syn_s: dict[int, float] = {}  # flow id -> time.monotonic() of the SYN
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def launched(self, flow_id: int, at_s: float) -> None:
        """The flow's client was launched at `at_s` (monotonic): no SYN before that."""
        if flow_id in self._probes:
            with self._lock:
                self._last_miss_s[flow_id] = at_s

    def _loop(self) -> None:
        while not self._stop.is_set() and len(self.syn_s) < len(self._probes):
            with self._lock:
                waiting = [(fid, t) for fid, t in self._last_miss_s.items() if fid not in self.syn_s]
            for fid, last_miss in waiting:
                seen = self._probes[fid].sample() is not None
                now = time.monotonic()
                if seen:
                    self.syn_s[fid] = (last_miss + now) / 2
                else:
                    with self._lock:
                        self._last_miss_s[fid] = now
            self._stop.wait(START_POLL_INTERVAL_S)

    def stop(self) -> dict[int, float]:
        self._stop.set()
        self._thread.join(timeout=5)
        for probe in self._probes.values():
            probe.close()
        return dict(self.syn_s)
