"""Sweep files: expansion into runs, skip rules, seeds, run keys, and one-line errors."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from cclab.errors import SpecError
from cclab.sweep import Sweep, expand, expand_all, run_key
from conftest import run_cli

BASE = {
    "duration_s": 2,
    "seed": 5,
    "bottleneck": {"rate_mbps": 10, "rtt_ms": 10, "buffer": "1bdp"},
    "flows": [{"cc": "cubic"}],
}


def sweep(**fields) -> Sweep:
    return Sweep.from_dict({"base": copy.deepcopy(BASE), **fields})


def test_the_grid_has_one_run_per_combination_of_axis_values_and_repetition() -> None:
    runs = expand(
        sweep(
            axes={"bottleneck.rate_mbps": [10, 20, 50], "bottleneck.rtt_ms": [5, 50], "flows.0.cc": ["cubic", "bbr"]},
            repetitions=2,
        )
    )
    assert len(runs) == 3 * 2 * 2 * 2
    combos = {(r.axis_values["bottleneck.rate_mbps"], r.axis_values["bottleneck.rtt_ms"], r.axis_values["flows.0.cc"], r.repetition) for r in runs}
    assert len(combos) == len(runs)
    assert len({r.run_key for r in runs}) == len(runs)


def test_dotted_paths_set_the_named_field_of_the_scenario() -> None:
    runs = expand(
        sweep(
            axes={
                "bottleneck.rate_mbps": [100],
                "bottleneck.buffer": ["100KB"],
                "bottleneck.loss": [0.01],
                "flows.0.cc": ["bbr"],
                "flows.0.count": [3],
                "flows.0.probe_bw_gain": [1.5],
                "duration_s": [4],
                "output.flow_sample_interval_ms": [50],
            }
        )
    )
    (run,) = runs
    config = run.scenario.resolve()
    assert config["bottleneck"]["rate_bps"] == 100_000_000
    assert config["bottleneck"]["queue_limit_bytes"] == 100_000
    assert config["bottleneck"]["loss_probability"] == 0.01
    assert [f["cc"] for f in config["flows"]] == ["bbr"] * 3
    assert {f["probe_bw_gain"] for f in config["flows"]} == {1.5}
    assert config["duration_ns"] == 4_000_000_000
    assert config["flow_sample_interval_ns"] == 50_000_000
    # Fields no axis names keep the base's values.
    assert config["bottleneck"]["rtt_ns"] == 10_000_000


def test_a_table_valued_axis_sets_several_fields_of_a_flow_at_once() -> None:
    runs = expand(sweep(axes={"flows.0": [{"cc": "cubic"}, {"cc": "bbr", "probe_bw_gain": 1.1}]}))
    flows = [run.scenario.resolve()["flows"][0] for run in runs]
    assert [(f["cc"], f["probe_bw_gain"]) for f in flows] == [("cubic", None), ("bbr", 1.1)]


def test_skip_rules_drop_matching_combinations_and_list_them_with_the_reason() -> None:
    expansion = expand_all(
        sweep(
            axes={"flows.0.cc": ["cubic", "bbr"], "bottleneck.loss": [0.0, 0.01, 0.05]},
            skip=[{"reason": "CUBIC collapses under random loss", "when": {"flows.0.cc": "cubic", "bottleneck.loss": [0.01, 0.05]}}],
        )
    )
    assert len(expansion.runs) == 4
    assert [(s.axis_values, s.reason) for s in expansion.skipped] == [
        ({"flows.0.cc": "cubic", "bottleneck.loss": 0.01}, "CUBIC collapses under random loss"),
        ({"flows.0.cc": "cubic", "bottleneck.loss": 0.05}, "CUBIC collapses under random loss"),
    ]
    assert all(not (r.axis_values["flows.0.cc"] == "cubic" and r.axis_values["bottleneck.loss"] > 0) for r in expansion.runs)


def test_repetitions_use_consecutive_seeds_from_the_base_seed() -> None:
    runs = expand(sweep(axes={"flows.0.cc": ["cubic"]}, repetitions=3))
    assert [(r.repetition, r.seed, r.scenario.resolve()["seed"]) for r in runs] == [(0, 5, 5), (1, 6, 6), (2, 7, 7)]


def test_the_run_key_is_stable_and_changes_with_any_config_field_or_the_engine() -> None:
    first = expand(sweep(axes={"bottleneck.rate_mbps": [10, 20]}))
    again = expand(sweep(axes={"bottleneck.rate_mbps": [20, 10]}))
    assert {r.run_key for r in first} == {r.run_key for r in again}
    config = first[0].scenario.resolve()
    assert run_key(config, "sim") == first[0].run_key
    assert run_key(config, "kernel") != first[0].run_key
    for change in ({"seed": 6}, {"duration_ns": config["duration_ns"] + 1}, {"queue_sample_interval_ns": 1}):
        assert run_key({**config, **change}, "sim") != first[0].run_key
    lossy = copy.deepcopy(config)
    lossy["bottleneck"]["loss_probability"] = 1e-9
    assert run_key(lossy, "sim") != first[0].run_key


def test_run_key_changes_with_the_engines_model_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from cclab.engines.sim import SimEngine

    config = {"seed": 1, "duration_ns": 1}
    before = run_key(config, "sim")
    monkeypatch.setattr(SimEngine, "model_version", "sim-999")
    assert run_key(config, "sim") != before


def test_combinations_that_resolve_to_the_same_config_run_once() -> None:
    # 10 Mbit/s x 10 ms = 12,500 B: "1bdp" and "12500B" are the same queue.
    expansion = expand_all(sweep(axes={"bottleneck.buffer": ["1bdp", "12500B"]}))
    assert len(expansion.runs) == 1 and len(expansion.duplicates) == 1


def test_a_sweep_keeps_queue_samples_every_10_ms_unless_told_otherwise() -> None:
    (run,) = expand(sweep())
    assert run.scenario.resolve()["queue_sample_interval_ns"] == 10_000_000
    (run,) = expand(sweep(queue_sample_interval_ms=1.0))
    assert run.scenario.resolve()["queue_sample_interval_ns"] == 1_000_000
    explicit = Sweep.from_dict({"base": {**copy.deepcopy(BASE), "output": {"queue_sample_interval_ms": 2.0}}})
    (run,) = expand(explicit)
    assert run.scenario.resolve()["queue_sample_interval_ns"] == 2_000_000


def test_a_base_path_is_read_relative_to_the_sweep_file(tmp_path: Path) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "base.toml").write_text(
        'duration_s = 3\n[bottleneck]\nrate_mbps = 20\nrtt_ms = 10\n[[flows]]\ncc = "reno"\n', encoding="utf-8"
    )
    (tmp_path / "sweeps").mkdir()
    path = tmp_path / "sweeps" / "grid.toml"
    path.write_text('base = "../scenarios/base.toml"\n[axes]\n"bottleneck.rtt_ms" = [10, 20]\n', encoding="utf-8")
    loaded = Sweep.from_toml(path)
    assert loaded.name == "grid"
    runs = expand(loaded)
    assert [r.scenario.flows[0].cc for r in runs] == ["reno", "reno"]
    assert [r.scenario.bottleneck.rtt_ms for r in runs] == [10, 20]


def test_an_axis_value_that_makes_an_invalid_scenario_names_the_axis_value_and_its_partners() -> None:
    with pytest.raises(SpecError) as caught:
        expand(sweep(axes={"bottleneck.rate_mbps": [1, 100], "bottleneck.buffer": ["0.1bdp"]}))
    assert caught.value.line == (
        'axes."bottleneck.buffer" = "0.1bdp" (with bottleneck.rate_mbps = 1) is an invalid scenario: '
        'bottleneck.buffer: must hold at least one packet (1514 B) (got "0.1bdp" = 125 B)'
    )


GOOD_SWEEP = """\
[base]
duration_s = 2
[base.bottleneck]
rate_mbps = 10
rtt_ms = 10
[[base.flows]]
cc = "cubic"

