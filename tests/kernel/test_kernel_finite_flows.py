"""Finite flows (`size_bytes`) on real TCP: every byte arrives, the FCT is timed, and a flow
still going at the end of the run is stopped there."""

from __future__ import annotations

import struct

import pytest

from cclab.engines.kernel import run
from cclab.engines.kernel.finite import IPERF3_COOKIE_BYTES, TCP_ACK, TCP_SYN, is_syn_from, seq_at_or_after, tcp_segment
from cclab.engines.kernel.traffic import block_bytes
from kernelcase import assert_sound, make_config, requires_kernel_engine, kernel_run

FRAME_BYTES = 1514
PAYLOAD_BYTES = 1448
RATE_BPS = 50_000_000
RTT_S = 0.020
ONE_BDP_BYTES = 125_000  # 50 Mbit/s x 20 ms


def floor_fct_s(size_bytes: int) -> float:
    """One RTT of handshake plus the bytes at the payload ceiling of the link."""
    return size_bytes * 8 / (RATE_BPS * PAYLOAD_BYTES / FRAME_BYTES) + RTT_S


@pytest.fixture(scope="module")
def one_flow_result() -> dict:
    config = make_config([{"cc": "cubic", "size_bytes": 5_000_000}], queue_limit_bytes=ONE_BDP_BYTES,
                         duration_ns=4_000_000_000)  # fmt: skip
    return kernel_run(config)


@pytest.fixture(scope="module")
def two_flow_result() -> dict:
    config = make_config([{"cc": "cubic", "size_bytes": 5_000_000}, {"cc": "cubic", "size_bytes": 1_500_000}],
                         queue_limit_bytes=ONE_BDP_BYTES, duration_ns=5_000_000_000)  # fmt: skip
    return run(config)


@requires_kernel_engine
def test_a_5_mb_cubic_flow_delivers_every_byte_and_completes(one_flow_result: dict) -> None:
    flow = one_flow_result["flows"][0]
    assert flow["completed"] is True
    assert flow["bytes_delivered"] == 5_000_000
    assert_sound(one_flow_result["validity"])


@requires_kernel_engine
def test_the_fct_lies_between_the_physical_floor_and_a_generous_bound(one_flow_result: dict) -> None:
    assert_sound(one_flow_result["validity"])
    flow = one_flow_result["flows"][0]
    floor = floor_fct_s(5_000_000)  # 0.857 s
    # Slow start and one loss episode cost a few RTTs; three times the floor means broken.
    assert floor <= flow["fct_s"] <= 3 * floor, (flow["fct_s"], floor)


@requires_kernel_engine
def test_the_fct_is_the_flows_active_interval_and_goodput_follows_from_it(one_flow_result: dict) -> None:
    flow = one_flow_result["flows"][0]
    assert flow["end_s"] - flow["start_s"] == pytest.approx(flow["fct_s"])
    # The flow starts with its data connection's SYN, as the kernel stamped it (how close the
    # engine aims it at the scheduled start is test_kernel_flow_start's: process start-up
    # moves it by a few ms, by 20 ms in this VM's noisy hours).
    syn_s = one_flow_result["provenance"]["flow_starts"][0]["data_syn_s"]
    assert flow["start_s"] == pytest.approx(syn_s, abs=1e-6)
    assert flow["goodput_mbps"] == pytest.approx(5_000_000 * 8 / flow["fct_s"] / 1e6)


@requires_kernel_engine
def test_two_finite_flows_both_complete_and_the_smaller_finishes_first(two_flow_result: dict) -> None:
    big, small = two_flow_result["flows"]
    assert big["completed"] and small["completed"]
    assert big["bytes_delivered"] == 5_000_000
    assert small["bytes_delivered"] == 1_500_000
    assert small["fct_s"] < big["fct_s"]
    # Sharing the link, the pair cannot beat the link carrying both flows' bytes.
    assert big["end_s"] - min(big["start_s"], small["start_s"]) >= floor_fct_s(6_500_000)


