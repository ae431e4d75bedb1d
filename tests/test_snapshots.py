"""Named scenarios pinned as integer snapshot tables: the simulator is deterministic per seed,
so each example below gives exactly the counts in tests/snapshots/sim_scenarios.json (bytes
delivered, segments sent and retransmitted, RTOs and CE marks per flow; drops and CE marks at
the bottleneck; each DualPI2 queue's packets and marks). Any change to what a run produces
shows here by name. When the change is meant, bump MODEL_VERSION (crates/cclab-sim/src/lib.rs,
with its line in CHANGELOG.md) and rewrite the table:

    CCLAB_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_snapshots.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import cclab
from cclab import _sim
from cclab.spec import read_toml
from conftest import EXAMPLES

pytestmark = pytest.mark.sim

TABLE = Path(__file__).parent / "snapshots" / "sim_scenarios.json"
#: Each example, cut to 5 s (the rate dip to 25 s, past both of its changes): the table pins
#: behaviour, not the example's own length.
DURATION_S = {"rate_dip_5x_cubic_50mbit_40ms": 25}
SCENARIOS = (
    "cubic_100mbit_20ms_1bdp", "headline_bbr_500mbit_200ms_100KB", "bbr2_50mbit_40ms_1bdp_loss5pct",
    "bbr3_vs_cubic_50mbit_40ms_5bdp_cake", "bbr_x2_rtt20_40ms_50mbit_1bdp", "bufferbloat_cubic_100mbit_20ms_10bdp_fq_codel",
    "dctcp_50mbit_10ms_ce_threshold", "dualpi2_prague_cubic_50mbit_20ms", "loss1pct_cubic_100mbit_100ms",
    "rate_dip_5x_cubic_50mbit_40ms", "cellular_trace_bbr3_40ms",
)  # fmt: skip
FLOW_COUNTS = ("bytes_delivered", "data_segments_sent", "retrans_segments", "rto_count", "ce_marks_received")
BOTTLENECK_COUNTS = ("drops", "ce_marks", "l4s_packets", "l4s_ce_marks", "classic_packets", "classic_ce_marks")


def counts_of(name: str) -> dict[str, Any]:
    path = EXAMPLES / f"{name}.toml"
    spec = read_toml(path)
    spec["duration_s"] = DURATION_S.get(name, 5)
    spec.pop("output", None)
    link = spec["bottleneck"]
    if isinstance(link.get("trace"), str):
        link["trace"] = str(path.parent / link["trace"])
    result = cclab.run(spec, "sim")
    flows = [[int(row[c]) for c in FLOW_COUNTS] for _, row in result.flows.iterrows()]
    bottleneck = {c: result.bottleneck[c] for c in BOTTLENECK_COUNTS if result.bottleneck.get(c) is not None}
    return {"flows": flows, "bottleneck": bottleneck}


def render(pinned: dict[str, Any]) -> str:
    """The table as text a review can read: one line per scenario, flows as rows of FLOW_COUNTS."""
    rows = [f"  {json.dumps(name)}: {json.dumps(pinned['scenarios'][name], sort_keys=True)}" for name in sorted(pinned["scenarios"])]
    return '{\n "model_version": %s,\n "flow_columns": %s,\n "scenarios": {\n %s\n }\n}\n' % (
        json.dumps(pinned["model_version"]), json.dumps(FLOW_COUNTS), ",\n ".join(rows))


def table() -> dict[str, Any]:
    return json.loads(TABLE.read_text(encoding="utf-8")) if TABLE.exists() else {"model_version": None, "scenarios": {}}


def test_the_table_is_of_the_simulators_model_version() -> None:
    assert table()["model_version"] == _sim.model_version(), "MODEL_VERSION changed: rewrite the table (see the module's docstring)"


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_named_scenario_gives_exactly_its_snapshot(name: str) -> None:
    counts = counts_of(name)
    if os.environ.get("CCLAB_UPDATE_SNAPSHOTS") == "1":
        pinned = table()
        pinned["model_version"] = _sim.model_version()
        pinned["flow_columns"] = list(FLOW_COUNTS)
        pinned["scenarios"][name] = counts
        TABLE.write_text(render(pinned), encoding="utf-8")
    assert counts == table()["scenarios"][name], f"{name} changed; if meant, bump MODEL_VERSION and rewrite the table (see the module's docstring)"
