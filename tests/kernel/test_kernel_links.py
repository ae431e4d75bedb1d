"""Links that change on the real kernel: a schedule applied at its times (tc for tbf, the
delay line for the RTT, iptables for loss) and a Mahimahi trace replayed by the userspace
bottleneck, each against the simulator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import cclab
from kernelcase import assert_sound, requires_kernel_engine, kernel_run_spec

pytestmark = requires_kernel_engine
TRACE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "step_20_4_20mbit.trace"
CEILING = 1448 / 1514


def mean_throughput(result: cclab.RunResult, from_s: float, to_s: float) -> float:
    fs = result.flow_series
    return float(fs[(fs.time_s > from_s) & (fs.time_s <= to_s)].throughput_mbps.mean())


def delivery_slope(result: cclab.RunResult, from_s: float, to_s: float) -> float:
    """The slope of the bytes delivered over (from_s, to_s], fitted to every sample. The
    plain mean of the per-sample rates is the bytes acked between the window's two edges,
    so ACKs held up across an edge move it: on the trace's 3.861 Mbit/s step the kernel's
    flow now and then acks nothing for 100 ms and then 8-11 Mbit/s, and five kernel runs
    gave plain means of 3.859-3.941 Mbit/s (over the 2% bound once, at 2% in two more);
    the slope on the two traced for it, 3.863 (plain 3.939) and 3.858 (plain 3.859). Used
    where it was measured, on the trace's 8 s steps."""
    fs = result.flow_series.sort_values(["flow_id", "time_s"])
    interval_s = fs.groupby("flow_id").time_s.diff().fillna(0.0)
    delivered_mbit = (fs.throughput_mbps * interval_s).groupby(fs.flow_id).cumsum()
    window = (fs.time_s > from_s) & (fs.time_s <= to_s)
    slopes = [np.polyfit(fs.time_s[window & (fs.flow_id == f)], delivered_mbit[window & (fs.flow_id == f)], 1)[0] for f in fs.flow_id[window].unique()]
    return float(sum(slopes))


@pytest.fixture(scope="module")
def scheduled() -> cclab.RunResult:
    # 50 Mbit/s, 20 ms; at 3 s the rate drops to 10 Mbit/s and the RTT grows to 60 ms; at
    # 6 s the rate returns and 1% random loss begins.
    spec = {"duration_s": 9, "bottleneck": {"rate_mbps": 50, "rtt_ms": 20, "schedule": [
        {"at_s": 3, "rate_mbps": 10, "rtt_ms": 60}, {"at_s": 6, "rate_mbps": 50, "loss": 0.01}]}, "flows": [{"cc": "cubic"}]}  # fmt: skip
    return kernel_run_spec(spec)


def test_a_scheduled_rate_change_reaches_tbf_within_a_few_ms_and_the_flow_follows_it(scheduled: cclab.RunResult) -> None:
    assert_sound(scheduled.validity)
    assert mean_throughput(scheduled, 1, 3) > 0.9 * 50 * CEILING
    # The slope, not the plain mean: one CI run's plain mean was 9.84 Mbit/s, 3% over the
    # ceiling, from ACKs bunched across the window's edge (see delivery_slope).
    assert 0.9 * 10 * CEILING < delivery_slope(scheduled, 4, 6) <= 10 * CEILING * 1.02
    changes = scheduled.provenance["link_changes"]["changes"]
    tbf = [c for c in changes if c["by"] == "tc tbf"]
    assert [c["at_s"] for c in tbf] == [3.0, 6.0]
    assert all(0 <= c["late_ms"] < 50 for c in tbf), tbf
    # The loss rule is replaced after the rate, and recorded apart (tens of ms here).
    assert [c["at_s"] for c in changes if c["by"] == "iptables"] == [6.0]


def test_the_delay_line_changes_the_rtt_at_its_time_and_the_flow_sees_it(scheduled: cclab.RunResult) -> None:
    assert_sound(scheduled.validity)
    line = [c for c in scheduled.provenance["link_changes"]["changes"] if c["by"] == "cclab-delayline"]
    assert len(line) == 1 and line[0]["at_s"] == 3.0 and line[0]["late_ms"] < 1.0, line
    fs = scheduled.flow_series
    assert fs[(fs.time_s > 1) & (fs.time_s <= 3)].srtt_ms.min() < 40
    assert fs[(fs.time_s > 4) & (fs.time_s <= 6)].srtt_ms.min() >= 60


def test_random_loss_begins_at_its_time_and_is_counted(scheduled: cclab.RunResult) -> None:
    assert_sound(scheduled.validity)
    flow = scheduled.flows.iloc[0]
    assert flow["random_loss_segments"] > 0
    # CUBIC under 1% loss at 60 ms holds about Mathis's 1.22 MSS / (RTT sqrt(p)) = 2.4 Mbit/s.
    assert mean_throughput(scheduled, 7, 9) < 10


def test_a_trace_replays_in_the_userspace_bottleneck_as_in_the_simulator() -> None:
    spec = {"duration_s": 20, "bottleneck": {"trace": str(TRACE), "rtt_ms": 40, "buffer": "1bdp"}, "flows": [{"cc": "cubic"}]}
    kernel, sim = kernel_run_spec(spec), cclab.run(spec, "sim")
    assert_sound(kernel.validity)
    assert kernel.provenance["aqm"]["implementation"] == "cclab"
    assert kernel.provenance["link_changes"]["trace"].startswith("userspace bottleneck")
    # The trace: 20 Mbit/s for 10 s, then 4 (1448 B of payload per 1500-byte opportunity).
    for (lo, hi), rate in (((2, 10), 20), ((12, 20), 4)):
        k, s = delivery_slope(kernel, lo, hi), delivery_slope(sim, lo, hi)
        assert 0.9 * rate * 1448 / 1500 < k <= rate * 1448 / 1500 * 1.02, (lo, k)
        assert abs(k - s) <= 0.05 * s, (lo, k, s)
    assert abs(kernel.bottleneck["utilization"] - sim.bottleneck["utilization"]) < 0.03
