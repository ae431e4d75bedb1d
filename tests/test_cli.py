"""The `cclab` command line: every bad input is one line on stderr, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cclab.spec import Scenario
from conftest import VALID_SPEC, run_cli


def edited(old: str, new: str) -> str:
    assert old in VALID_SPEC
    return VALID_SPEC.replace(old, new)


BAD_SPECS = {
    "typo_key": (edited("rate_mbps = 50", "rate_mpbs = 50"), "bottleneck.rate_mpbs: unknown key"),
    "negative_rate": (edited("rate_mbps = 50", "rate_mbps = -5"), "bottleneck.rate_mbps: must be > 0 (got -5)"),
    "zero_rate": (edited("rate_mbps = 50", "rate_mbps = 0"), "bottleneck.rate_mbps: must be > 0 (got 0)"),
    "buffer_below_a_packet": (edited('buffer = "1bdp"', 'buffer = "1000B"'), "bottleneck.buffer: must hold at least one packet"),
    "bdp_buffer_below_a_packet": (edited('buffer = "1bdp"', 'buffer = "0.001bdp"'), "bottleneck.buffer: must hold at least one packet"),
    "zero_packet_buffer": (edited('buffer = "1bdp"', 'buffer = "0pkt"'), "bottleneck.buffer: must hold at least one packet"),
    "unknown_cc": (edited('cc = "cubic"', 'cc = "vegas"'), "flows[0].cc: must be one of"),
    "gain_on_cubic": (edited('cc = "cubic"', 'cc = "cubic"\nprobe_bw_gain = 1.5'), "flows[0].probe_bw_gain: only applies to"),
    "gain_not_above_one": (edited('cc = "cubic"', 'cc = "bbr"\nprobe_bw_gain = 1.0'), "flows[0].probe_bw_gain: must be > 1"),
    "loss_of_one": (edited("loss = 0.0", "loss = 1.0"), "bottleneck.loss: must be < 1"),
    "negative_loss": (edited("loss = 0.0", "loss = -0.01"), "bottleneck.loss: must be >= 0"),
    "unparsable_size": (edited("count = 1", 'count = 1\nsize = "lots"'), "flows[0].size: not a size"),
    "unknown_size_unit": (edited("count = 1", 'count = 1\nsize = "10XB"'), "flows[0].size: unknown size unit"),
    "zero_duration": (edited("duration_s = 5", "duration_s = 0"), "duration_s: must be > 0 (got 0)"),
    "negative_duration": (edited("duration_s = 5", "duration_s = -3"), "duration_s: must be > 0 (got -3)"),
    "start_after_end": (edited("start_s = 0.0", "start_s = 6.0"), "flows[0].start_s: must be < duration_s (5)"),
    "unknown_engine_in_spec": (edited("seed = 7", 'seed = 7\nengine = "ns3"'), "engine: must be one of"),
    "no_flows": (VALID_SPEC.split("[[flows]]")[0], "flows: at least one [[flows]] table is required"),
    "warmup_at_duration": (VALID_SPEC + "\n[output]\nwarmup_s = 5\n", "output.warmup_s: must be < duration_s (5) (got 5)"),
    "warmup_past_duration": (VALID_SPEC + "\n[output]\nwarmup_s = 7.5\n", "output.warmup_s: must be < duration_s (5) (got 7.5)"),
    "negative_warmup": (VALID_SPEC + "\n[output]\nwarmup_s = -1\n", "output.warmup_s: must be >= 0 (got -1)"),
    "negative_jitter": ("jitter_us = -3\n" + VALID_SPEC, "jitter_us: must be >= 0 (got -3)"),
    "stall_share_over_one": ("stall_per_packet = 2\n" + VALID_SPEC, "stall_per_packet: must be <= 1 (got 2)"),
    "toml_syntax": (edited("rate_mbps = 50", "rate_mbps 50"), "TOML syntax error"),
    "unknown_aqm": (edited("loss = 0.0", 'loss = 0.0\naqm = "sfq"'), "bottleneck.aqm: must be one of"),
    "aqm_param_of_another_aqm": (edited("loss = 0.0", 'loss = 0.0\naqm = "codel"\n[bottleneck.aqm_params]\ntupdate_ms = 10'), "bottleneck.aqm_params.tupdate_ms"),
    "rate_past_a_terabit": (edited("rate_mbps = 50", "rate_mbps = 99999999999"), "bottleneck.rate_mbps: must be <= 1e+06"),
    "zero_sample_interval": (VALID_SPEC + "\n[output]\nqueue_sample_interval_ms = 1e-9\n", "output.queue_sample_interval_ms: must be at least 1 ns"),
}


def assert_one_error_line(done, fragment: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_a_bad_spec_is_one_line_naming_the_field_and_writes_nothing(case: str, write_spec, tmp_path: Path) -> None:
    text, fragment = BAD_SPECS[case]
    out = tmp_path / "out" / "result"
    done = run_cli("run", write_spec(text), "--out", out, "--json")
    assert_one_error_line(done, fragment)
    assert not out.exists() and not out.parent.exists()


def test_a_missing_spec_file_is_one_line_naming_the_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli("run", tmp_path / "nope.toml", "--out", out)
    assert_one_error_line(done, "nope.toml: no such file")
    assert not out.exists()


def test_an_unknown_engine_option_is_one_line(write_spec, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run_cli("run", write_spec(VALID_SPEC), "--engine", "ns3", "--out", out)
    assert_one_error_line(done, 'engine: must be one of "sim" or "kernel" (got "ns3")')
    assert not out.exists()


def test_validate_rejects_a_bad_spec_the_same_way(write_spec) -> None:
    text, fragment = BAD_SPECS["negative_rate"]
    assert_one_error_line(run_cli("check", write_spec(text)), fragment)


def test_validate_prints_the_resolved_config(write_spec) -> None:
    path = write_spec(VALID_SPEC)
    done = run_cli("check", path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == Scenario.from_toml(path).resolve()
