"""Many flows on the simulator: fairness in a deep buffer, mixed scenarios, the time-series figure."""

from __future__ import annotations

from pathlib import Path

import pytest

import cclab
from cclab.analysis import fairness, queue, timeseries

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_ten_flows_of_one_cc_share_a_deep_buffer_fairly(cc: str) -> None:
    # Over seeds: ten CUBIC flows converge slowly in 5 BDP, and one seed's 30 s gives a
    # Jain index anywhere in 0.80-0.98 (16 seeds, models 18 and 19).
    indices = []
    for seed in range(1, 6):
        spec = {"seed": seed, "duration_s": 30, "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "5bdp"}, "flows": [{"cc": cc, "count": 10}]}
        result = cclab.run(spec)
        assert len(result.flows) == 10
        indices.append(fairness.jain_index(result.flows["goodput_mbps"]))
        # ...and they fill the link between them.
        assert result.flows["goodput_mbps"].sum() > 0.9 * 100 * 1448 / 1514
    assert min(indices) > 0.8 and sorted(indices)[2] > 0.9, indices


def test_mixed_flows_start_late_see_their_own_rtt_and_finite_ones_complete() -> None:
    # Short Reno flows joining a queue that CUBIC keeps full and BBR keeps lossy take
    # several RTOs to finish (9-12 s for 300 KB here), so give them room.
    result = cclab.run(
        {
            "duration_s": 30,
            "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "2bdp"},
            "flows": [
                {"cc": "cubic", "count": 3},
                {"cc": "bbr", "count": 3, "start_s": 2, "extra_rtt_ms": 30},
                {"cc": "reno", "count": 2, "start_s": 4, "size": "300KB"},
            ],
        }
    )
    flows = result.flows.set_index("flow_id")
    first_sample = result.flow_series.groupby("flow_id")["time_s"].min()
    assert (first_sample.loc[3:5] >= 2.0).all()
    assert flows.loc[3:5, "rtt_min_ms"].min() >= 50.0
    assert flows.loc[0:2, "rtt_min_ms"].max() < 25.0
    fct = queue.flow_completion_times(result.flows)
    assert fct["flow_id"].tolist() == [6, 7]
    assert (fct["fct_s"] > 0).all()
    shares = fairness.cc_shares(result.flows, rate_mbps=100)
    assert shares["share"].sum() == pytest.approx(1.0)


def test_the_time_series_figure_is_written_as_png_and_svg(tmp_path: Path) -> None:
    result = cclab.run(
        {"duration_s": 6, "bottleneck": {"rate_mbps": 50, "rtt_ms": 25, "buffer": "1bdp"},
         "flows": [{"cc": "bbr", "count": 2}, {"cc": "cubic", "count": 2}]}
    )  # fmt: skip
    paths = timeseries.run_timeseries(
        result.flow_series, result.queue_series, result.flows, rate_bps=50e6, rtt_s=0.025,
        title="2 BBR vs 2 CUBIC", stem=tmp_path / "overview",
    )  # fmt: skip
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert paths[0].stat().st_size > 10_000
    svg = paths[1].read_text(encoding="utf-8")
    for label in ("queue (BDP)", "time (s)", "BBRv1 (2 flows)", "CUBIC (2 flows)", "drops"):
        assert label in svg
