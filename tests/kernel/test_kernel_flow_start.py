"""Flows start when the spec says: the data SYN, not the iperf3 launch, is at start_s.

iperf3 spends about three round trips on its control connection before it connects the
data socket; without launching it that much early, a 60 ms flow started 120 ms after a
20 ms one that the spec starts together (the simulator starts both at 0).
"""

from __future__ import annotations

from cclab.engines.kernel import run
from kernelcase import make_config, requires_kernel_engine

pytestmark = requires_kernel_engine

# Process start-up varies by a few milliseconds on this host.
START_TOLERANCE_S = 0.008


def test_flows_on_paths_of_different_rtt_send_their_syn_at_the_same_start_time() -> None:
    config = make_config([{"cc": "cubic"}, {"cc": "bbr", "extra_rtt_ns": 40_000_000}], rtt_ns=20_000_000, duration_ns=2_000_000_000)
    result = run(config)
    starts = {s["flow_id"]: s for s in result["provenance"]["flow_starts"]}
    assert starts[0]["launch_lead_s"] < starts[1]["launch_lead_s"]  # the longer path is launched earlier
    for flow_id in (0, 1):
        assert abs(starts[flow_id]["data_syn_s"] - 0.0) <= START_TOLERANCE_S, starts[flow_id]
