"""Analysis on constructed data: goodput gain, LatDec, the paired table, loss
percentage, cliff detection, the tree's JSON export, and heatmaps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cclab.analysis import decision_tree as dt
from cclab.analysis.figures import _norm, heatmap_figure, save_figure
from cclab.analysis.loss import cliff_point, ideal_goodput_mbps, loss_pct, predicted_cliff


def test_goodput_gain_is_relative_to_cubic_in_percent_and_undefined_over_zero():
    gains = dt.gain_pct(pd.Series([386.0, 90.0, 5.0]), pd.Series([179.6, 100.0, 0.0]))
    assert gains[0] == pytest.approx((386.0 - 179.6) / 179.6 * 100)  # the paper's 115%
    assert gains[0] == pytest.approx(114.9, abs=0.05)
    assert gains[1] == pytest.approx(-10.0)
    assert math.isnan(gains[2])


def test_latency_decrease_is_positive_when_bbr_finishes_first():
    assert dt.latency_decrease_pct(8.0, 10.0) == pytest.approx(20.0)
    assert dt.latency_decrease_pct(12.0, 10.0) == pytest.approx(-20.0)


def _flows(rows: list[tuple[float, float, float, str, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"rate_mbps": r, "rtt_ms": t, "buffer_bytes": b, "cc": cc, "goodput_mbps": g, "retrans_segments": 10,
             "data_segments_sent": 1000, "bottleneck_utilization": 0.9, "fct_s": np.nan}
            for r, t, b, cc, g in rows
        ]
    )


def test_paired_table_averages_repetitions_labels_the_winner_and_gives_ties_to_cubic():
    flows = _flows([
        (100, 200, 1e5, "bbr", 90.0), (100, 200, 1e5, "bbr", 80.0), (100, 200, 1e5, "cubic", 20.0),
        (10, 5, 1e7, "bbr", 9.0), (10, 5, 1e7, "cubic", 9.5),
        (10, 10, 1e7, "bbr", 9.0), (10, 10, 1e7, "cubic", 9.0),
        (50, 50, 1e6, "bbr", 40.0),  # CUBIC never ran here: dropped
    ])
    table = dt.paired_table(flows).set_index(["rate_mbps", "rtt_ms"])
    assert len(table) == 3
    assert table.loc[(100, 200), "goodput_mbps_bbr"] == pytest.approx(85.0)
    assert table.loc[(100, 200), "gain_pct"] == pytest.approx(325.0)
    assert table.loc[(100, 200), "winner"] == "BBR"
    assert table.loc[(10, 5), "winner"] == "CUBIC"
    assert table.loc[(10, 10), "winner"] == "CUBIC"
    # 100 Mbit/s x 200 ms = 2.5 MB; a 100 KB buffer is 0.04 of it.
    assert table.loc[(100, 200), "bdp_mb"] == pytest.approx(2.5)
    assert table.loc[(100, 200), "buffer_bdp"] == pytest.approx(0.04)


def test_loss_percentage_is_retransmissions_per_segment_sent():
    assert loss_pct(101, 1000) == pytest.approx(10.1)
    assert math.isnan(loss_pct(0, 0))


def test_ideal_goodput_counts_headers_and_random_loss():
    assert ideal_goodput_mbps(100, 0.0) == pytest.approx(100 * 1448 / 1514)
    assert ideal_goodput_mbps(100, 0.5) == pytest.approx(50 * 1448 / 1514)


@pytest.mark.parametrize(("gain", "cliff"), [(1.1, 0.0909), (1.25, 0.2), (1.5, 0.3333)])
def test_predicted_cliff_is_one_minus_one_over_gain(gain, cliff):
    assert predicted_cliff(gain) == pytest.approx(cliff, abs=1e-4)


def test_cliff_is_interpolated_on_log_loss_where_goodput_crosses_half_its_loss_free_value():
    losses = [0.0, 0.01, 0.1, 0.15, 0.25, 0.4]
    goodput = [100.0, 100.0, 98.0, 80.0, 20.0, 5.0]
    # 50 lies halfway from 80 (at 15%) to 20 (at 25%): halfway in log loss is sqrt(0.15 x 0.25).
    assert cliff_point(losses, goodput) == pytest.approx(math.sqrt(0.15 * 0.25))


def test_cliff_from_loss_zero_is_interpolated_linearly_and_order_of_points_does_not_matter():
    assert cliff_point([0.05, 0.0], [0.0, 100.0]) == pytest.approx(0.025)


def test_no_cliff_when_goodput_never_halves_and_repetitions_are_averaged():
    assert math.isnan(cliff_point([0.0, 0.1, 0.2], [100.0, 90.0, 60.0]))
    # Two repetitions at 20%: 30 and 90 average to 60, still above half.
    assert math.isnan(cliff_point([0.0, 0.2, 0.2], [100.0, 30.0, 90.0]))


def test_tree_json_export_reaches_the_same_leaf_as_scikit_learn():
    rng = np.random.default_rng(4)
    table = pd.DataFrame({"rate_mbps": rng.choice([10, 100, 1000], 60), "rtt_ms": rng.choice([5, 50, 200], 60),
                          "buffer_bytes": rng.choice([1e5, 1e7], 60)})
    features = pd.DataFrame([dt.features_of(*row) for row in table.to_numpy()])
    table = pd.concat([table, features.drop(columns=["rate_mbps", "rtt_ms"])], axis=1)
    table["winner"] = np.where(table["buffer_bdp"] < 1, "BBR", "CUBIC")
    fit = dt.fit_tree(table, dt.EXTENDED_FEATURES)
    exported = dt.tree_to_dict(fit.model, fit.features)
    for row in table.itertuples():
        point = dt.features_of(row.rate_mbps, row.rtt_ms, row.buffer_bytes)
        leaf, _ = dt.walk_tree(exported, point)
        predicted = fit.model.predict(np.array([[point[f] for f in fit.features]]))[0]
        assert max(leaf["counts"], key=leaf["counts"].get) == predicted
    assert exported["nodes"][0]["samples"] == fit.n_train == 45
    assert len(fit.cv_scores) == 5 and fit.cv_mean == pytest.approx(1.0)


def test_gain_colour_scale_is_symmetric_and_centred_on_zero():
    norm = _norm(np.array([-30.0, 5.0, 2400.0]), "diverging", None)
    assert norm(0.0) == pytest.approx(0.5)
    assert norm(-2400.0) == pytest.approx(0.0) and norm(2400.0) == pytest.approx(1.0)
    assert 0.0 < norm(-30.0) < 0.5


def test_heatmap_prints_every_cell_value_and_is_saved_as_png_and_svg(tmp_path: Path):
    table = pd.DataFrame({"rtt_ms": [5, 200, 5, 200], "rate_mbps": [10, 10, 1000, 1000], "gain_pct": [-1.5, 3.0, 20.0, 2450.0]})
    figure = heatmap_figure(table, x="rtt_ms", y="rate_mbps", value="gain_pct", kind="diverging",
                            xlabel="RTT (ms)", ylabel="rate (Mbit/s)", colorbar_label="GpGain (%)", title="t")
    texts = {text.get_text() for text in figure.axes[0].texts}
    assert texts == {"-1.5", "3", "20", "2.5k"}
    assert figure.axes[0].get_xlabel() == "RTT (ms)"
    paths = save_figure(figure, tmp_path, "gain")
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 1000 for p in paths)


def _seed_table(flipped: set[tuple[int, int]] = frozenset()) -> pd.DataFrame:
    """A 4 x 4 grid where BBR wins at rates above 100 Mbit/s, with some winners flipped."""
    rows = []
    for rate in (10, 50, 200, 500):
        for rtt in (10, 50, 100, 200):
            bbr_wins = (rate > 100) != ((rate, rtt) in flipped)
            rows.append({"rate_mbps": rate, "rtt_ms": rtt, "buffer_bytes": 100_000, "buffer_mb": 0.1, "winner": "BBR" if bbr_wins else "CUBIC"})
    return pd.DataFrame(rows)


def test_a_tree_scores_the_same_on_every_seed_when_no_winner_moves_between_seeds():
    across = dt.accuracy_across_seeds({1: _seed_table(), 2: _seed_table(), 3: _seed_table()})
    assert across["seeds"] == 3 and across["networks"] == 16
    assert across["label_agreement"] == 1.0
    assert across["other_seed_accuracy_median"] == across["own_seed_accuracy"] == 1.0


def test_winners_that_move_between_seeds_cost_the_tree_accuracy_on_other_seeds():
    noisy = _seed_table({(200, 10), (200, 50), (50, 200)})
    across = dt.accuracy_across_seeds({1: _seed_table(), 2: noisy})
    assert across["label_agreement"] == pytest.approx(13 / 16)
    # On each moved network a tree is right on one seed at most: its own or the other's.
    # (With two seeds, each median is the mean of the two trees.)
    assert across["own_seed_accuracy"] + across["other_seed_accuracy_median"] <= 2 - 3 / 16 + 1e-9
    assert across["other_seed_accuracy_median"] < across["own_seed_accuracy"]


def test_one_seed_has_no_accuracy_across_seeds():
    assert dt.accuracy_across_seeds({1: _seed_table()}) is None