[axes]
"bottleneck.rate_mbps" = [10, 20]
"flows.0.cc" = ["cubic", "bbr"]
"""

BAD_SWEEPS = {
    "unknown_top_key": ("repetitons = 2\n" + GOOD_SWEEP, "repetitons: unknown key (did you mean 'repetitions'?)"),
    "axis_not_a_list": (GOOD_SWEEP.replace("[10, 20]", "10"), 'axes."bottleneck.rate_mbps": must be a list of values'),
    "axis_value_out_of_range": (GOOD_SWEEP.replace("[10, 20]", "[10, -5]"), 'axes."bottleneck.rate_mbps" = -5 (with flows.0.cc = "cubic") is an invalid scenario: bottleneck.rate_mbps: must be > 0 (got -5)'),
    "axis_path_typo": (GOOD_SWEEP.replace("rate_mbps\" =", "rate_mpbs\" ="), "bottleneck.rate_mpbs: unknown key (did you mean 'rate_mbps'?)"),
    "flow_index_out_of_range": (GOOD_SWEEP.replace("flows.0.cc", "flows.2.cc"), 'axes."flows.2.cc" = "cubic": the base scenario has 1 entry in flows (no index 2)'),
    "unknown_cc": (GOOD_SWEEP.replace('"bbr"]', '"vegas"]'), 'axes."flows.0.cc" = "vegas" (with bottleneck.rate_mbps = 10) is an invalid scenario: flows[0].cc: must be one of'),
    "gain_on_cubic": (GOOD_SWEEP + '"flows.0.probe_bw_gain" = [1.5]\n', 'axes."flows.0.probe_bw_gain" = 1.5 (with bottleneck.rate_mbps = 10, flows.0.cc = "cubic") is an invalid scenario: flows[0].probe_bw_gain: only applies to cc = "bbr"'),
    "skip_names_no_axis": (GOOD_SWEEP + '[[skip]]\nreason = "x"\nwhen = { "flows.0.c" = "bbr" }\n', 'skip[0].when."flows.0.c": not an axis of this sweep'),
    "skip_value_not_on_axis": (GOOD_SWEEP + '[[skip]]\nreason = "x"\nwhen = { "flows.0.cc" = "reno" }\n', 'skip[0].when."flows.0.cc": "reno" is not a value of that axis'),
    "skip_without_reason": (GOOD_SWEEP + '[[skip]]\nwhen = { "flows.0.cc" = "bbr" }\n', "skip[0].reason: required key is missing"),
    "zero_repetitions": ("repetitions = 0\n" + GOOD_SWEEP, "repetitions: must be >= 1 (got 0)"),
    "bad_base": (GOOD_SWEEP.replace("duration_s = 2", "duration_s = -2"), "base.duration_s: must be > 0 (got -2)"),
    "missing_base_file": ('base = "nowhere.toml"\n', "base: "),
    "toml_syntax": (GOOD_SWEEP.replace("rate_mbps = 10\n", "rate_mbps 10\n"), "TOML syntax error"),
}


@pytest.mark.parametrize("case", sorted(BAD_SWEEPS))
def test_a_bad_sweep_file_is_one_line_naming_the_field(case: str, tmp_path: Path) -> None:
    text, fragment = BAD_SWEEPS[case]
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        expand(Sweep.from_toml(path))
    assert fragment in caught.value.line
    assert "\n" not in caught.value.line


@pytest.mark.parametrize("case", ["axis_value_out_of_range", "skip_names_no_axis", "unknown_top_key"])
def test_the_sweep_command_reports_a_bad_sweep_on_one_line_with_exit_2_and_writes_nothing(case: str, tmp_path: Path) -> None:
    text, fragment = BAD_SWEEPS[case]
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    done = run_cli("sweep", path, "--out", out)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and fragment in lines[0], lines[0]
    assert not out.exists()


def test_an_engine_axis_gives_each_run_its_engine_unless_the_caller_names_one() -> None:
    compared = sweep(axes={"engine": ["sim", "kernel"]})
    runs = expand(compared)
    assert [r.engine for r in runs] == ["sim", "kernel"]
    assert runs[0].scenario.resolve() == runs[1].scenario.resolve() and runs[0].run_key != runs[1].run_key
    forced = expand_all(compared, engine="sim")
    assert [r.engine for r in forced.runs] == ["sim"] and len(forced.duplicates) == 1


def test_an_unknown_engine_is_refused_before_anything_runs() -> None:
    with pytest.raises(SpecError, match='^engine: must be one of "sim" or "kernel" \\(got "ns3"\\)$'):
        expand(sweep(), engine="ns3")
