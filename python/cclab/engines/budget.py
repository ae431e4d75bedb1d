"""What a run will cost, known before it starts, and the soft limits past which it is refused.

`estimate(config, engine)` reads a resolved config (docs/ARCHITECTURE.md) and returns the
work (data packets the bottleneck can carry, series rows), the memory and the wall time of
the run; `check(estimate, force=...)` refuses, in one line naming the field that drives the
cost, a run past `SOFT_WALL_S` or `SOFT_MEMORY_BYTES` (`force` lifts those), and always one
that cannot fit in this machine's memory. What no run may ask for at any cost (a rate past
1 Tbit/s, an RTT under 1 us) is refused earlier, by the spec.

The estimate is meant as an upper bound on this hardware: each coefficient is the slowest or
largest figure measured by `bench/run_cost.py` and `cargo bench -p cclab-sim` on the 2-core
VM of docs/BENCHMARKS.md ("What a run costs"), with headroom for a busy machine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cclab.errors import CclabError
from cclab.units import frame_bytes_of

# ---- simulator speed and memory (docs/BENCHMARKS.md, "What a run costs") ---------------------
# Slowest measured simulator speed is 2.6e6 data packets/s (100 flows behind fq_codel, one
# core); half of that leaves room for a machine busy with other work.
SIM_PACKETS_PER_S = 1.3e6
# Events per data packet (send, bottleneck, delivery, ACK, timers): 2.5 for one flow, 2.9 for
# 100, 3.4 behind an AQM's dequeue events (cargo bench -p cclab-sim, events/s over packets/s).
SIM_EVENTS_PER_PACKET = 3.5
# Fixed cost of a run beyond its packets: config parsing, DataFrames, the first flow's setup.
SIM_FIXED_S = 0.2
SIM_FIXED_BYTES = 32 * 2**20
# A series row from the Rust vectors through JSON to a DataFrame: measured 2.6 us and 675 B
# per flow_series row (bench rows_flow_1M), 1.5 us and 297 B per queue_series row
# (rows_queue_1M); about 1.3x that in memory, and the slower time for both.
SIM_S_PER_SERIES_ROW = 4e-6
SIM_BYTES_PER_FLOW_ROW = 900
SIM_BYTES_PER_QUEUE_ROW = 400
# A frame held in the bottleneck queue or a sender's window (packet, scoreboard entry, rate
# sample snapshot, event): measured 460 B with one flow (bench queue_10g_100ms_10bdp: 434 MiB
# for ~990k frames) and about 680 B with 100 (100_flows_10g_200ms_1bdp_30s); 1.2x the larger.
SIM_BYTES_PER_PACKET_HELD = 800
# A flow's sender, receiver, CC and timers, whatever it sends: measured 5.6 KiB and 34 us of
# setup and sampling per flow with 10,000 short flows; about 3x and 1.5x that.
SIM_BYTES_PER_FLOW = 16 * 2**10
SIM_S_PER_FLOW = 50e-6

# ---- kernel engine ----------------------------------------------------------------------------
# Namespaces, qdiscs, the delay line and iperf3's control phase before the first byte, and the
# teardown after the last (measured 3-8 s on this VM).
KERNEL_FIXED_S = 15.0

# ---- soft limits (--force lifts them) ---------------------------------------------------------
# A run a user waits for at the terminal; longer ones are sweeps' business, or deliberate.
SOFT_WALL_S = float(os.environ.get("CCLAB_SOFT_WALL_S", 15 * 60))
# A sixth of this 24 GiB machine: a sweep runs one simulation per core.
SOFT_MEMORY_BYTES = int(float(os.environ.get("CCLAB_SOFT_MEMORY_MIB", 4096)) * 2**20)


@dataclass(frozen=True)
class RunEstimate:
    engine: str
    duration_s: float
    data_packets: int  # full frames the bottleneck can carry in the run
    events: int  # simulator events: per packet, plus one per series row
    series_rows: int  # flow_series + queue_series rows
    packets_held: int  # frames in the queue and the windows at once, at most
    memory_bytes: int
    wall_s: float
    wall_field: str  # the spec field that drives the wall time
    memory_field: str  # ... and the memory

    def to_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine,
            "data_packets": self.data_packets,
            "events": self.events,
            "series_rows": self.series_rows,
            "packets_held": self.packets_held,
            "memory_mib": round(self.memory_bytes / 2**20, 1),
            "wall_s": round(self.wall_s, 2),
        }


def estimate(config: dict, engine: str) -> RunEstimate:
    duration_s = config["duration_ns"] / 1e9
    link = config["bottleneck"]
    flows = config["flows"]
    rate_bps = link["rate_bps"]
    frame_bytes = frame_bytes_of(config)
    data_packets = int(rate_bps * duration_s / (8 * frame_bytes))

    flow_rows = len(flows) * int(config["duration_ns"] // config["flow_sample_interval_ns"] + 2)
    queue_rows = int(config["duration_ns"] // config["queue_sample_interval_ns"] + 2)

    # Frames at once: the queue's limit, plus what the windows keep in flight on the longest
    # path (BBR's cwnd is 2 BDP; a loss-based flow's window is BDP + the queue, counted above).
    longest_rtt_ns = link["rtt_ns"] + max(f["extra_rtt_ns"] for f in flows)
    if link["queue_limit_packets"] is not None:
        queue_frames = link["queue_limit_packets"]
    else:
        queue_frames = link["queue_limit_bytes"] // frame_bytes
    window_frames = 2 * rate_bps * longest_rtt_ns / 1e9 / (8 * frame_bytes)
    packets_held = int(queue_frames + window_frames) + 10 * len(flows)
    events = int(SIM_EVENTS_PER_PACKET * data_packets) + flow_rows + queue_rows

    if engine == "kernel":
        # Real time: the run lasts what it lasts; memory is the kernel's socket buffers.
        wall_s = duration_s + KERNEL_FIXED_S
        return RunEstimate(engine, duration_s, data_packets, events, flow_rows + queue_rows, packets_held,
                           0, wall_s, "duration_s", "duration_s")  # fmt: skip

    packet_s = data_packets / SIM_PACKETS_PER_S
    rows_s = (flow_rows + queue_rows) * SIM_S_PER_SERIES_ROW
    wall_s = SIM_FIXED_S + packet_s + rows_s + len(flows) * SIM_S_PER_FLOW
    if packet_s >= rows_s:
        wall_field = "duration_s"
    else:
        wall_field = _interval_field(flow_rows, queue_rows)

    parts = {
        "bottleneck.buffer": queue_frames * SIM_BYTES_PER_PACKET_HELD,
        "bottleneck.rtt_ms": (window_frames + 10 * len(flows)) * SIM_BYTES_PER_PACKET_HELD,
        "flows": len(flows) * SIM_BYTES_PER_FLOW,
        _interval_field(flow_rows, queue_rows): flow_rows * SIM_BYTES_PER_FLOW_ROW + queue_rows * SIM_BYTES_PER_QUEUE_ROW,
    }
    memory_bytes = int(SIM_FIXED_BYTES + sum(parts.values()))
    memory_field = max(parts, key=parts.__getitem__)
    return RunEstimate(engine, duration_s, data_packets, events, flow_rows + queue_rows, packets_held,
                       memory_bytes, wall_s, wall_field, memory_field)  # fmt: skip


def _interval_field(flow_rows: int, queue_rows: int) -> str:
    if flow_rows >= queue_rows:
        return "output.flow_sample_interval_ms"
    return "output.queue_sample_interval_ms"


class RunTooCostly(CclabError):
    """A run refused before it starts for what it would cost (exit 2, nothing written)."""


def check(run: RunEstimate, *, force: bool = False, where: str = "") -> None:
    """Refuse a run past the soft limits (unless `force`) or past this machine's memory
    (always), in one line naming the field, the estimate and the limit."""
    prefix = f"{where}: " if where else ""
    total = physical_memory_bytes()
    if total is not None and run.memory_bytes > total:
        raise RunTooCostly(
            f"{prefix}{run.memory_field}: the run would need about {_bytes(run.memory_bytes)} of memory "
            f"and this machine has {_bytes(total)} ({_work(run)})"
        )
    if force:
        return
    if run.wall_s > SOFT_WALL_S:
        raise RunTooCostly(
            f"{prefix}{run.wall_field}: the run would take about {_duration(run.wall_s)} on the {run.engine} engine "
            f"({_work(run)}), past the limit of {_duration(SOFT_WALL_S)}; --force runs it anyway"
        )
    if run.memory_bytes > SOFT_MEMORY_BYTES:
        raise RunTooCostly(
            f"{prefix}{run.memory_field}: the run would need about {_bytes(run.memory_bytes)} of memory "
            f"({_work(run)}), past the limit of {_bytes(SOFT_MEMORY_BYTES)}; --force runs it anyway"
        )


def physical_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _work(run: RunEstimate) -> str:
    return (f"{run.duration_s:g} s simulated, {run.data_packets:.3g} packets, {run.events:.3g} events, {run.series_rows:.3g} series rows, "
            f"{run.packets_held:.3g} packets held at once")  # fmt: skip


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.3g} days"


def _bytes(count: float) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size or unit == "KiB":
            value = count / size
            return f"{value:,.0f} {unit}" if value >= 100 else f"{value:.3g} {unit}"
    raise AssertionError("unreachable")
