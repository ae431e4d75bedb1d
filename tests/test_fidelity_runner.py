"""How `cclab validate` pairs each simulator run with its kernel twin's flow starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cclab.fidelity.runner import _plan, kernel_start_lateness_s, with_start_lateness
from cclab.fidelity.sets import get_set
from cclab.spec import Scenario


def _kernel_run(
    tmp_path: Path, flows: list[dict], syn_s: list[float | None], rtt_ns: int = 20_000_000, first_data_s: list[float] | None = None
) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"bottleneck": {"rtt_ns": rtt_ns}, "flows": flows}))
    starts = [{"flow_id": i, "data_syn_s": s} for i, s in enumerate(syn_s)]
    for start, data_s in zip(starts, first_data_s or [], strict=False):
        start["first_data_s"] = data_s
    (run / "result.json").write_text(json.dumps({"provenance": {"flow_starts": starts}}))
    return run


def _flow(extra_rtt_ns: int = 0, start_ns: int = 0, size_bytes: int | None = None) -> dict:
    return {"start_ns": start_ns, "extra_rtt_ns": extra_rtt_ns, "size_bytes": size_bytes}


def test_lateness_counts_from_where_each_flows_syn_was_aimed(tmp_path: Path) -> None:
    # A 20 ms bulk flow aimed at -20 ms left at -17.9 (2.1 ms late); a 40 ms one aimed at
    # -40 ms left at -40.5 (0.5 ms early); a finite flow aimed at its start, 0.3 s, left at 0.301.
    run = _kernel_run(
        tmp_path,
        [_flow(), _flow(extra_rtt_ns=20_000_000), _flow(start_ns=300_000_000, size_bytes=10_000)],
        [-0.0179, -0.0405, 0.301],
    )
    assert kernel_start_lateness_s(run) == pytest.approx([0.0026, 0.0, 0.0015])


def test_lateness_follows_the_first_data_segment_where_it_was_stamped(tmp_path: Path) -> None:
    # The same SYNs as above, but the 20 ms flow's data left 2 RTTs + 4.1 ms after its SYN and
    # the 40 ms flow's 2 RTTs + 0.8 ms after its: the simulator begins each one path RTT after
    # its start (20 and 40 ms), so the 40 ms flow is the earliest and the others follow it.
    run = _kernel_run(
        tmp_path,
        [_flow(), _flow(extra_rtt_ns=20_000_000), _flow(start_ns=300_000_000, size_bytes=10_000)],
        [-0.0179, -0.0405, 0.301],
        first_data_s=[-0.0179 + 0.040 + 0.0041, -0.0405 + 0.080 + 0.0008, 0.301 + 0.040 + 0.0012],
    )
    # Late against the simulator's data start: 26.2-20, 40.3-40 and 342.2-320 ms.
    assert kernel_start_lateness_s(run) == pytest.approx([0.0059, 0.0, 0.0219])


def test_a_run_without_its_syn_times_has_no_lateness(tmp_path: Path) -> None:
    assert kernel_start_lateness_s(_kernel_run(tmp_path, [_flow(), _flow()], [-0.02, None])) is None
    assert kernel_start_lateness_s(tmp_path / "missing") is None


def test_lateness_splits_counted_entries_into_single_flows_in_flow_id_order() -> None:
    scenario = Scenario.model_validate(
        {"duration_s": 1, "bottleneck": {"rate_mbps": 10, "rtt_ms": 20, "buffer": "1bdp"},
         "flows": [{"cc": "bbr", "count": 2}, {"cc": "cubic", "extra_rtt_ms": 20, "start_s": 0.1}]}
    )  # fmt: skip
    late = with_start_lateness(scenario, [0.0, 0.002, 0.0005])
    flows = late.resolve()["flows"]
    assert [f["cc"] for f in flows] == ["bbr", "bbr", "cubic"]
    assert [f["start_ns"] for f in flows] == [0, 2_000_000, 100_500_000]
    assert flows[2]["extra_rtt_ns"] == 20_000_000
    # A list that does not fit the flows leaves the scenario as it was.
    assert with_start_lateness(scenario, [0.001]) is scenario


def test_simulator_runs_follow_their_kernel_twins_starts_and_the_rest_keep_theirs() -> None:
    case = next(c for c in get_set("rtt").cases if c.name.startswith("2cubic-rtt1to2"))
    plain = _plan([case], "sim")[case.name]
    paired = _plan([case], "sim", {case.name: [[0.002, 0.0], None]})[case.name]
    assert paired[0].scenario.resolve()["flows"][0]["start_ns"] == 2_000_000
    assert paired[0].run_key != plain[0].run_key
    assert [p.run_key for p in paired[1:]] == [p.run_key for p in plain[1:]]
