"""The receiver's window on both engines: a long-RTT BBR flow in STARTUP next to a short
one waits for it, and both engines report that time as `rwnd_limited_ms`."""

from __future__ import annotations

import json

import pytest

from cclab import _sim
from kernelcase import make_config, requires_kernel_engine, run_valid

pytestmark = requires_kernel_engine

DURATION_S = 3


@pytest.fixture(scope="module")
def bbr_pair_1_to_4() -> dict:
    # 50 Mbit/s, 20 ms, 1 BDP; the second flow's path is 60 ms longer.
    return make_config([{"cc": "bbr"}, {"cc": "bbr", "extra_rtt_ns": 60_000_000}], duration_ns=DURATION_S * 1_000_000_000)


def test_the_long_rtt_flow_waits_for_the_receive_window_on_both_engines(bbr_pair_1_to_4: dict) -> None:
    for engine, result in (("kernel", run_valid(bbr_pair_1_to_4)), ("sim", json.loads(_sim.run_json(json.dumps(bbr_pair_1_to_4), None)))):
        short, long = result["flows"]
        # Kernel engine, three seeds: 152-256 ms for the long flow, 12-28 ms for the short one.
        assert long["rwnd_limited_ms"] > 40, (engine, long["rwnd_limited_ms"])
        assert long["rwnd_limited_ms"] > short["rwnd_limited_ms"], engine
        assert all(0 <= f["rwnd_limited_ms"] <= DURATION_S * 1000 for f in result["flows"]), engine
