"""Storing and reading a result (cclab.results), on a constructed engine result."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from cclab import results
from cclab.errors import CclabError, EngineError
from cclab.results import FLOW_SERIES_COLUMNS, FORMAT_VERSION, RunResult
from cclab.spec import Scenario
from cclab.summary import render_summary
from conftest import VALID_SPEC, constructed_engine_output

RESULT_FILES = {"flows.parquet", "flow_series.parquet", "queue_series.parquet", "events.parquet", "spec.json", "result.json"}


@pytest.fixture
def result(write_spec) -> RunResult:
    spec = Scenario.from_toml(write_spec(VALID_SPEC)).resolve()
    return RunResult.from_engine_output(constructed_engine_output(), spec=spec, engine="sim")


def test_json_dict_uses_the_contract_names_with_nulls_not_nans(result: RunResult) -> None:
    data = result.to_json_dict()
    assert list(data) == ["flows", "bottleneck", "flow_series", "queue_series", "events", "stats", "spec", "provenance", "validity", "steady_state"]
    assert data["validity"] is None  # only the kernel engine judges its runs
    assert data["flows"] == constructed_engine_output()["flows"]
    assert data["flow_series"]["bbr_bw_mbps"] == [None, 45.0, None, 46.0]
    assert data["flow_series"]["cc_mode"] == [None, "STARTUP", None, "DRAIN"]
    assert data["events"]["flow_id"] == [None, 1]
    json.dumps(data, allow_nan=False)  # strict JSON: would raise on a NaN


def test_provenance_names_format_engine_seed_and_version(result: RunResult) -> None:
    assert result.provenance["format_version"] == FORMAT_VERSION
    assert result.provenance["engine"] == "sim"
    assert result.provenance["seed"] == 7
    assert result.provenance["cclab_version"]
    assert "git_revision" in result.provenance


def test_an_engine_can_add_its_own_provenance(write_spec) -> None:
    output = constructed_engine_output() | {"provenance": {"kernel_release": "6.1.0"}}
    spec = Scenario.from_toml(write_spec(VALID_SPEC)).resolve()
    run = RunResult.from_engine_output(output, spec=spec, engine="kernel")
    assert run.provenance["kernel_release"] == "6.1.0"
    assert run.provenance["engine"] == "kernel"


def test_an_invalid_kernel_run_keeps_its_reasons_and_says_so_in_the_summary(write_spec, tmp_path: Path) -> None:
    output = constructed_engine_output() | {"validity": {"valid": False, "reasons": ["softnet drops grew"]}}
    spec = Scenario.from_toml(write_spec(VALID_SPEC)).resolve()
    run = RunResult.from_engine_output(output, spec=spec, engine="kernel")
    assert RunResult.read(run.write(tmp_path / "results" / "run")).validity == output["validity"]
    console = Console(record=True, width=200)
    console.print(render_summary(run))
    assert "INVALID RUN: softnet drops grew" in console.export_text()


def test_tables_have_fixed_column_types(result: RunResult) -> None:
    assert list(result.flow_series.columns) == list(FLOW_SERIES_COLUMNS)
    assert result.flow_series["flow_id"].dtype == "int64"
    assert result.flow_series["bbr_bw_mbps"].dtype == "float64"
    assert result.flows["fct_s"].isna().tolist() == [True, False]


def test_write_then_read_round_trips_every_table_and_document(result: RunResult, tmp_path: Path) -> None:
    out = result.write(tmp_path / "run")
    assert {p.name for p in out.iterdir()} == RESULT_FILES
    back = RunResult.read(out)
    assert back.to_json_dict() == result.to_json_dict()
    for name in ("flows", "flow_series", "queue_series", "events"):
        pd.testing.assert_frame_equal(getattr(back, name), getattr(result, name))
    stored = json.loads((out / "result.json").read_text())
    assert set(stored) == {"flows", "bottleneck", "stats", "provenance", "validity", "steady_state"}
    assert json.loads((out / "spec.json").read_text()) == result.spec


def test_a_result_stored_before_a_column_existed_reads_with_that_column_null(result: RunResult, tmp_path: Path) -> None:
    # Results of model 8 and older have no rwnd_limited_ms; their runs stay usable.
    out = result.write(tmp_path / "run")
    flows = pd.read_parquet(out / "flows.parquet").drop(columns=["rwnd_limited_ms"])
    flows.to_parquet(out / "flows.parquet")
    back = RunResult.read(out)
    assert back.flows["rwnd_limited_ms"].isna().all()
    assert list(back.flows["goodput_mbps"]) == list(result.flows["goodput_mbps"])


def test_an_interrupted_write_leaves_no_directory_behind(result: RunResult, tmp_path: Path, monkeypatch) -> None:
    written = []

    def interrupt_at_result_json(path: Path, data: object) -> None:
        written.append(path.name)
        if path.name == "result.json":
            raise KeyboardInterrupt

    monkeypatch.setattr(results, "_write_json", interrupt_at_result_json)
    with pytest.raises(KeyboardInterrupt):
        result.write(tmp_path / "results" / "new" / "run")
    assert written == ["spec.json", "result.json"]  # the failure came after files were staged
    assert not (tmp_path / "results").exists()  # neither the result nor the parents it created


def test_a_failed_rewrite_keeps_the_previous_result(result: RunResult, tmp_path: Path, monkeypatch) -> None:
    out = result.write(tmp_path / "results" / "run")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fail(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", fail)
    with pytest.raises(OSError, match="disk full"):
        result.write(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in out.parent.iterdir()] == ["run"]


def test_rewriting_replaces_the_previous_result(result: RunResult, tmp_path: Path) -> None:
    out = result.write(tmp_path / "results" / "run")
    result.bottleneck = {**result.bottleneck, "drops": 99}
    result.write(out)
    assert RunResult.read(out).bottleneck["drops"] == 99
    assert [p.name for p in out.parent.iterdir()] == ["run"]


def test_reading_a_directory_that_is_not_a_result_says_so(tmp_path: Path) -> None:
    with pytest.raises(CclabError, match="not a cclab result directory"):
        RunResult.read(tmp_path)


def test_an_engine_result_missing_a_table_is_an_engine_error(write_spec) -> None:
    output = constructed_engine_output()
    del output["queue_series"]
    with pytest.raises(EngineError, match="queue_series"):
        RunResult.from_engine_output(output, spec=Scenario.from_toml(write_spec(VALID_SPEC)).resolve(), engine="sim")


def test_the_summary_shows_each_flow_and_the_bottleneck(result: RunResult) -> None:
    console = Console(record=True, width=200)
    console.print(render_summary(result))
    text = console.export_text()
    assert "cubic" in text and "bbr" in text
    assert "40.50" in text and "41.50" in text  # goodput of each flow
    assert "3.250" in text  # the finite flow's FCT
    assert "utilization 97.0%" in text
    # 80,000.5 B of backlog at 50 Mbit/s is 12.8 ms of queueing delay.
    assert "mean 80,000 B (12.80 ms)" in text


@pytest.mark.sim
@pytest.mark.parametrize("spec", [
    {"duration_s": 1, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20, "aqm": "dualpi2"}, "flows": [{"cc": "dctcp", "ecn": True}, {"cc": "cubic"}]},
    {"duration_s": 1, "bottleneck": {"rate_mbps": 20, "rtt_ms": 20, "buffer": "0.2bdp"}, "flows": [{"cc": "bbr3"}, {"cc": "reno", "size": "50KB"}]},
])  # fmt: skip
def test_tables_built_at_their_types_equal_a_frame_typed_column_by_column(spec: dict) -> None:
    # `_table` builds each column at its type in one step; reading a stored result types a
    # frame column by column (`_typed`): both must give the same frame, nulls and types included.
    from cclab import _sim
    from cclab.spec import load

    output = json.loads(_sim.run_json(json.dumps(load(spec).resolve()), None))
    tables = {"flows": (results._rows_to_columns(output["flows"]), results.FLOW_COLUMNS)}
    tables.update({name: (output[name], schema) for name, schema in results._TABLES.items()})
    for name, (columns, schema) in tables.items():
        typed_by_column = results._typed(pd.DataFrame({key: list(values) for key, values in columns.items()}), schema)
        pd.testing.assert_frame_equal(results._table(columns, schema), typed_by_column, check_exact=True, obj=name)
