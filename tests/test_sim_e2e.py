"""End to end through the Rust simulator (`cclab._sim.run_json`): marked `sim`.

These run real simulations, kept short (a few simulated seconds) for a 2-core machine.
Select them with `pytest -m sim`, or leave them out with `-m "not sim"`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import cclab
import cclab.spec
from cclab.results import EVENT_COLUMNS, FLOW_COLUMNS, FLOW_SERIES_COLUMNS, QUEUE_SERIES_COLUMNS, RunResult
from cclab.units import FRAME_BYTES, MSS_BYTES
from conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.sim

# The payload share of the line rate: tbf counts whole 1514-byte frames (ARCHITECTURE.md).
PAYLOAD_SHARE = MSS_BYTES / FRAME_BYTES

BOTTLENECK_KEYS = {
    "utilization", "drops", "random_losses", "queue_limit_bytes", "queue_limit_packets",
    "queue_mean_bytes", "queue_p10_bytes", "queue_p50_bytes", "queue_p95_bytes", "queue_max_bytes",
}


def spec(cc: str = "cubic", *, rate_mbps: float = 50, rtt_ms: float = 25, loss: float = 0.0,
         duration_s: float = 5, seed: int = 1, flows: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "duration_s": duration_s,
        "seed": seed,
        "bottleneck": {"rate_mbps": rate_mbps, "rtt_ms": rtt_ms, "buffer": "1bdp", "loss": loss},
        "flows": flows if flows is not None else [{"cc": cc}],
    }


def toml(data: dict[str, Any]) -> str:
    link = data["bottleneck"]
    lines = [f"duration_s = {data['duration_s']}", f"seed = {data['seed']}", "[bottleneck]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in link.items()]
    for flow in data["flows"]:
        lines += ["[[flows]]", *(f"{key} = {json.dumps(value)}" for key, value in flow.items())]
    return "\n".join(lines) + "\n"


def test_run_json_prints_one_object_with_the_documented_keys(write_spec, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run_cli("run", write_spec(toml(spec("bbr", duration_s=2))), "--json", "--out", out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1  # one line: one object, nothing else
    data = json.loads(done.stdout)
    assert set(data) == {"flows", "bottleneck", "flow_series", "queue_series", "events", "stats", "spec", "provenance", "validity", "steady_state"}
    assert set(FLOW_COLUMNS) <= set(data["flows"][0])
    assert BOTTLENECK_KEYS <= set(data["bottleneck"])
    assert set(FLOW_SERIES_COLUMNS) <= set(data["flow_series"])
    assert set(QUEUE_SERIES_COLUMNS) <= set(data["queue_series"])
    assert set(EVENT_COLUMNS) <= set(data["events"])
    assert data["provenance"]["engine"] == "sim"
    assert data["flows"][0]["cc"] == "bbr"
    assert len(data["flow_series"]["time_s"]) > 0 and len(data["queue_series"]["time_s"]) > 0
    # What was printed is what was stored.
    assert RunResult.read(out).to_json_dict() == data


def test_one_cubic_flow_fills_a_100mbit_20ms_link_with_a_1bdp_buffer() -> None:
    scenario = cclab.spec.load(EXAMPLES / "cubic_100mbit_20ms_1bdp.toml")
    assert scenario.duration_s == 10 and scenario.bottleneck.rate_mbps == 100 and scenario.bottleneck.rtt_ms == 20
    result = cclab.run(scenario)
    (goodput_mbps,) = result.flows["goodput_mbps"]
    assert goodput_mbps > 90
    assert result.flows["rtt_min_ms"].iloc[0] >= 20


# Why not rate x 1448/1514 x (1 - loss), the "ideal" line of the ReBBR seed: there the loss
# consumed link capacity. Here, as in the kernel engine's iptables rule, random loss happens
# before the bottleneck queue (ARCHITECTURE.md), so a lost packet never occupies the link and
# a sender that sends faster than the link can keep it full: BBR with probe_bw_gain 1.5 at
# 5% loss measured 46.1 Mbit/s against 45.4 for that line on 50 Mbit/s. The hard law is the
# payload share of the line rate, whatever the loss.
@pytest.mark.parametrize(
    ("flows", "loss"),
    [
        ([{"cc": "cubic"}], 0.0),
        ([{"cc": "reno"}], 0.0),
        ([{"cc": "bbr"}], 0.0),
        ([{"cc": "bbr", "count": 2}, {"cc": "cubic", "count": 2}], 0.0),
        ([{"cc": "cubic"}], 0.01),
        ([{"cc": "bbr"}], 0.01),
        ([{"cc": "bbr", "probe_bw_gain": 1.5}], 0.05),
    ],
    ids=["cubic", "reno", "bbr", "2bbr_2cubic", "cubic_1pct_loss", "bbr_1pct_loss", "bbr1.5_5pct_loss"],
)
def test_goodput_never_exceeds_the_payload_share_of_the_line_rate(flows: list[dict[str, Any]], loss: float) -> None:
    rate_mbps = 50
    result = cclab.run(spec(flows=flows, rate_mbps=rate_mbps, loss=loss))
    ceiling_mbps = rate_mbps * PAYLOAD_SHARE
    assert result.flows["goodput_mbps"].sum() <= ceiling_mbps * (1 + 1e-9)
    assert result.flows["goodput_mbps"].min() > 0


@pytest.mark.parametrize("cc", ["cubic", "bbr"])
def test_every_delivered_byte_came_in_a_segment_that_was_neither_lost_nor_dropped(cc: str) -> None:
    result = cclab.run(spec(cc, loss=0.02))
    flow = result.flows.iloc[0]
    assert flow["lost_segments"] == flow["queue_drop_segments"] + flow["random_loss_segments"]
    assert flow["bytes_delivered"] <= (flow["data_segments_sent"] - flow["lost_segments"]) * MSS_BYTES
    assert flow["bytes_sent"] >= flow["bytes_delivered"]


def test_random_loss_is_bernoulli_at_the_configured_probability() -> None:
    loss = 0.02
    result = cclab.run(spec("bbr", loss=loss, duration_s=10))
    sent = int(result.flows["data_segments_sent"].sum())
    lost = int(result.flows["random_loss_segments"].sum())
    # Binomial(sent, p): within 5 standard deviations.
    assert abs(lost - sent * loss) <= 5 * math.sqrt(sent * loss * (1 - loss))
    assert result.bottleneck["random_losses"] == lost


def test_a_finite_flow_completes_and_reports_its_completion_time() -> None:
    result = cclab.run(spec(flows=[{"cc": "cubic", "size": "1MB"}]))
    flow = result.flows.iloc[0]
    assert bool(flow["completed"])
    assert flow["bytes_delivered"] == 1_000_000
    # No faster than 1 MB of payload at the line rate plus the one-way delay of the last byte.
    assert flow["fct_s"] >= 0.0125 + 1_000_000 * 8 / (50e6 * PAYLOAD_SHARE)


def test_extra_rtt_applies_to_its_own_flows_only() -> None:
    result = cclab.run(spec(flows=[{"cc": "cubic"}, {"cc": "cubic", "count": 2, "extra_rtt_ms": 50}]))
    rtt_min_ms = result.flows.set_index("flow_id")["rtt_min_ms"]
    assert list(rtt_min_ms.index) == [0, 1, 2]
    assert 25 <= rtt_min_ms[0] < 75
    assert rtt_min_ms[1] >= 75 and rtt_min_ms[2] >= 75


def _without_wall_clock_or_checkout(stdout: str) -> dict[str, Any]:
    # What may differ between two identical runs: the wall time the simulation took, and
    # the git state of the checkout (another commit, or an edit, between the two runs).
    data = json.loads(stdout)
    data["stats"].pop("sim_wall_s", None)
    data["provenance"].pop("git_revision")
    return data


def test_the_same_seed_gives_identical_json_and_another_seed_does_not(write_spec, tmp_path: Path) -> None:
    def run(seed: int, name: str) -> dict[str, Any]:
        done = run_cli("run", write_spec(toml(spec("bbr", loss=0.01, seed=seed, duration_s=3)), f"{name}.toml"),
                       "--json", "--out", tmp_path / name)
        assert done.returncode == 0, done.stderr
        return _without_wall_clock_or_checkout(done.stdout)

    first, again, other = run(1, "first"), run(1, "again"), run(2, "other")
    assert first == again
    assert other["flows"] != first["flows"]
