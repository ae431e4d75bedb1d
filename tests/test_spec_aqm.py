"""The bottleneck's queue discipline, ECN and the BBR versions in the spec (cclab.spec)."""

from __future__ import annotations

from typing import Any

import pytest

from cclab.errors import SpecError
from cclab.spec import Scenario


def scenario(aqm: str | None = None, params: dict[str, Any] | None = None, **bottleneck: Any) -> dict[str, Any]:
    link: dict[str, Any] = {"rate_mbps": 100, "rtt_ms": 20, **bottleneck}
    if aqm is not None:
        link["aqm"] = aqm
    if params is not None:
        link["aqm_params"] = params
    return {"duration_s": 10, "bottleneck": link, "flows": [{"cc": "cubic"}]}


def resolved_aqm(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return Scenario.from_dict(scenario(*args, **kwargs)).resolve()["bottleneck"]["aqm"]


def error_line(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as raised:
        Scenario.from_dict(data)
    return str(raised.value)


def test_the_default_queue_is_tail_drop_fifo() -> None:
    assert resolved_aqm() == {"kind": "fifo"}


def test_fq_codel_takes_tc_defaults_when_no_parameter_is_given() -> None:
    assert resolved_aqm("fq_codel") == {
        "kind": "fq_codel", "target_ns": 5_000_000, "interval_ns": 100_000_000, "limit_packets": 10240,
        "flows": 1024, "quantum_bytes": 1514, "ecn": True, "ce_threshold_ns": None,
        "memory_limit_bytes": 32 * 2**20, "drop_batch": 64,
    }


def test_codel_has_ecn_off_and_pie_targets_15_ms_by_default() -> None:
    codel = resolved_aqm("codel")
    assert (codel["target_ns"], codel["interval_ns"], codel["limit_packets"], codel["ecn"]) == (5_000_000, 100_000_000, 1000, False)
    pie = resolved_aqm("pie")
    assert (pie["target_ns"], pie["tupdate_ns"], pie["alpha"], pie["beta"], pie["ecn"]) == (15_000_000, 15_000_000, 2, 20, False)


def test_red_thresholds_follow_iproute2_from_the_buffer() -> None:
    # 100 Mbit/s x 20 ms = 250,000 B; 4 BDP = 1,000,000 B is RED's limit.
    red = resolved_aqm("red", buffer="4bdp")
    assert red["limit_bytes"] == 1_000_000
    assert red["max_bytes"] == 250_000 and red["min_bytes"] == 83_333
    assert red["burst_packets"] == (2 * 83_333 + 250_000) // (3 * 1000)
    assert red["probability"] == 0.02


def test_given_parameters_override_the_defaults_in_their_units() -> None:
    codel = resolved_aqm("codel", {"target_ms": 2.5, "interval_ms": 50, "ecn": True, "ce_threshold_ms": 1})
    assert (codel["target_ns"], codel["interval_ns"], codel["ecn"], codel["ce_threshold_ns"]) == (2_500_000, 50_000_000, True, 1_000_000)
    cake = resolved_aqm("cake", {"rtt_ms": 40, "flow_mode": "flows"})
    assert (cake["rtt_ns"], cake["target_ns"], cake["flow_mode"]) == (40_000_000, 2_000_000, "flows")


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (scenario("fq_codle"), "bottleneck.aqm: must be one of"),
        (scenario("codel", {"quantum": 300}), 'bottleneck.aqm_params.quantum: does not apply to aqm = "codel"'),
        (scenario("fifo", {"target_ms": 5}), 'bottleneck.aqm_params.target_ms: does not apply to aqm = "fifo"'),
        (scenario("codel", {"target_ms": -1}), "bottleneck.aqm_params.target_ms: must be > 0"),
        (scenario("fq_codel", {"quantum": 100}), "bottleneck.aqm_params.quantum: must be >= 256"),
        (scenario("pie", {"alpha": 40}), "bottleneck.aqm_params.alpha: must be <= 32"),
        (scenario("red", {"min": "100KB", "max": "50KB"}), "bottleneck.aqm_params.min: must be below max"),
        (scenario("red", {"max": "10MB"}), "bottleneck.aqm_params.max: must not exceed the buffer"),
        (scenario("red", {"avpkt": "lots"}), "bottleneck.aqm_params.avpkt: not a size"),
        (scenario("codel", {"targt_ms": 3}), "bottleneck.aqm_params.targt_ms: unknown key (did you mean 'target_ms'?)"),
        (scenario("cake", {"flow_mode": "per-flow"}), "bottleneck.aqm_params.flow_mode: must be one of"),
        (scenario("dualpi2", {"coupling_factor": 0}), "bottleneck.aqm_params.coupling_factor: must be >= 1"),
        (scenario("dualpi2", {"classic_protection_percent": 101}), "bottleneck.aqm_params.classic_protection_percent: must be <= 100"),
        (scenario("dualpi2", {"step_thresh_ms": 1, "step_thresh_packets": 4}), "bottleneck.aqm_params.step_thresh_packets: give the step"),
        (scenario("dualpi2", {"alpha_hz": 0.001}), "bottleneck.aqm_params.alpha_hz: must be at least 1/256 Hz"),
        (scenario("dualpi2", {"ecn_mask": "ect0"}), "bottleneck.aqm_params.ecn_mask: must be one of"),
        (scenario("pie", {"alpha_hz": 0.16}), 'bottleneck.aqm_params.alpha_hz: does not apply to aqm = "pie"'),
    ],
)
def test_a_bad_queue_discipline_or_parameter_is_one_line_naming_the_field(data: dict[str, Any], line: str) -> None:
    message = error_line(data)
    assert message.startswith(line), message
    assert "\n" not in message


