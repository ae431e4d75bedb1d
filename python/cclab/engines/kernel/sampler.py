"""Background sampling during a run: per-flow TCP_INFO and tbf counters on their own clocks."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from cclab.engines.kernel.probes import CpuWait, QdiscStats, TbfProbe, TcpInfoProbe, TcpSample, cpu_times


@dataclass
class FlowRows:
    time_s: list[float] = field(default_factory=list)
    samples: list[TcpSample] = field(default_factory=list)


@dataclass
class QueueRows:
    time_s: list[float] = field(default_factory=list)
    stats: list[QdiscStats] = field(default_factory=list)


class Sampler:
    """Two threads: flows every `flow_interval_s`, the queue every `queue_interval_s`.
    Times are seconds since `t0` (time.monotonic())."""

    def __init__(
        self,
        flow_probes: dict[int, TcpInfoProbe],
        tbf: TbfProbe,
        flow_interval_s: float,
        queue_interval_s: float,
    ) -> None:
        self.flow_probes = flow_probes
        self.tbf = tbf
        self.flow_interval_s = flow_interval_s
        self.queue_interval_s = queue_interval_s
        self.flows = {fid: FlowRows() for fid in flow_probes}
        self.queue = QueueRows()
        self.cpu: list[tuple[float, int, int, int]] = []  # (t, idle, steal, total)
        self.cpu_wait = CpuWait()  # the run's tasks register themselves as they start
        self.t0 = 0.0
        self.overruns = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, t0: float) -> None:
        self.t0 = t0
        self._threads = [
            threading.Thread(target=self._loop, args=(self.flow_interval_s, self._sample_flows), daemon=True),
            threading.Thread(target=self._loop, args=(self.queue_interval_s, self._sample_queue), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self.cpu_wait.sample()
        for probe in self.flow_probes.values():
            probe.close()
        self.tbf.close()

    def _loop(self, interval_s: float, body) -> None:  # noqa: ANN001
        next_at = self.t0
        while not self._stop.is_set():
            now = time.monotonic()
            if now < next_at:
                self._stop.wait(next_at - now)
                continue
            body(now - self.t0)
            next_at += interval_s
            if time.monotonic() > next_at:  # fell behind: skip missed ticks, count them
                missed = int((time.monotonic() - next_at) / interval_s) + 1
                self.overruns += missed
                next_at += missed * interval_s

    def _sample_flows(self, t: float) -> None:
        self.cpu.append((t, *cpu_times()))
        self.cpu_wait.sample()
        for fid, probe in self.flow_probes.items():
            s = probe.sample()
            if s is not None:
                rows = self.flows[fid]
                rows.time_s.append(t)
                rows.samples.append(s)

    def _sample_queue(self, t: float) -> None:
        s = self.tbf.sample()
        if s is not None:
            self.queue.time_s.append(t)
            self.queue.stats.append(s)
