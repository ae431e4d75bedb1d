"""Flows start when the spec says, on every path RTT.

iperf3 spends about three round trips on its control connection before it connects the
data socket, and two more before the first data byte; without launching it that much
early, a 60 ms flow started 120 ms after a 20 ms one that the spec starts together. The
simulator sends a flow's first data byte one path RTT after its start (after the
handshake), so the engine aims a bulk flow's SYN one RTT before its start, and a finite
flow's SYN (from which its completion time counts) at its start.
"""

from __future__ import annotations

from cclab.engines.kernel import run
from kernelcase import HOST_TIMING_ATTEMPTS, assert_sound, make_config, requires_kernel_engine

pytestmark = requires_kernel_engine

# Process start-up varies by a few milliseconds on this host; on its slow hours (when the
# simulator's own benchmark runs 1.5x slower) iperf3's SYN has left 6-16 ms later than the
# engine aims, one flow more than another. The bound still tells an aimed SYN from one left
# unaimed: a bulk flow's would leave at its start (20 and 60 ms late here), a finite flow's
# three path RTTs (120 ms) after it.
START_TOLERANCE_S = 0.02


def starts_of(config: dict, aimed_s: dict[int, float]) -> dict[int, dict]:
    """The flow starts of a run of `config`, run once more while a SYN left more than
    START_TOLERANCE_S from where the engine aimed it. The last run's soundness is asserted:
    if the host made it late, an aim it missed skips the test (kernelcase.assert_sound)."""
    for _ in range(HOST_TIMING_ATTEMPTS):
        result = run(config)
        starts = {s["flow_id"]: s for s in result["provenance"]["flow_starts"]}
        if all(abs(starts[i]["data_syn_s"] - aim) <= START_TOLERANCE_S for i, aim in aimed_s.items()):
            break
    assert_sound(result["validity"])
    return starts


#: How long past two path RTTs iperf3's data may follow its SYN: measured 0.8-13.7 ms over
#: 300 flows of `cclab validate --set rtt` (at most 8.0 ms in runs of two flows).
DATA_WAIT_TOLERANCE_S = 0.015


def test_bulk_flows_on_paths_of_different_rtt_send_their_syn_one_path_rtt_before_their_start() -> None:
    config = make_config([{"cc": "cubic"}, {"cc": "bbr", "extra_rtt_ns": 40_000_000}], rtt_ns=20_000_000, duration_ns=2_000_000_000)
    starts = starts_of(config, {0: -0.020, 1: -0.060})
    assert starts[0]["launch_lead_s"] < starts[1]["launch_lead_s"]  # the longer path is launched earlier
    for flow_id, path_rtt_s in ((0, 0.020), (1, 0.060)):
        assert abs(starts[flow_id]["data_syn_s"] - (0.0 - path_rtt_s)) <= START_TOLERANCE_S, starts[flow_id]
        # The data follows the handshake and iperf3's cookie and go-ahead: two path RTTs, plus
        # the client's and server's wake-ups (a few ms here).
        data_after_syn_s = starts[flow_id]["first_data_s"] - starts[flow_id]["data_syn_s"]
        assert 2 * path_rtt_s <= data_after_syn_s <= 2 * path_rtt_s + DATA_WAIT_TOLERANCE_S, starts[flow_id]


def test_a_finite_flow_sends_its_syn_at_its_start() -> None:
    config = make_config([{"cc": "cubic", "size_bytes": 200_000, "start_ns": 300_000_000}], rtt_ns=40_000_000, duration_ns=2_000_000_000)
    start = starts_of(config, {0: 0.3})[0]
    assert abs(start["data_syn_s"] - 0.3) <= START_TOLERANCE_S, start