def test_dualpi2_takes_the_kernels_defaults_and_tcs_units() -> None:
    assert resolved_aqm("dualpi2") == {
        "kind": "dualpi2", "limit_packets": 10000, "memory_limit_bytes": 10000 * 2 * 1514, "target_ns": 15_000_000,
        "tupdate_ns": 16_000_000, "alpha": 41, "beta": 819, "step_thresh_ns": 1_000_000, "step_thresh_packets": None,
        "min_qlen_step": 0, "coupling_factor": 2, "drop_overload": True, "drop_early": False, "c_protection_percent": 10,
        "ecn_mask": 1,
    }  # fmt: skip
    # Hz as tc takes them, truncated x 256; a packet step replaces the time step.
    given = resolved_aqm("dualpi2", {"alpha_hz": 0.16, "beta_hz": 3.2, "step_thresh_packets": 8, "limit": 100, "ecn_mask": "any_ect"})
    assert (given["alpha"], given["beta"]) == (40, 819)
    assert (given["step_thresh_ns"], given["step_thresh_packets"], given["memory_limit_bytes"], given["ecn_mask"]) == (None, 8, 302_800, 3)


def test_dctcp_and_prague_negotiate_ecn_whatever_the_flow_says() -> None:
    data = scenario("dualpi2")
    data["flows"] = [{"cc": "dctcp"}, {"cc": "prague", "ecn": False}, {"cc": "cubic"}]
    flows = Scenario.from_dict(data).resolve()["flows"]
    # TCP_CONG_NEEDS_ECN: ECN whatever net.ipv4.tcp_ecn (and the flow's `ecn`) says.
    assert [(f["cc"], f["ecn"]) for f in flows] == [("dctcp", True), ("prague", True), ("cubic", False)]


def test_accurate_ecn_is_asked_for_by_name_and_leaves_other_flows_configs_as_they_were() -> None:
    data = scenario()
    data["flows"] = [{"cc": "cubic", "ecn": "accecn"}, {"cc": "cubic", "ecn": True}, {"cc": "prague"}]
    flows = Scenario.from_dict(data).resolve()["flows"]
    assert [(f["ecn"], f.get("accecn")) for f in flows] == [(True, True), (True, None), (True, True)]
    # No `accecn` key unless used: an RFC 3168 flow's config, and so its run key, is as before.
    assert "accecn" not in flows[1]
    data["flows"] = [{"cc": "cubic", "ecn": "accurate"}]
    assert error_line(data).startswith("flows[0].ecn:")


def test_ecn_is_off_unless_a_flow_asks_for_it() -> None:
    data = scenario()
    data["flows"] = [{"cc": "cubic"}, {"cc": "cubic", "ecn": True}]
    assert [f["ecn"] for f in Scenario.from_dict(data).resolve()["flows"]] == [False, True]
    data["flows"] = [{"cc": "cubic", "ecn": "yes"}]
    assert error_line(data).startswith('flows[0].ecn: must be true, false or "accecn"')


def test_bbr1_is_bbr_and_bbr2_bbr3_are_their_own_algorithms() -> None:
    data = scenario()
    data["flows"] = [{"cc": "bbr1"}, {"cc": "bbr"}, {"cc": "bbr2"}, {"cc": "bbr3"}]
    flows = Scenario.from_dict(data).resolve()["flows"]
    assert [f["cc"] for f in flows] == ["bbr", "bbr", "bbr2", "bbr3"]
    assert [f["probe_bw_gain"] for f in flows] == [1.25, 1.25, None, None]


def test_probe_bw_gain_is_for_bbr_v1_only() -> None:
    data = scenario()
    data["flows"] = [{"cc": "bbr3", "probe_bw_gain": 1.5}]
    assert error_line(data).startswith('flows[0].probe_bw_gain: only applies to cc = "bbr"')
