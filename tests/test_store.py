"""The results store: one flows table, time series with run keys, DuckDB queries, `cclab query`."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from cclab.errors import CclabError
from cclab.results import FLOW_COLUMNS, RunResult
from cclab.store import finished_runs, load_flows, load_series, query
from cclab.sweep import Sweep, expand, run_sweep
from conftest import run_cli

pytestmark = pytest.mark.sim

GRID = {
    "name": "grid",
    "base": {
        "duration_s": 2,
        "seed": 3,
        "bottleneck": {"rate_mbps": 10, "rtt_ms": 20, "buffer": "1bdp", "loss": 0.0},
        "flows": [{"cc": "cubic", "count": 2}],
    },
    "axes": {
        "bottleneck.rate_mbps": [10, 30],
        "bottleneck.buffer": ["40KB", "2bdp", "20pkt"],
        "flows.0": [{"cc": "cubic"}, {"cc": "bbr", "probe_bw_gain": 1.5}],
    },
}


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("grid")
    report = run_sweep(Sweep.from_dict(GRID), out, jobs=2, progress=False)
    assert report.done == 12 and not report.failed
    return out


def test_load_flows_has_one_row_per_flow_per_run_with_spec_and_metric_columns(grid: Path) -> None:
    flows = load_flows(grid)
    assert len(flows) == 12 * 2
    expected = {
        "run_key", "repetition", "seed", "engine", "valid", "duration_s", "rate_mbps", "rtt_ms", "buffer",
        "buffer_bytes", "buffer_bdp", "loss", "n_flows", "flows_0_cc", "flows_0_probe_bw_gain", "probe_bw_gain",
        "bottleneck_utilization", "bottleneck_queue_mean_bytes", "bottleneck_drops", *FLOW_COLUMNS,
    }
    assert expected <= set(flows.columns)
    assert flows["rate_mbps"].dtype == "float64" and flows["goodput_mbps"].dtype == "float64"


def test_load_flows_values_match_each_stored_run_result(grid: Path) -> None:
    flows = load_flows(grid).set_index(["run_key", "flow_id"])
    for spec in expand(Sweep.from_dict(GRID)):
        result = RunResult.read(grid / "runs" / spec.run_key)
        rows = flows.loc[spec.run_key]
        pd.testing.assert_series_equal(
            rows["goodput_mbps"].reset_index(drop=True), result.flows["goodput_mbps"], check_names=False
        )
        assert rows["retrans_segments"].tolist() == result.flows["retrans_segments"].tolist()
        assert rows["cc"].tolist() == result.flows["cc"].tolist() == [spec.axis_values["flows.0"]["cc"]] * 2
        assert set(rows["rate_mbps"]) == {spec.axis_values["bottleneck.rate_mbps"]}
        assert set(rows["buffer"]) == {spec.axis_values["bottleneck.buffer"]}
        assert set(rows["seed"]) == {3} and set(rows["n_flows"]) == {2} and set(rows["engine"]) == {"sim"}
        assert set(rows["bottleneck_utilization"]) == {result.bottleneck["utilization"]}
        limit = result.spec["bottleneck"]
        buffer_bytes = limit["queue_limit_bytes"] or limit["queue_limit_packets"] * 1514
        assert set(rows["buffer_bytes"]) == {buffer_bytes}
        bdp_bytes = limit["rate_bps"] * limit["rtt_ns"] / 8e9
        assert rows["buffer_bdp"].iloc[0] == pytest.approx(buffer_bytes / bdp_bytes)
        gain = spec.axis_values["flows.0"].get("probe_bw_gain")
        if gain is None:
            assert rows["probe_bw_gain"].isna().all()
        else:
            assert set(rows["probe_bw_gain"]) == {gain}


def test_the_2bdp_buffer_is_twice_the_bdp_and_20pkt_counts_frames(grid: Path) -> None:
    flows = load_flows(grid)
    assert set(flows.loc[flows["buffer"] == "2bdp", "buffer_bdp"].round(6)) == {2.0}
    assert set(flows.loc[flows["buffer"] == "20pkt", "buffer_bytes"]) == {20 * 1514}


def test_load_flows_works_on_a_partial_sweep_and_ignores_a_stale_table(grid: Path, tmp_path: Path) -> None:
    partial = tmp_path / "partial"
    shutil.copytree(grid, partial)
    keys = sorted(finished_runs(partial))
    assert (partial / "flows.parquet").is_file()
    # A run gone since the table was written, and one the table does not know yet.
    shutil.rmtree(partial / "runs" / keys[0])
    full = load_flows(grid)
    missing = full[full["run_key"] == keys[1]]
    cached = pd.read_parquet(partial / "flows.parquet")
    cached[cached["run_key"] != keys[1]].to_parquet(partial / "flows.parquet", index=False)
    flows = load_flows(partial)
    assert set(flows["run_key"]) == set(keys[1:])
    again = flows[flows["run_key"] == keys[1]].reset_index(drop=True)
    pd.testing.assert_frame_equal(again[missing.columns], missing.reset_index(drop=True), check_dtype=False)
    # Without the table at all, every run folder is read.
    (partial / "flows.parquet").unlink()
    assert len(load_flows(partial)) == len(flows)


def test_an_empty_or_missing_folder_gives_an_empty_table_with_the_columns(tmp_path: Path) -> None:
    flows = load_flows(tmp_path)
    assert flows.empty and {"run_key", "rate_mbps", "goodput_mbps"} <= set(flows.columns)
    series = load_series(tmp_path, "queue_series")
    assert series.empty and list(series.columns)[:2] == ["run_key", "time_s"]


def test_load_series_stacks_every_runs_series_with_its_run_key(grid: Path) -> None:
    for name in ("flow_series", "queue_series", "events"):
        series = load_series(grid, name)
        assert list(series.columns)[0] == "run_key"
        for key, folder in finished_runs(grid).items():
            alone = pd.read_parquet(folder / f"{name}.parquet")
            part = series[series["run_key"] == key]
            assert len(part) == len(alone)
            assert part["time_s"].sort_values().tolist() == alone["time_s"].sort_values().tolist()
    queue = load_series(grid, "queue_series")
    # Sweeps sample the queue every 10 ms: 2 s gives 200 samples per run.
    assert queue.groupby("run_key").size().eq(200).all()


def test_load_series_rejects_an_unknown_series_name(grid: Path) -> None:
    with pytest.raises(CclabError, match="series: must be one of"):
        load_series(grid, "nope")


def test_query_runs_sql_over_the_flows_and_series_views(grid: Path) -> None:
    per_cc = query(grid, "SELECT cc, count(*) AS n, avg(goodput_mbps) AS goodput FROM flows GROUP BY cc ORDER BY cc")
    flows = load_flows(grid)
    assert per_cc["cc"].tolist() == ["bbr", "cubic"]
    assert per_cc["n"].tolist() == [12, 12]
    assert per_cc["goodput"].tolist() == pytest.approx(flows.groupby("cc")["goodput_mbps"].mean().sort_index().tolist())
    joined = query(
        grid,
        "SELECT f.cc, max(q.queue_bytes) AS peak FROM queue_series q JOIN (SELECT DISTINCT run_key, cc FROM flows) f "
        "USING (run_key) GROUP BY f.cc ORDER BY f.cc",
    )
    assert len(joined) == 2 and (joined["peak"] > 0).all()
    assert query(grid, "SELECT count(*) AS n FROM events")["n"].iloc[0] == len(load_series(grid, "events"))


def test_a_bad_query_is_one_line_with_exit_2(grid: Path) -> None:
    with pytest.raises(CclabError, match="^query: "):
        query(grid, "SELECT nope FROM flows")
    done = run_cli("query", grid, "SELECT * FROM no_such_table")
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: query: ")


def test_cclab_query_prints_a_table_csv_or_json(grid: Path) -> None:
    sql = "SELECT cc, rate_mbps, count(*) AS n FROM flows GROUP BY ALL ORDER BY ALL"
    table = run_cli("query", grid, sql)
    assert table.returncode == 0, table.stderr
    lines = [line for line in table.stdout.splitlines() if "bbr" in line or "cubic" in line]
    assert len(lines) == 4 and all(line.split()[-1] == "6" for line in lines)
    assert "rate_mbps" in table.stdout.splitlines()[0]
    csv = run_cli("query", grid, sql, "--csv")
    assert pd.read_csv(io.StringIO(csv.stdout)).to_dict("records") == [
        {"cc": "bbr", "rate_mbps": 10.0, "n": 6}, {"cc": "bbr", "rate_mbps": 30.0, "n": 6},
        {"cc": "cubic", "rate_mbps": 10.0, "n": 6}, {"cc": "cubic", "rate_mbps": 30.0, "n": 6},
    ]
    as_json = run_cli("query", grid, sql, "--json")
    assert json.loads(as_json.stdout)[0] == {"cc": "bbr", "rate_mbps": 10.0, "n": 6}


def test_an_axis_of_mixed_kinds_is_stored_as_text_as_toml_spells_it(tmp_path: Path) -> None:
    from cclab.store import load_flows, write_flows_table
    from cclab.sweep import Sweep, run_sweep

    sweep = Sweep(name="ecn", base={"duration_s": 1, "bottleneck": {"rate_mbps": 10, "rtt_ms": 20}, "flows": [{"cc": "cubic"}]},
                  axes={"flows.0.ecn": [False, True, "accecn"]})  # fmt: skip
    run_sweep(sweep, tmp_path, progress=False)
    write_flows_table(tmp_path)  # a mixed column would not convert to Parquet
    flows = load_flows(tmp_path).sort_values("flows_0_ecn")
    assert list(flows["flows_0_ecn"]) == ["accecn", "false", "true"]
    assert list(flows["ecn"]) == [True, False, True]  # what the flow negotiated
