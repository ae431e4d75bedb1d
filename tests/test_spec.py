"""The scenario spec: validation and resolution into the engine config (cclab.spec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cclab.errors import SpecError
from cclab.spec import Scenario
from conftest import EXAMPLES


def scenario(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "duration_s": 10,
        "bottleneck": {"rate_mbps": 100, "rtt_ms": 25},
        "flows": [{"cc": "bbr"}],
    }
    data.update(overrides)
    return data


def test_count_expands_into_consecutive_flow_ids_across_entries() -> None:
    spec = scenario(flows=[{"cc": "bbr", "count": 3}, {"cc": "cubic", "count": 2, "extra_rtt_ms": 50, "start_s": 1.5}])
    flows = Scenario.from_dict(spec).resolve()["flows"]
    assert [f["flow_id"] for f in flows] == [0, 1, 2, 3, 4]
    assert [f["cc"] for f in flows] == ["bbr"] * 3 + ["cubic"] * 2
    assert [f["extra_rtt_ns"] for f in flows] == [0, 0, 0, 50_000_000, 50_000_000]
    assert [f["start_ns"] for f in flows] == [0, 0, 0, 1_500_000_000, 1_500_000_000]


def test_resolve_fills_every_default_of_the_contract() -> None:
    resolved = Scenario.from_dict(scenario()).resolve()
    assert resolved == {
        "seed": 1,
        "duration_ns": 10_000_000_000,
        "bottleneck": {
            "rate_bps": 100_000_000,
            "rtt_ns": 25_000_000,
            "queue_limit_bytes": 312_500,  # default buffer: 1 BDP
            "queue_limit_packets": None,
            "loss_probability": 0.0,
            "aqm": {"kind": "fifo"},
        },
        "flows": [
            {"flow_id": 0, "cc": "bbr", "probe_bw_gain": 1.25, "start_ns": 0,
             "size_bytes": None, "extra_rtt_ns": 0, "rwnd_bytes": None, "ecn": False},
        ],
        "flow_sample_interval_ns": 100_000_000,
        "queue_sample_interval_ns": 1_000_000,
        "jitter_ns": 30_700,  # the kernel engine's measured ACK-to-data noise (KERNEL_ACK_JITTER_US)
        "stall_per_packet": 1.44e-4,  # its bottleneck's measured stalls (KERNEL_STALL_PER_PACKET)
    }


def test_a_warmup_resolves_to_nanoseconds_and_none_leaves_the_config_as_it_was() -> None:
    assert Scenario.from_dict(scenario(output={"warmup_s": 2.5})).resolve()["warmup_ns"] == 2_500_000_000
    assert "warmup_ns" not in Scenario.from_dict(scenario(output={"warmup_s": 0})).resolve()


def test_resolved_config_is_plain_json() -> None:
    resolved = Scenario.from_dict(scenario(flows=[{"cc": "cubic", "size": "100MB", "rwnd": "4MiB"}])).resolve()
    assert json.loads(json.dumps(resolved)) == resolved
    assert resolved["flows"][0]["size_bytes"] == 100_000_000
    assert resolved["flows"][0]["rwnd_bytes"] == 4 * 2**20


@pytest.mark.parametrize(
    ("buffer", "limit_bytes", "limit_packets"),
    [("1bdp", 312_500, None), ("0.3bdp", 93_750, None), ("200000B", 200_000, None), ("100KB", 100_000, None),
     ("10MB", 10_000_000, None), ("64KiB", 65_536, None), ("250pkt", None, 250), ("1pkt", None, 1)],
)
def test_buffer_resolves_to_exactly_one_queue_limit(buffer: str, limit_bytes: int | None, limit_packets: int | None) -> None:
    link = Scenario.from_dict(scenario(bottleneck={"rate_mbps": 100, "rtt_ms": 25, "buffer": buffer})).resolve()["bottleneck"]
    assert (link["queue_limit_bytes"], link["queue_limit_packets"]) == (limit_bytes, limit_packets)


def test_probe_bw_gain_is_kept_for_bbr_and_null_for_loss_based_ccs() -> None:
    flows = Scenario.from_dict(scenario(flows=[{"cc": "bbr", "probe_bw_gain": 1.5}, {"cc": "reno"}])).resolve()["flows"]
    assert [f["probe_bw_gain"] for f in flows] == [1.5, None]


def test_fractional_times_round_to_whole_nanoseconds() -> None:
    spec = scenario(duration_s=0.1, bottleneck={"rate_mbps": 0.5, "rtt_ms": 0.3, "buffer": "10pkt"}, flows=[{"cc": "reno", "extra_rtt_ms": 0.1}])
    resolved = Scenario.from_dict(spec).resolve()
    assert resolved["duration_ns"] == 100_000_000
    assert resolved["bottleneck"]["rtt_ns"] == 300_000
    assert resolved["bottleneck"]["rate_bps"] == 500_000
    assert resolved["flows"][0]["extra_rtt_ns"] == 100_000


def test_a_packet_count_is_not_a_flow_size() -> None:
    with pytest.raises(SpecError, match=r"^flows\[0\]\.size: must be given in bytes"):
        Scenario.from_dict(scenario(flows=[{"cc": "bbr", "size": "10pkt"}]))


def test_a_typo_gets_a_suggestion() -> None:
    with pytest.raises(SpecError, match=r"^bottleneck\.rttms: unknown key \(did you mean 'rtt_ms'\?\)$"):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": 100, "rttms": 25}))


def test_a_number_written_as_a_string_is_rejected_not_converted() -> None:
    with pytest.raises(SpecError, match=r'^bottleneck\.rate_mbps: must be a number \(got "100"\)$'):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": "100", "rtt_ms": 25}))


def test_the_first_error_is_reported_when_there_are_several() -> None:
    with pytest.raises(SpecError) as caught:
        Scenario.from_dict(scenario(duration_s=-1, bottleneck={"rate_mbps": -5, "rtt_ms": 25}))
    assert caught.value.line == "duration_s: must be > 0 (got -1)"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.name)
def test_every_example_is_a_valid_spec(path: Path) -> None:
    resolved = Scenario.from_toml(path).resolve()
    assert resolved["flows"]


def test_the_four_bbr_flow_example_has_four_flows_and_a_byte_limited_queue() -> None:
    resolved = Scenario.from_toml(EXAMPLES / "bbr4_80mbit_25ms_200000B.toml").resolve()
    assert [f["cc"] for f in resolved["flows"]] == ["bbr"] * 4
    assert resolved["bottleneck"]["queue_limit_bytes"] == 200_000


def test_a_rate_or_rtt_too_small_for_whole_units_is_rejected() -> None:
    with pytest.raises(SpecError, match=r"^bottleneck\.rate_mbps: must be at least 1 bit/s"):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": 1e-9, "rtt_ms": 25, "buffer": "10pkt"}))
    with pytest.raises(SpecError, match=r"^bottleneck\.rtt_ms: must be at least 0.001 \(1 us"):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": 100, "rtt_ms": 1e-9, "buffer": "10pkt"}))


def test_links_past_physical_sense_are_refused_whatever_the_run_costs() -> None:
    # A 1 ns RTT at 100 Gbit/s, a rate no link has, a path longer than TCP's timeouts.
    with pytest.raises(SpecError, match=r"^bottleneck\.rtt_ms: must be at least 0.001"):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": 100_000, "rtt_ms": 1e-6, "buffer": "10pkt"}))
    with pytest.raises(SpecError, match=r"^bottleneck\.rate_mbps: must be <= 1e\+06"):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": 99999999999, "rtt_ms": 20}))
    with pytest.raises(SpecError, match=r"^bottleneck\.rtt_ms: must be <= 60000"):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": 10, "rtt_ms": 1e5, "buffer": "10pkt"}))
    with pytest.raises(SpecError, match=r"^flows\[0\]\.extra_rtt_ms: the flow's RTT must be <= 60000 ms"):
        Scenario.from_dict(scenario(bottleneck={"rate_mbps": 10, "rtt_ms": 30_000, "buffer": "10pkt"}, flows=[{"cc": "cubic", "extra_rtt_ms": 40_000}]))
    # The limits themselves are accepted.
    Scenario.from_dict(scenario(bottleneck={"rate_mbps": 1_000_000, "rtt_ms": 0.001, "buffer": "10pkt"}))


def test_a_duration_or_sample_interval_that_rounds_to_zero_nanoseconds_is_refused() -> None:
    with pytest.raises(SpecError, match=r"^output\.flow_sample_interval_ms: must be at least 1 ns"):
        Scenario.from_dict(scenario(output={"flow_sample_interval_ms": 1e-9}))
    with pytest.raises(SpecError, match=r"^output\.queue_sample_interval_ms: must be at least 1 ns"):
        Scenario.from_dict(scenario(output={"queue_sample_interval_ms": 1e-7}))
    with pytest.raises(SpecError, match=r"^duration_s: must be at least 1 ns"):
        Scenario.from_dict(scenario(duration_s=1e-10))
