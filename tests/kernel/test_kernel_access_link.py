"""The senders' access link on the real kernel (`[host] access_rate_mbps`): a tbf on each sender's
interface, recorded in provenance, and, as in the simulator, a NIC much faster than the bottleneck
overflows a shallow buffer more than one at the bottleneck's rate."""

from __future__ import annotations

import cclab
from kernelcase import assert_sound, kernel_run_spec, requires_kernel_engine

pytestmark = requires_kernel_engine


def spec(access_rate_mbps: float) -> dict:
    # 100 Mbit/s, 20 ms, a tenth of the BDP (25 KB, 16 frames).
    return {"duration_s": 5, "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "0.1bdp"}, "flows": [{"cc": "cubic"}],
            "host": {"access_rate_mbps": access_rate_mbps}}  # fmt: skip


def test_a_fast_access_link_overflows_a_shallow_buffer_more_than_one_at_the_bottlenecks_rate() -> None:
    fast, matched = kernel_run_spec(spec(10_000)), kernel_run_spec(spec(100))
    for result, rate_bps in ((fast, 10_000_000_000), (matched, 100_000_000)):
        assert_sound(result.validity)
        assert result.provenance["access_link"]["rate_bps"] == rate_bps
        assert result.provenance["access_link"]["qdisc"] == "tbf"
    assert fast.flows.iloc[0].retrans_segments > 1.5 * matched.flows.iloc[0].retrans_segments
    # The simulator orders them the same way.
    sim_fast, sim_matched = (cclab.run(spec(rate), "sim").flows.iloc[0] for rate in (10_000, 100))
    assert sim_fast.retrans_segments > 1.5 * sim_matched.retrans_segments
