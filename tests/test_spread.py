"""Run-to-run spread across seeds: the analysis and `cclab reproduce --seeds`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from cclab.analysis.spread import seed_spread, seed_spread_note
from conftest import run_cli


def _flows(goodputs_by_seed: dict[int, list[float]]) -> pd.DataFrame:
    rows = []
    for seed, goodputs in goodputs_by_seed.items():
        for flow_id, goodput in enumerate(goodputs):
            rows.append({"run_key": f"k{seed}", "sweep": "s", "repetition": seed - 1, "seed": seed, "rate_mbps": 50.0,
                         "rtt_ms": 20.0, "flow_id": flow_id, "cc": "cubic", "goodput_mbps": goodput})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_spread_is_each_flows_interquartile_range_across_seeds():
    flows = _flows({1: [10.0, 30.0], 2: [20.0, 20.0], 3: [30.0, 10.0], 4: [40.0, 0.0], 5: [50.0, 30.0]})
    table = seed_spread(flows).set_index("flow_id")
    assert table.loc[0, "seeds"] == 5 and table.loc[0, "median"] == 30.0
    assert table.loc[0, "iqr"] == pytest.approx(40.0 - 20.0)
    assert table.loc[1, "iqr"] == pytest.approx(30.0 - 10.0)
    assert "5 seeds per point" in seed_spread_note(flows)


def test_one_seed_says_how_to_see_the_spread():
    assert "--seeds" in seed_spread_note(_flows({1: [10.0, 30.0]}))


def test_run_study_runs_every_sweep_with_the_seeds_asked_for(tmp_path: Path):
    from cclab.studies import run_study
    from cclab.studies._common import run_study_sweep
    from cclab.sweep import Sweep

    sweep = Sweep(name="tiny", base={"duration_s": 1, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20}, "flows": [{"cc": "cubic"}, {"cc": "cubic"}]})

    def run(out_dir: Path, **options: object) -> Path:
        flows, _ = run_study_sweep(sweep, out_dir, engine="sim", jobs=1, include_invalid=False)
        assert sorted(flows["repetition"].unique()) == [0, 1, 2]
        (out_dir / "summary.md").write_text("# tiny\n", encoding="utf-8")
        return out_dir / "summary.md"

    summary = run_study(SimpleNamespace(run=run), tmp_path, seeds=3).read_text(encoding="utf-8")
    assert "## Run-to-run spread\n\n3 seeds per point" in summary
    spread = pd.read_csv(tmp_path / "spread.csv")
    assert len(spread) == 2 and (spread["seeds"] == 3).all()
    assert (spread["p25"] <= spread["median"]).all() and (spread["median"] <= spread["p75"]).all()
    assert (tmp_path / "figures" / "spread.png").stat().st_size > 5000
    assert "![spread](figures/spread.png)" in summary


def test_reproduce_refuses_zero_seeds_in_one_line(tmp_path: Path):
    done = run_cli("reproduce", "cao2019", "--quick", "--seeds", "0", "--out", tmp_path / "x")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--seeds: must be at least 1 (got 0)" in done.stderr
    assert not (tmp_path / "x").exists()


def test_run_study_reports_on_this_calls_runs_not_on_older_runs_in_the_folder(tmp_path: Path):
    from cclab.studies import run_study
    from cclab.studies._common import run_study_sweep
    from cclab.sweep import Sweep

    def study_of(rate_mbps: int) -> SimpleNamespace:
        sweep = Sweep(name="grid", base={"duration_s": 1, "bottleneck": {"rate_mbps": rate_mbps, "rtt_ms": 20}, "flows": [{"cc": "cubic"}]})

        def run(out_dir: Path, **options: object) -> Path:
            run_study_sweep(sweep, out_dir, engine="sim", jobs=1, include_invalid=False)
            (out_dir / "summary.md").write_text("# grid\n", encoding="utf-8")
            return out_dir / "summary.md"

        return SimpleNamespace(run=run)

    run_study(study_of(20), tmp_path, seeds=2)
    run_study(study_of(30), tmp_path, seeds=2)  # the same folder, another grid: 20 Mbit/s is stale
    spread = pd.read_csv(tmp_path / "spread.csv")
    assert spread["rate_mbps"].tolist() == [30.0]
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "of 2 runs" in summary.split("## Steady state")[1].split("##")[0]


def test_a_sweep_report_shows_each_flows_spread_across_repetitions(tmp_path: Path):
    from cclab.report.sweep import render_sweep
    from cclab.sweep import Sweep, run_sweep

    sweep = Sweep(name="seeds", repetitions=3,
                  base={"duration_s": 2, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20}, "flows": [{"cc": "cubic"}, {"cc": "cubic", "extra_rtt_ms": 20}]})  # fmt: skip
    run_sweep(sweep, tmp_path, jobs=1, progress=False)
    html = render_sweep(tmp_path, "seeds")
    assert "Run-to-run spread" in html and "3 seeds per point" in html
    from cclab.store import load_flows

    iqr = seed_spread(load_flows(tmp_path)).set_index("flow_id")["iqr"]
    assert iqr.gt(0).any()  # the jitter makes the seeds differ
    from cclab.report.page import cell_text

    for value in iqr:
        assert f">{cell_text(float(value))}<" in html
