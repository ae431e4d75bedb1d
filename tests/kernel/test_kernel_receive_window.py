"""The receiver's window on both engines: a long-RTT BBR flow in STARTUP next to a short
one waits for it, and both engines report that time as `rwnd_limited_ms`."""

from __future__ import annotations

import json

import pytest

from cclab import _sim
from kernelcase import make_config, requires_kernel_engine, kernel_run

pytestmark = requires_kernel_engine

DURATION_S = 3
#: Kernel runs tried before giving up: about one run in ten takes the even mode, where the two
#: STARTUPs split the link early and the long flow never meets the window (measured here: 0 ms
#: in 1 of 10 runs, 92-300 ms in the others).
KERNEL_ATTEMPTS = 3


@pytest.fixture(scope="module")
def bbr_pair_1_to_4() -> dict:
    # 50 Mbit/s, 20 ms, 1 BDP; the second flow's path is 60 ms longer.
    return make_config([{"cc": "bbr"}, {"cc": "bbr", "extra_rtt_ns": 60_000_000}], duration_ns=DURATION_S * 1_000_000_000)


def held_by_the_window(result: dict) -> bool:
    short, long = result["flows"]
    return long["rwnd_limited_ms"] > 40 and long["rwnd_limited_ms"] > short["rwnd_limited_ms"]


def test_the_long_rtt_flow_waits_for_the_receive_window_on_both_engines(bbr_pair_1_to_4: dict) -> None:
    # The simulator has the even mode too (seeds move BBR's random PROBE_BW phase): most
    # seeds, as most kernel runs, hold the long flow.
    sims = [json.loads(_sim.run_json(json.dumps({**bbr_pair_1_to_4, "seed": seed}), None)) for seed in range(1, 11)]
    sim_seen = [[f["rwnd_limited_ms"] for f in sim["flows"]] for sim in sims]
    assert sum(held_by_the_window(sim) for sim in sims) >= 7, sim_seen
    seen = []
    for _ in range(KERNEL_ATTEMPTS):
        kernel = kernel_run(bbr_pair_1_to_4)
        assert all(0 <= f["rwnd_limited_ms"] <= DURATION_S * 1000 for f in kernel["flows"])
        seen.append([f["rwnd_limited_ms"] for f in kernel["flows"]])
        if held_by_the_window(kernel):
            break
    else:
        pytest.fail(f"no kernel run held the long flow at the window: {seen}")
