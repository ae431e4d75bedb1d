"""`cclab reproduce l4s --quick`, end to end on the simulator: every claim gets a verdict,
the numbers behind it are in the tables, and the kernel engine is refused up front."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cclab.errors import CclabError
from cclab.studies import get_study

pytestmark = pytest.mark.sim


def test_l4s_quick_judges_every_claim_from_its_own_runs(tmp_path: Path) -> None:
    summary = get_study("l4s").run(tmp_path, quick=True, jobs=1)
    text = summary.read_text(encoding="utf-8")
    findings = text.split("## Findings")[1].split("\n## ")[0]
    rows = [line for line in findings.splitlines() if line.startswith("| ") and not line.startswith("| claim")]
    assert [row[2] for row in rows] == list("ABCDE"), rows
    assert all("**holds**" in row or "**does not hold**" in row for row in rows)
    # A scalable flow in one classic ECN queue starves the classic one, whatever the pair
    # (a behaviour of the algorithms, RFC 9330 4.3): the verdict follows from the shares.
    classic = pd.read_csv(tmp_path / "pairs_D.csv")
    assert len(classic) == 4 and set(classic["first"]) == {"prague", "dctcp"}
    assert ("**holds**" in rows[3]) == bool((classic["share"] > 0.75).all())
    # Each pair's share is of two flows that both ran; B covers equal and unequal RTTs.
    for letter in "BCD":
        pairs = pd.read_csv(tmp_path / f"pairs_{letter}.csv")
        assert pairs["share"].between(0, 1).all() and (pairs["first_mbps"] > 0).all()
    coupled = pd.read_csv(tmp_path / "pairs_B.csv")
    assert sorted(zip(coupled["first_rtt_ms"], coupled["second_rtt_ms"])) == [(20, 20), (20, 40), (40, 20)]
    assert (tmp_path / "figures" / "shares.png").is_file() and (tmp_path / "figures" / "shares.svg").is_file()


def test_l4s_refuses_the_kernel_engine_before_running_anything(tmp_path: Path) -> None:
    with pytest.raises(CclabError, match="use --engine sim"):
        get_study("l4s").run(tmp_path / "k", engine="kernel", quick=True)
    assert not (tmp_path / "k").exists()
