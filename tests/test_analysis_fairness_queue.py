"""Many-flow metrics on constructed inputs whose answers are known by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from cclab.analysis import fairness, oscillation, queue


def _flow_series(throughputs: dict[int, list[float]], interval_s: float = 0.1) -> pd.DataFrame:
    rows = [
        {"time_s": round((i + 1) * interval_s, 9), "flow_id": fid, "throughput_mbps": v}
        for fid, values in throughputs.items()
        for i, v in enumerate(values)
    ]
    return pd.DataFrame(rows)


def test_jain_index_of_equal_shares_is_one() -> None:
    assert fairness.jain_index([7.5] * 100) == pytest.approx(1.0)


def test_jain_index_of_a_known_skewed_vector() -> None:
    # (1+2+3+4)^2 / (4 * (1+4+9+16)) = 100 / 120
    assert fairness.jain_index([1, 2, 3, 4]) == pytest.approx(100 / 120)
    # one flow takes everything: 1/n
    assert fairness.jain_index([10, 0, 0, 0, 0]) == pytest.approx(1 / 5)


def test_jain_index_is_undefined_for_no_flows_and_nan_when_nobody_got_anything() -> None:
    with pytest.raises(ValueError):
        fairness.jain_index([])
    with pytest.raises(ValueError):
        fairness.jain_index([1, -1])
    assert math.isnan(fairness.jain_index([0, 0]))


def test_jain_over_time_sees_a_flow_that_starves_in_the_second_window() -> None:
    series = _flow_series({0: [10] * 10 + [20] * 10, 1: [10] * 10 + [0] * 10})
    per_window = fairness.jain_over_time(series, window_s=1.0, active_only=False)
    assert per_window["window_start_s"].tolist() == [0.0, 1.0]
    assert per_window["jain"].tolist() == pytest.approx([1.0, 0.5])
    # Counting only active flows, the second window has one flow, trivially fair.
    assert fairness.jain_over_time(series, window_s=1.0)["n_flows"].tolist() == [2, 1]


def test_cc_shares_add_to_one_and_link_share_uses_the_goodput_ceiling() -> None:
    flows = pd.DataFrame({"cc": ["bbr", "bbr", "cubic"], "goodput_mbps": [30.0, 30.0, 20.0]})
    shares = fairness.cc_shares(flows, rate_mbps=100).set_index("cc")
    assert shares.loc["bbr", "share"] == pytest.approx(0.75)
    assert shares.loc["cubic", "n_flows"] == 1
    assert shares.loc["cubic", "link_share"] == pytest.approx(20 / (100 * 1448 / 1514))


def test_cc_shares_count_bytes_so_that_a_short_finite_flow_does_not_inflate_its_cc() -> None:
    # A 60 s CUBIC flow at 50 Mbit/s and a BBR flow that moved 75 MB in 12 s (50 Mbit/s while active).
    flows = pd.DataFrame(
        {"cc": ["cubic", "bbr"], "goodput_mbps": [50.0, 50.0], "bytes_delivered": [375_000_000, 75_000_000]}
    )
    shares = fairness.cc_shares(flows, rate_mbps=100, duration_s=60).set_index("cc")
    assert shares.loc["bbr", "share"] == pytest.approx(75 / 450)
    assert shares.loc["bbr", "goodput_mbps"] == pytest.approx(10.0)
    assert shares["link_share"].sum() < 1


def test_cc_shares_over_time_follow_a_swap_between_ccs() -> None:
    series = _flow_series({0: [30] * 10 + [10] * 10, 1: [10] * 10 + [30] * 10})
    shares = fairness.cc_shares_over_time(series, {0: "bbr", 1: "cubic"}, window_s=1.0)
    assert shares["bbr"].tolist() == pytest.approx([0.75, 0.25])
    quartiles = fairness.share_quartiles(shares).set_index("cc")
    assert quartiles.loc["bbr", "p50"] == pytest.approx(0.5)


def test_throughput_cdf_is_sorted_and_ends_at_one() -> None:
    cdf = fairness.throughput_cdf([5, 1, 3])
    assert cdf["value"].tolist() == [1, 3, 5]
    assert cdf["cdf"].tolist() == pytest.approx([1 / 3, 2 / 3, 1])


def test_dominant_period_of_a_sine_and_of_a_square_wave() -> None:
    t = np.arange(0, 100, 0.1)
    assert oscillation.dominant_period_s(np.sin(2 * np.pi * t / 20), 0.1) == pytest.approx(20, rel=0.02)
    square = np.sign(np.sin(2 * np.pi * t / 7.3))
    assert oscillation.dominant_period_s(square, 0.1) == pytest.approx(7.3, rel=0.02)


def test_dominant_period_survives_noise_and_a_trend() -> None:
    t = np.arange(0, 120, 0.5)
    noisy = 0.5 + 0.3 * np.sin(2 * np.pi * t / 20) + 0.002 * t + np.random.default_rng(3).normal(0, 0.1, t.size)
    assert oscillation.dominant_period_s(noisy, 0.5) == pytest.approx(20, rel=0.05)


def test_no_period_in_noise_a_constant_or_a_ramp() -> None:
    noise = np.random.default_rng(1).normal(size=600)
    assert oscillation.dominant_period_s(noise, 0.1) is None
    assert oscillation.dominant_period_s(np.full(600, 0.5), 0.1) is None
    assert oscillation.dominant_period_s(np.linspace(0, 1, 600), 0.1) is None


def test_a_period_longer_than_half_the_series_is_not_reported() -> None:
    t = np.arange(0, 30, 0.1)
    assert oscillation.dominant_period_s(np.sin(2 * np.pi * t / 20), 0.1) is None


def _queue_series(queue_bytes: list[int], drops: list[int], utilization: list[float], interval_s: float) -> pd.DataFrame:
    times = [round((i + 1) * interval_s, 9) for i in range(len(queue_bytes))]
    return pd.DataFrame({"time_s": times, "queue_bytes": queue_bytes, "drops": drops, "utilization": utilization})


def test_standing_queue_is_the_tenth_percentile_after_the_warm_up() -> None:
    # Warm-up (first 5 s) at 0, then a sawtooth between 100 KB and 199 KB: p10 = 109.9 KB.
    steady = [100_000 + 1_000 * (i % 100) for i in range(1000)]
    series = _queue_series([0] * 500 + steady, [0] * 1500, [1.0] * 1500, interval_s=0.01)
    assert queue.standing_queue_bytes(series, warmup_s=5.0) == pytest.approx(np.quantile(steady, 0.1))
    assert queue.standing_queue_bytes(series, warmup_s=5.0) == pytest.approx(109_900, rel=1e-3)
    with pytest.raises(ValueError):
        queue.standing_queue_bytes(series, warmup_s=100.0)


def test_queue_in_bdp_and_queueing_delay() -> None:
    series = _queue_series([250_000, 125_000], [0, 0], [1.0, 1.0], interval_s=0.001)
    bdp = queue.bdp_bytes(80e6, 0.025)
    assert bdp == 250_000
    assert queue.occupancy(series, bdp)["queue_bdp"].tolist() == [1.0, 0.5]
    # 250 KB at 80 Mbit/s drains in 25 ms: one base RTT.
    assert queue.queueing_delay_ms(series, 80e6)["delay_ms"].tolist() == pytest.approx([25.0, 12.5])


def test_drop_rate_per_second_counts_drops_against_packets_reaching_the_queue() -> None:
    # 12 Mbit/s = 1000 full frames per second at full utilization; 10 ms samples.
    rate_bps = 1514 * 8 * 1000
    drops = [0] * 100 + [1] * 100  # second 2: 100 drops
    series = _queue_series([0] * 200, drops, [1.0] * 200, interval_s=0.01)
    rate = queue.drop_rate(series, rate_bps, bin_s=1.0)
    assert rate["time_s"].tolist() == [0.0, 1.0]
    assert rate["drops_per_s"].tolist() == [0, 100]
    assert rate["drop_percent"].tolist() == pytest.approx([0.0, 100 * 100 / 1100])
    assert queue.steady_loss_percent(series, rate_bps, warmup_s=1.0) == pytest.approx(100 * 100 / 1100, rel=0.01)


def test_retransmission_rate_and_completion_times_per_flow() -> None:
    flows = pd.DataFrame(
        {
            "flow_id": [0, 1, 2],
            "cc": ["bbr", "cubic", "cubic"],
            "data_segments_sent": [1000, 500, 0],
            "retrans_segments": [50, 5, 0],
            "fct_s": [3.5, None, None],
            "completed": [True, False, False],
        }
    )
    rates = queue.retransmission_rate(flows)
    assert rates.iloc[:2].tolist() == pytest.approx([0.05, 0.01])
    assert math.isnan(rates.iloc[2])
    assert queue.aggregate_retransmission_rate(flows) == pytest.approx(55 / 1500)
    assert queue.flow_completion_times(flows)["fct_s"].tolist() == [3.5]
