"""`cclab reproduce --quick` end to end for cao2019, rebbr and cliff on the simulator:
the sweep runs, the figures and the summary are written, and the summary's numbers are
the ones in the study's own tables."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from cclab.analysis import decision_tree as dt
from cclab.studies import discover, names
from conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.sim


def test_studies_are_discovered_with_a_description_and_a_run_function():
    studies = discover()
    assert list(studies) == names()
    for name in ("cao2019", "rebbr", "cliff"):
        assert studies[name].NAME == name
        assert studies[name].DESCRIPTION
        assert callable(studies[name].run)
    # `--cc` is decided from each study's source, before importing it: the same answer as its signature.
    from inspect import signature

    from cclab.studies import _run_takes_cc

    assert {name: _run_takes_cc(name) for name in studies} == {name: "cc" in signature(s.run).parameters for name, s in studies.items()}


def test_a_study_is_found_without_importing_the_others_or_scikit_learn():
    # Each study imports pandas, matplotlib or scipy; `reproduce` of one (and its refusals)
    # should pay for that one only, and the decision tree's scikit-learn only when it fits one.
    probe = (
        "import sys; from cclab.studies import get_study, names; assert get_study('rebbr').NAME == 'rebbr'; "
        "print(sorted(m for m in sys.modules if m.startswith('cclab.studies.') or m.split('.')[0] in ('sklearn', 'scipy')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['cclab.studies._common', 'cclab.studies.rebbr']"


def test_an_unknown_study_is_one_line_listing_the_known_ones_with_exit_2(tmp_path: Path):
    done = run_cli("reproduce", "cao2091", "--out", tmp_path / "x")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("error: unknown study 'cao2091'; known studies: ") and "cao2019" in done.stderr
    assert not (tmp_path / "x").exists()


@pytest.fixture(scope="module")
def cao_quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cao2019")
    done = run_cli("reproduce", "cao2019", "--quick", "--out", out)
    assert done.returncode == 0, done.stderr
    return out


def test_cao2019_quick_writes_every_figure_as_png_and_svg(cao_quick: Path):
    for stem in ("gain_100KB", "gain_10MB", "retrans_100KB", "utilization", "decision_tree", "decision_tree_extended", "latdec", "buffer_bdp"):
        for suffix in (".png", ".svg"):
            assert (cao_quick / "figures" / f"{stem}{suffix}").stat().st_size > 5000, stem + suffix


def test_cao2019_summary_sets_the_headline_beside_the_paper_and_judges_every_finding(cao_quick: Path):
    summary = (cao_quick / "summary.md").read_text()
    table = pd.read_csv(cao_quick / "goodput.csv")
    headline = table[(table.rate_mbps == 500) & (table.rtt_ms == 200) & (table.buffer_bytes == 100_000)].iloc[0]
    assert f"| goodput at 500 Mbit/s, 200 ms, 100 KB: BBR | 386.0 Mbit/s | {headline.goodput_mbps_bbr:.1f} Mbit/s |" in summary
    assert f"| goodput at 500 Mbit/s, 200 ms, 100 KB: CUBIC | 179.6 Mbit/s | {headline.goodput_mbps_cubic:.1f} Mbit/s |" in summary
    findings = summary.split("## Findings")[1].split("##")[0]
    verdicts = re.findall(r"\*\*(holds|does not hold)\*\*", findings)
    assert len(verdicts) == 7  # three goodput/loss findings, the tree, three LatDec findings
    # The quick grid (10 s flows) still shows the shallow-buffer effect the paper reports.
    assert headline.goodput_mbps_bbr > 3 * headline.goodput_mbps_cubic


def test_cao2019_decision_tree_is_cross_validated_on_the_real_grid(cao_quick: Path):
    table = pd.read_csv(cao_quick / "goodput.csv")
    assert len(table) == 18  # 3 rates x 3 RTTs x 2 buffers, each with both CCs
    assert set(table["winner"]) == {"BBR", "CUBIC"}
    fit = dt.fit_tree(table, dt.PAPER_FEATURES)
    assert len(fit.cv_scores) == 5 and 0.0 <= fit.cv_mean <= 1.0
    summary = (cao_quick / "summary.md").read_text()
    assert f"| rate (Mbit/s), RTT (ms), buffer (MB) | {fit.cv_median:.1%} | {fit.cv_mean:.1%} |" in summary
    model = json.loads((cao_quick / "model.json").read_text())
    assert model["cv"]["paper"]["mean"] == pytest.approx(fit.cv_mean)
    assert len(model["grid"]["rate_mbps"]) == 18


def test_cao2019_latdec_compares_completion_times_of_finite_flows(cao_quick: Path):
    latency = pd.read_csv(cao_quick / "latency.csv")
    assert sorted(latency["size_mb"].unique()) == [10.0, 100.0]
    row = latency.dropna(subset=["latdec_pct"]).iloc[0]
    assert row.latdec_pct == pytest.approx((row.fct_s_cubic - row.fct_s_bbr) / row.fct_s_cubic * 100)
    # 100 MB at 10 Mbit/s takes at least 100e6 x 8 / (10e6 x 1448/1514) s = 83.65 s, less
    # the few milliseconds the tbf-like bottleneck's token bucket lets through at once.
    slowest = latency[(latency.size_mb == 100) & (latency.rate_mbps == 10)]
    floor_s = 100e6 * 8 / (10e6 * 1448 / 1514)
    assert (slowest[["fct_s_bbr", "fct_s_cubic"]] > 0.999 * floor_s).all().all()
    assert (slowest[["fct_s_bbr", "fct_s_cubic"]] < 1.2 * floor_s).all().all()


def test_rebbr_quick_shows_cubic_collapsing_under_loss_while_bbr_holds_and_draws_your_cc_beside_them(tmp_path: Path):
    done = run_cli("reproduce", "rebbr", "--quick", "--cc", EXAMPLES / "cc" / "reno_beta07.bpf.c", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    curves = pd.read_csv(tmp_path / "curves.csv")
    at = curves.set_index(["cc", "loss"])["goodput_mbps"]
    assert at[("cubic", 0.01)] < 0.1 * at[("cubic", 0.0)]
    assert at[("bbr", 0.01)] > 0.9 * at[("bbr", 0.0)]
    # The example is loss-based, as Reno: random loss takes its rate as it takes CUBIC's.
    mine = "reno_beta07.bpf.c:reno_beta07"
    assert at[(mine, 0.01)] < 0.1 * at[(mine, 0.0)]
    assert f"| loss | ideal | BBRv1 | BBRv2 | BBRv3 | CUBIC | {mine} |" in (tmp_path / "summary.md").read_text()
    summary = (tmp_path / "summary.md").read_text()
    assert len(re.findall(r"\*\*(holds|does not hold)\*\*", summary)) == 5
    assert (tmp_path / "figures" / "goodput_vs_loss.svg").exists()
    assert json.loads((tmp_path / "loss_curves.json").read_text())["curves"]["bbr"]["loss"][0] == 0.0


def test_cliff_quick_detects_each_bbr_cliff_from_the_data(tmp_path: Path):
    done = run_cli("reproduce", "cliff", "--quick", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    cliffs = pd.read_csv(tmp_path / "cliffs.csv").set_index("variant")
    # A smaller up-gain falls off earlier, and both BBRs far later than CUBIC and Reno.
    assert cliffs.loc["BBR_1.1", "cliff_loss"] < cliffs.loc["BBR_1.25", "cliff_loss"]
    assert cliffs.loc["CUBIC", "cliff_loss"] < cliffs.loc["BBR_1.1", "cliff_loss"]
    assert cliffs.loc["BBR_1.25", "predicted_cliff_loss"] == pytest.approx(0.2)
    summary = (tmp_path / "summary.md").read_text()
    assert f"cliff at {cliffs.loc['BBR_1.25', 'cliff_loss'] * 100:.1f}%" in summary
    for stem in ("goodput_vs_loss", "retrans_vs_loss"):
        assert (tmp_path / "figures" / f"{stem}.png").exists()


def test_cao2019_with_your_cc_in_bbrs_place_reuses_cubics_runs_and_recommend_names_it(cao_quick: Path, tmp_path: Path):
    import shutil

    out = tmp_path / "cao"
    shutil.copytree(cao_quick, out)  # CUBIC's runs are reused; only the source's run
    runs = out / "runs"
    before = {p.name for p in runs.iterdir() if not p.name.startswith(".")}
    source = EXAMPLES / "cc" / "reno_beta07.bpf.c"
    done = run_cli("reproduce", "cao2019", "--quick", "--cc", source, "--out", out)
    assert done.returncode == 0, done.stderr
    added = {p.name for p in runs.iterdir() if not p.name.startswith(".")} - before
    assert len(added) == 18 + 36  # the grid once and both finite sizes, for the source alone
    label = "reno_beta07.bpf.c:reno_beta07"
    summary = (out / "summary.md").read_text()
    assert summary.startswith(f"# cao2019: when to use {label} (sim engine)")
    assert f"| goodput at 500 Mbit/s, 200 ms, 100 KB: {label} | 386.0 Mbit/s |" in summary
    assert "BBRv2 and BBRv3 beside BBRv1" not in summary
    table = pd.read_csv(out / "goodput.csv")
    assert len(table) == 18 and set(table["winner"]) <= {"BBR", "CUBIC"}  # the tree's labels: BBR's side is the source
    answer = run_cli("recommend", "--study", out, "--rate", "100mbit", "--rtt", "50ms", "--buffer", "10MB")
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.splitlines()[0].split()[1] in (label, "CUBIC") and f"expected goodput: {label} " in answer.stdout


def test_reproduce_refuses_cc_for_a_study_without_a_place_for_it(tmp_path: Path):
    done = run_cli("reproduce", "cliff", "--quick", "--cc", EXAMPLES / "cc" / "reno_beta07.bpf.c", "--out", tmp_path / "r")
    assert done.returncode == 2
    assert done.stderr == "error: --cc: the study cliff has no place for a congestion control of yours; these do: cao2019, fairness-share, kfoury2021, rebbr\n"
    assert not (tmp_path / "r").exists()


def test_a_second_seed_reuses_the_first_seeds_runs_untouched_and_the_summary_shows_their_spread(tmp_path: Path):
    # Shown on cliff, the quickest study with a sweep of its own; every study runs its seeds
    # through the same study_call (cao2019's quick grid would take a minute of the suite).
    out = tmp_path / "cliff"
    assert run_cli("reproduce", "cliff", "--quick", "--out", out).returncode == 0
    runs = out / "runs"
    seed_1 = {str(p.relative_to(runs)): p.stat().st_mtime_ns for p in runs.glob("[!.]*/*") if p.is_file()}
    count = len([p for p in runs.iterdir() if not p.name.startswith(".")])
    done = run_cli("reproduce", "cliff", "--quick", "--seeds", "2", "--out", out)
    assert done.returncode == 0, done.stderr
    assert {name: (runs / name).stat().st_mtime_ns for name in seed_1} == seed_1
    assert len([p for p in runs.iterdir() if not p.name.startswith(".")]) == 2 * count
    assert "## Run-to-run spread\n\n2 seeds per point" in (out / "summary.md").read_text()
    assert (out / "spread.csv").is_file() and (out / "figures" / "spread.png").is_file()


def test_cao2019_says_how_far_the_trees_accuracy_holds_from_one_seed_to_another(cao_quick: Path):
    from cclab.store import load_flows
    from cclab.studies import cao2019

    flows = load_flows(cao_quick)
    flows = flows[flows["size_bytes"].isna()]  # the goodput grid; the LatDec runs are finite
    assert cao2019.seeds_paragraph(flows, "bbr").startswith("One seed per network: run with `--seeds 3`")
    # A second seed where CUBIC's goodput halves on the first three networks: their winners may flip.
    second = flows.assign(repetition=1)
    networks = second[list(dt.NETWORK_KEYS)].drop_duplicates().head(3)
    moved = second.merge(networks, on=list(dt.NETWORK_KEYS)).index
    second.loc[second.index.isin(moved) & (second["cc"] == "cubic"), "goodput_mbps"] *= 0.5
    two = pd.concat([flows.assign(repetition=0), second], ignore_index=True)
    text = cao2019.seeds_paragraph(two, "bbr")
    across = dt.accuracy_across_seeds({r: cao2019.goodput_table(g, "bbr") for r, g in two.groupby("repetition")})
    assert text.startswith(f"Across 2 seeds: a tree fitted on one seed's networks scores {across['own_seed_accuracy']:.1%}")
    winners = [dt.paired_table(g[g["cc"].isin(["bbr", "cubic"])]).set_index(list(dt.NETWORK_KEYS))["winner"] for _, g in two.groupby("repetition")]
    same = (winners[0] == winners[1].reindex(winners[0].index)).mean()
    assert f"{same:.1%} of the {len(winners[0])} networks have the same winner in every seed" in text
