"""`cclab reproduce settings --quick`: every cell, CC and setting runs once; the verdicts come
from the runs; a NIC no faster than the bottleneck never queues one flow's packets there."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cclab.studies import get_study
from cclab.studies.settings import CCS, CELLS, SETTINGS, payload_share
from conftest import run_cli

pytestmark = pytest.mark.sim


def test_settings_quick_runs_every_setting_once_and_judges_datta_and_funds_socket_buffer_finding(tmp_path: Path) -> None:
    out = tmp_path / "settings"
    done = run_cli("reproduce", "settings", "--quick", "--out", out)
    assert done.returncode == 0, done.stderr
    table = pd.read_csv(out / "settings.csv")
    assert len(table) == len(CELLS) * len(CCS) * len(SETTINGS)
    assert set(table["setting"]) == {s.name for s in SETTINGS}
    rate_of = {c.name: c.rate_mbps for c in CELLS}
    for row in table.itertuples():
        assert row.goodput_mbps <= rate_of[row.cell] * payload_share(row.setting) * 1.01, row
    # At the link's own rate the NIC cannot queue one flow's packets at the bottleneck: no drop.
    matched = table[(table["cell"] == CELLS[0].name) & (table["setting"] == "1 Gbit/s NIC")]
    assert (matched["retrans_segments"] == 0).all()

    summary = (out / "summary.md").read_text()
    findings = summary.split("## Findings")[1].split("\n## ")[0]
    socket_buffer = next(line for line in findings.splitlines() if "Datta & Fund" in line)
    bbr = table[(table["cell"] == CELLS[0].name) & (table["cc"] == "bbr")].set_index("setting")["utilization"]
    holds = bbr["stock tcp_wmem"] < 0.25 and bbr["default"] > 0.75
    assert ("**holds**" if holds else "**does not hold**") in socket_buffer
    assert "n/a (--quick: 10 s runs)" in findings  # the headline CUBIC needs the full 60 s
    assert "Not settings yet: segmentation offloads" in summary
    # Jumbo frames carry more payload per frame: above what 1500-byte frames could at the deep cell.
    jumbo = table[(table["cell"] == CELLS[2].name) & (table["setting"] == "jumbo frames")]
    assert (jumbo["goodput_mbps"] > CELLS[2].rate_mbps * payload_share("default")).all()
    for suffix in (".png", ".svg"):
        assert (out / "figures" / f"settings{suffix}").stat().st_size > 5000


def test_settings_refuses_the_kernel_engine_before_running_anything(tmp_path: Path) -> None:
    from cclab.errors import CclabError

    with pytest.raises(CclabError, match="use --engine sim"):
        get_study("settings").run(tmp_path / "s", engine="kernel", quick=True)
    assert not (tmp_path / "s").exists()
