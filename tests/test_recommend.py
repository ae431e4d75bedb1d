"""`cclab recommend`: answers inside the studied ranges agree with the stored grid and
tree; anything outside them is one line on stderr with exit 2."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest

from cclab.analysis import decision_tree as dt
from cclab.analysis.recommend import MODEL_FILE, load_model, model_from_study, recommend
from cclab.errors import SpecError
from conftest import run_cli


def constructed_grid() -> pd.DataFrame:
    """A grid where BBR wins exactly when the buffer is below the BDP, as the paper
    explains its tree; goodputs and retransmissions are made up but distinct per cell."""
    rows = []
    for rate, rtt, buffer in itertools.product([10, 100, 1000], [5, 50, 200], [1e5, 1e7]):
        bdp = rate * rtt / 8e3 * 1e6
        bbr, cubic = (0.9 * rate, 0.3 * rate) if buffer < bdp else (0.9 * rate, 0.95 * rate)
        rows.append({"rate_mbps": rate, "rtt_ms": rtt, "buffer_bytes": buffer,
                     "goodput_mbps_bbr": bbr, "goodput_mbps_cubic": cubic,
                     "retrans_segments_bbr": rate * rtt, "retrans_segments_cubic": rate + rtt,
                     "data_segments_sent_bbr": 1e6, "data_segments_sent_cubic": 1e6})
    table = pd.DataFrame(rows)
    for name, value in dt.features_of(table["rate_mbps"], table["rtt_ms"], table["buffer_bytes"]).items():
        table[name] = value
    table["winner"] = (table["goodput_mbps_bbr"] > table["goodput_mbps_cubic"]).map({True: "BBR", False: "CUBIC"})
    for cc in ("bbr", "cubic"):
        table[f"loss_pct_{cc}"] = table[f"retrans_segments_{cc}"] / table[f"data_segments_sent_{cc}"] * 100
    return table


LOSS_CURVES = {
    "source": "rebbr", "rate_mbps": 100.0, "rtt_ms": 100.0, "buffer": "1bdp",
    "curves": {
        "bbr": {"loss": [0.0, 0.01, 0.1, 0.5], "goodput_mbps": [90.0, 88.0, 80.0, 1.0]},
        "cubic": {"loss": [0.0, 0.01, 0.1, 0.5], "goodput_mbps": [90.0, 4.0, 0.5, 0.1]},
    },
}


@pytest.fixture(scope="module")
def model() -> dict:
    table = constructed_grid()
    fits = {"paper": dt.fit_tree(table, dt.PAPER_FEATURES), "extended": dt.fit_tree(table, dt.EXTENDED_FEATURES)}
    return {**model_from_study(table, engine="sim", quick=False, duration_s=60.0, fits=fits), "loss_curves": LOSS_CURVES}


@pytest.fixture
def study_dir(tmp_path: Path, model: dict) -> Path:
    (tmp_path / MODEL_FILE).write_text(json.dumps(model))
    return tmp_path


def test_on_a_studied_network_the_goodputs_are_the_stored_ones_and_the_tree_agrees(model):
    answer = recommend(model, rate_mbps=1000, rtt_ms=200, buffer_bytes=1e5)
    assert answer.choice == "BBR"
    assert answer.goodput_mbps == {"bbr": pytest.approx(900.0), "cubic": pytest.approx(300.0)}
    assert answer.retrans_segments == {"bbr": 200_000.0, "cubic": 1200.0}
    assert answer.leaf_purity == 1.0 and answer.leaf_samples >= 3
    assert answer.notes == []


def test_off_grid_queries_use_the_nearest_network_in_log_space(model):
    answer = recommend(model, rate_mbps=30, rtt_ms=6, buffer_bytes=5e6)
    assert answer.nearest == {"rate_mbps": 10.0, "rtt_ms": 5.0, "buffer_bytes": 1e7}
    assert answer.choice == "CUBIC"


def test_random_loss_scales_bbr_by_its_curve_and_caps_cubic_by_its_loss_limited_rate(model):
    answer = recommend(model, rate_mbps=100, rtt_ms=50, buffer_bytes=1e7, loss=0.01)
    assert answer.goodput_mbps["bbr"] == pytest.approx(90.0 * 88.0 / 90.0)
    # CUBIC measured 4 Mbit/s at 1% and 100 ms: at 50 ms, 1/RTT scaling gives 8.
    assert answer.goodput_mbps["cubic"] == pytest.approx(8.0)
    assert answer.choice == "BBR" and "without loss the tree would choose CUBIC" in answer.notes


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"rate_mbps": 5}, "--rate = 5 Mbit/s is outside the studied range 10-1000 Mbit/s"),
        ({"rtt_ms": 300}, "--rtt = 300 ms is outside the studied range 5-200 ms"),
        ({"buffer_bytes": 5e4}, "--buffer = 0.05 MB is outside the studied range 0.1-10 MB"),
        ({"loss": 0.6}, "--loss = 0.6 is above the largest random loss studied (0.5)"),
    ],
)
def test_queries_outside_the_studied_ranges_are_refused(model, query, message):
    network = {"rate_mbps": 100, "rtt_ms": 50, "buffer_bytes": 1e6, **query}
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        recommend(model, **network)


def test_cli_answers_from_a_study_folder(study_dir: Path):
    done = run_cli("recommend", "--rate", "1gbit", "--rtt", "200ms", "--buffer", "100KB", "--study", study_dir, "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["choice"] == "BBR" and answer["goodput_mbps"]["bbr"] == pytest.approx(900.0)
    assert answer["query"] == {"rate_mbps": 1000.0, "rtt_ms": 200.0, "buffer_bytes": 100000.0, "loss": 0.0}
    text = run_cli("recommend", "--rate", "1gbit", "--rtt", "200ms", "--buffer", "100KB", "--study", study_dir)
    assert text.stdout.startswith("recommendation: BBR")
    assert "BBR 900.0 Mbit/s, CUBIC 300.0 Mbit/s" in text.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["--rate", "2gbit", "--rtt", "200ms", "--buffer", "100KB"],
        ["--rate", "500mbit", "--rtt", "200ms", "--buffer", "100KB", "--loss", "70%"],
        ["--rate", "500", "--rtt", "200ms", "--buffer", "100KB"],
    ],
)
def test_cli_refuses_out_of_range_or_malformed_queries_in_one_line_with_exit_2(study_dir: Path, args):
    done = run_cli("recommend", *args, "--study", study_dir)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


def test_a_folder_without_a_model_is_one_line_with_exit_2(tmp_path: Path):
    done = run_cli("recommend", "--rate", "500mbit", "--rtt", "200ms", "--buffer", "100KB", "--study", tmp_path)
    assert done.returncode == 2 and f"no {MODEL_FILE} there" in done.stderr


def test_the_bundled_model_answers_the_headline_network_from_its_own_grid():
    model, source = load_model(None)
    assert model["engine"] == "sim" and not model["quick"] and "bundled" in source
    assert len(model["grid"]["rate_mbps"]) == 320  # 8 rates x 8 RTTs x 5 buffers
    answer = recommend(model, rate_mbps=500, rtt_ms=200, buffer_bytes=1e5)
    grid = pd.DataFrame(model["grid"])
    cell = grid[(grid.rate_mbps == 500) & (grid.rtt_ms == 200) & (grid.buffer_bytes == 1e5)].iloc[0]
    assert answer.goodput_mbps["bbr"] == cell.goodput_mbps_bbr and answer.goodput_mbps["cubic"] == cell.goodput_mbps_cubic
    assert answer.choice == "BBR" and cell.goodput_mbps_bbr > cell.goodput_mbps_cubic


def test_a_later_bbr_version_is_answered_from_its_own_model_and_named_in_the_answer(model):
    # The same grid with a "BBRv3" that loses everywhere: its own tree must answer CUBIC.
    table = constructed_grid()
    table["goodput_mbps_bbr"] = 0.1 * table["rate_mbps"]
    table["winner"] = "CUBIC"
    fits = {"paper": dt.fit_tree(table, dt.PAPER_FEATURES), "extended": dt.fit_tree(table, dt.EXTENDED_FEATURES)}
    with_v3 = {**model, "versions": {"bbr3": model_from_study(table, engine="sim", quick=False, duration_s=60.0, fits=fits)}}
    assert recommend(with_v3, rate_mbps=1000, rtt_ms=200, buffer_bytes=1e5).choice == "BBR"
    answer = recommend(with_v3, rate_mbps=1000, rtt_ms=200, buffer_bytes=1e5, bbr="bbr3")
    assert answer.choice == "CUBIC" and answer.goodput_mbps["bbr"] == pytest.approx(100.0)
    assert set(answer.leaf_counts) == {"CUBIC"}


def test_asking_for_a_bbr_version_the_model_lacks_is_one_line(model):
    with pytest.raises(SpecError, match=r"--bbr bbr2: this model has no BBRv2 grid"):
        recommend(model, rate_mbps=100, rtt_ms=50, buffer_bytes=1e7, bbr="bbr2")
    with pytest.raises(SpecError, match=r"--bbr = 'bbr9' must be one of"):
        recommend(model, rate_mbps=100, rtt_ms=50, buffer_bytes=1e7, bbr="bbr9")


def test_an_answer_resting_on_a_network_whose_runs_had_not_converged_says_so() -> None:
    table = constructed_grid()
    # Only the 10 Mbit/s, 5 ms, 100 KB network was still transient.
    table["transient"] = (table["rate_mbps"] == 10) & (table["rtt_ms"] == 5) & (table["buffer_bytes"] == 1e5)
    fits = {"paper": dt.fit_tree(table, dt.PAPER_FEATURES), "extended": dt.fit_tree(table, dt.EXTENDED_FEATURES)}
    marked = model_from_study(table, engine="sim", quick=False, duration_s=60.0, fits=fits)
    transient = recommend(marked, rate_mbps=10, rtt_ms=5, buffer_bytes=1e5)
    assert any("had not converged" in note for note in transient.notes)
    settled = recommend(marked, rate_mbps=1000, rtt_ms=200, buffer_bytes=1e7)
    assert not any("had not converged" in note for note in settled.notes)
