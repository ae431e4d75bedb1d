"""`cclab reproduce aqm --quick`: Cao's grid behind fq_codel, CAKE and PIE, end to end on the simulator."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from cclab.studies import get_study

pytestmark = pytest.mark.sim


def test_aqm_quick_judges_each_fifo_finding_behind_every_aqm_and_shows_the_queue_held_short(tmp_path: Path) -> None:
    summary = get_study("aqm").run(tmp_path, quick=True)
    text = summary.read_text(encoding="utf-8")
    findings = text.split("## Findings")[1].split("## ")[0]
    for aqm in ("fq_codel", "cake", "pie"):
        assert f"behind {aqm}: BBRv1 still beats CUBIC" in findings and f"behind {aqm}: BBRv3 still beats CUBIC" in findings
    assert len(re.findall(r"\*\*(holds|does not hold|not testable here)\*\*", findings)) == 2 * (1 + 3 * 3) + 3
    for bbr in ("bbr", "bbr3"):
        assert (tmp_path / "figures" / f"gain_{bbr}.png").is_file() and (tmp_path / "figures" / f"gain_{bbr}.svg").is_file()
    table = pd.read_csv(tmp_path / "goodput.csv")
    assert set(table["aqm"]) == {"fifo", "fq_codel", "cake", "pie"}
    # CUBIC fills a 10 MB FIFO but not an AQM's queue: at 100 Mbit/s the FIFO's median sojourn
    # is hundreds of ms, fq_codel's and CAKE's a few.
    deep = table[(table.buffer_bytes == 10_000_000) & (table.rate_mbps == 100) & (table.bbr == "bbr")].set_index(["aqm", "rtt_ms"])
    for rtt in (10, 100):
        assert deep.loc[("fifo", rtt), "sojourn_p50_ms_cubic"] > 100
        for aqm in ("fq_codel", "cake"):
            assert deep.loc[(aqm, rtt), "sojourn_p50_ms_cubic"] < 15