@requires_kernel_engine
def test_a_flow_too_big_for_the_run_is_stopped_at_its_end_and_counts_only_bytes_until_then() -> None:
    duration_s = 2.0
    config = make_config([{"cc": "cubic", "size_bytes": 50_000_000}], queue_limit_bytes=ONE_BDP_BYTES,
                         duration_ns=int(duration_s * 1e9))  # fmt: skip
    result = kernel_run(config)
    flow = result["flows"][0]
    assert flow["completed"] is False
    assert flow["fct_s"] is None
    ceiling_bytes = duration_s * RATE_BPS * PAYLOAD_BYTES / FRAME_BYTES / 8  # 11.96 MB
    assert 0.5 * ceiling_bytes < flow["bytes_delivered"] <= ceiling_bytes
    assert flow["end_s"] == pytest.approx(duration_s)
    # Stopping the client at the end is the plan, not a failure.
    assert_sound(result["validity"])


def test_iperf3_blocks_divide_the_flow_size_so_the_client_sends_exactly_it() -> None:
    assert block_bytes(5_000_000) == 125_000
    assert block_bytes(1_500_000) == 125_000
    assert block_bytes(4096) == 4096  # one write
    assert block_bytes(500) == 500
    assert 5_000_000 % block_bytes(5_000_000) == 0
    # A prime size has no usable divisor: iperf3's default block, overshoot under a block.
    assert block_bytes(1_000_003) is None


def _frame(sport: int, flags: int, seq: int = 1, payload_bytes: int = 0, tcp_options_bytes: int = 0) -> bytes:
    eth = b"\x00" * 12 + b"\x08\x00"
    ip = bytes([0x45, 0]) + struct.pack("!H", 20 + 20 + tcp_options_bytes + payload_bytes) + bytes([0, 0, 0x40, 0, 64, 6]) + b"\x00" * 10
    tcp = struct.pack("!HHIIBBHHH", sport, 5201, seq, 0, (5 + tcp_options_bytes // 4) << 4, flags, 65535, 0, 0)
    return eth + ip + tcp + b"\x01" * tcp_options_bytes + b"\x00" * payload_bytes


def test_the_syn_clock_recognises_only_the_flows_own_syn() -> None:
    assert is_syn_from(_frame(40000, TCP_SYN), 40000)
    assert not is_syn_from(_frame(40001, TCP_SYN), 40000)  # another port (iperf3's control connection)
    assert not is_syn_from(_frame(40000, TCP_SYN | TCP_ACK), 40000)
    assert not is_syn_from(_frame(40000, TCP_ACK), 40000)
    assert not is_syn_from(_frame(40000, TCP_SYN)[:30], 40000)  # truncated


def test_the_start_clock_reads_a_segments_payload_past_its_tcp_options_and_seq_across_the_wrap() -> None:
    # A data segment with 12 bytes of timestamp options: 1448 bytes of payload, not 1460.
    segment = tcp_segment(_frame(40000, TCP_ACK, seq=7, payload_bytes=1448, tcp_options_bytes=12))
    assert segment is not None and (segment.sport, segment.seq, segment.payload_bytes) == (40000, 7, 1448)
    assert tcp_segment(_frame(40000, TCP_ACK, tcp_options_bytes=12)).payload_bytes == 0  # a pure ACK
    # The data begins past the cookie, in sequence space that may wrap: the cookie itself
    # (one past the SYN's sequence number) is not data.
    isn = 2**32 - 10
    data_seq = (isn + 1 + IPERF3_COOKIE_BYTES) % 2**32
    assert not seq_at_or_after((isn + 1) % 2**32, data_seq)
    assert seq_at_or_after(data_seq, data_seq)
    assert seq_at_or_after((data_seq + 1448) % 2**32, data_seq)
