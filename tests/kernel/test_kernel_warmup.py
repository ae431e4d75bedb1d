"""The kernel engine measures over [warmup, end] too, with the whole run beside it."""

from __future__ import annotations

import pytest

from kernelcase import assert_sound, make_config, requires_kernel_engine, kernel_run

pytestmark = requires_kernel_engine


@pytest.fixture(scope="module")
def warm() -> dict:
    # Two CUBIC flows, 20 Mbit/s, 20 ms, 1 BDP, 6 s; the first 2 s are the warm-up.
    config = make_config([{"cc": "cubic"}, {"cc": "cubic"}], rate_bps=20_000_000, queue_limit_bytes=50_000, duration_ns=6_000_000_000)
    config["warmup_ns"] = 2_000_000_000
    return kernel_run(config)


def test_kernel_metrics_cover_the_window_after_the_warmup_and_keep_the_whole_run(warm: dict) -> None:
    assert_sound(warm["validity"])
    for flow in warm["flows"]:
        assert 0 < flow["bytes_delivered"] < flow["whole_run_bytes_delivered"]
        # Goodput over the part of the flow's active interval after the 2 s warm-up.
        active_s = flow["end_s"] - max(flow["start_s"], 2.0)
        assert 3.5 < active_s <= 4.5
        assert flow["goodput_mbps"] == pytest.approx(flow["bytes_delivered"] * 8 / active_s / 1e6)
        assert flow["retrans_segments"] <= flow["whole_run_retrans_segments"]
    link = warm["bottleneck"]
    # Both flows fill the link after the warm-up, and its drops are the window's share of the run's.
    assert link["utilization"] > 0.9
    assert link["drops"] <= link["whole_run_drops"]
    assert sum(f["queue_drop_segments"] for f in warm["flows"]) <= link["whole_run_drops"]


def test_both_engines_name_the_window_and_the_whole_run_alike(warm: dict) -> None:
    import json

    from cclab import _sim
    from cclab.engines.kernel import window

    config = make_config([{"cc": "cubic"}, {"cc": "cubic"}], rate_bps=20_000_000, queue_limit_bytes=50_000, duration_ns=6_000_000_000)
    config["warmup_ns"] = 2_000_000_000
    sim = json.loads(_sim.run_json(json.dumps(config)))
    for table, names in (("flows", window.FLOW_METRICS), ("bottleneck", window.BOTTLENECK_METRICS)):
        kernel_row = warm[table][0] if table == "flows" else warm[table]
        sim_row = sim[table][0] if table == "flows" else sim[table]
        for name in names:
            assert name in kernel_row and f"whole_run_{name}" in kernel_row, (table, name)
            assert name in sim_row and f"whole_run_{name}" in sim_row, (table, name)
