"""The kernel engine's measurement window (engines/kernel/window.py), on made-up measurements."""

from __future__ import annotations

import pytest

from cclab.engines.kernel import window

WHOLE_FLOW = {
    "flow_id": 0, "cc": "cubic", "start_s": 0.0, "end_s": 20.0, "goodput_mbps": 8.0, "bytes_delivered": 20_000_000,
    "bytes_sent": 20_500_000, "data_segments_sent": 14_200, "retrans_segments": 40, "lost_segments": 40,
    "queue_drop_segments": 30, "random_loss_segments": 10, "rto_count": 1, "rtt_min_ms": 20.0, "rtt_mean_ms": 30.0,
    "rtt_p50_ms": 30.0, "rtt_p95_ms": 40.0, "rtt_max_ms": 90.0, "fct_s": None, "completed": False, "ecn": False,
    "ce_marks_received": 0, "aqm_drop_segments": 0, "rwnd_limited_ms": 180.0, "sndbuf_limited_ms": 20.0,
}  # fmt: skip


def test_without_warmup_the_window_is_the_whole_run() -> None:
    row = window.with_whole_run(WHOLE_FLOW, window.FLOW_METRICS)
    for name in window.FLOW_METRICS:
        assert row[name] == row[f"whole_run_{name}"] == WHOLE_FLOW[name]


def test_the_window_subtracts_the_counters_at_the_warmup_and_keeps_the_whole_run() -> None:
    at_warmup = {"bytes_delivered": 5_000_000, "retrans_segments": 25, "random_loss_segments": 4, "rto_count": 1,
                 "rwnd_limited_ms": 180.0}  # fmt: skip
    row = window.flow_window(WHOLE_FLOW, warmup_s=5.0, at_warmup=at_warmup, srtt_ms_after=[25.0, 35.0])
    assert row["bytes_delivered"] == 15_000_000
    assert row["goodput_mbps"] == pytest.approx(15_000_000 * 8 / 15 / 1e6)  # over the 15 s after the warm-up
    # 15 retransmissions in the window, 6 of them after random losses: 9 bottleneck drops.
    assert (row["retrans_segments"], row["queue_drop_segments"], row["lost_segments"], row["rto_count"]) == (15, 9, 15, 0)
    assert row["rtt_mean_ms"] == 30.0 and row["rtt_max_ms"] == 35.0
    assert row["whole_run_bytes_delivered"] == 20_000_000 and row["whole_run_rtt_max_ms"] == 90.0
    # Time held by the receiver's window all came before the warm-up here.
    assert row["rwnd_limited_ms"] == 0.0 and row["whole_run_rwnd_limited_ms"] == 180.0


def test_the_bottleneck_window_reads_only_the_queue_samples_after_the_warmup() -> None:
    qs = {"time_s": [1.0, 2.0, 3.0, 4.0], "queue_bytes": [90_000, 90_000, 10_000, 30_000],
          "drops": [5, 5, 1, 0], "ce_marks": [0, 0, 0, 0], "utilization": [1.0, 1.0, 0.5, 1.0]}  # fmt: skip
    whole = {"aqm": "fifo", "utilization": 0.9, "drops": 11, "queue_mean_bytes": 55_000.0, "queue_max_bytes": 90_000}
    flows = [{"random_loss_segments": 2}]
    row = window.bottleneck_window(whole, qs, flows, warmup_s=2.0, duration_s=4.0, rate_bps=8_000_000, sent_bytes=1_500_000)
    assert row["queue_mean_bytes"] == 20_000 and row["queue_max_bytes"] == 30_000
    assert (row["drops"], row["overflow_drops"], row["aqm_drops"]) == (1, 1, 0)
    assert row["utilization"] == pytest.approx(0.75)  # 1.5 MB in 2 s at 1 MB/s
    assert row["whole_run_drops"] == 11 and row["whole_run_queue_max_bytes"] == 90_000


def test_the_bytes_at_the_warmup_are_interpolated_between_the_samples_around_it() -> None:
    from types import SimpleNamespace

    from cclab.engines.kernel import assemble

    def sample(bytes_acked: int, retrans: int) -> SimpleNamespace:
        return SimpleNamespace(bytes_acked=bytes_acked, bytes_sent=bytes_acked + 1000, data_segs_out=bytes_acked // 1448,
                               total_retrans=retrans, total_rto=0, rwnd_limited_us=0, sndbuf_limited_us=0)  # fmt: skip

    # Samples every 100 ms; the warm-up ends at 1.0 s, between those of 0.9 and 1.0002 s. The
    # last one before it alone would count 100 ms of bytes into the window's.
    rows = SimpleNamespace(time_s=[0.8, 0.9, 1.0002, 1.1], samples=[sample(800_000, 1), sample(900_000, 2), sample(1_000_200, 3), sample(1_100_000, 3)])
    measured = SimpleNamespace(sampler=SimpleNamespace(flows={0: rows}), warmup_s=1.0, router_at_warmup=None, receiver_at_warmup=None)
    counters = assemble.counters_at_warmup(measured, SimpleNamespace(flow_id=0, index=0))
    assert counters["bytes_delivered"] == 1_000_000
    assert counters["bytes_sent"] == 1_001_000
    assert counters["retrans_segments"] == 2  # a count: the sample before the warm-up
