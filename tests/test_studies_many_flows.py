"""The many-flow studies' --quick variants, end to end on the simulator.

Each quick study runs a handful of short simulations; the assertions check that the
summary sets our numbers beside the seed's with verdicts, that figures exist in both
formats, and a few physical facts the quick runs are long enough to show.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cclab.studies import get_study
from conftest import EXAMPLES, run_cli

pytestmark = pytest.mark.sim

VERDICT = re.compile(r"\*\*(confirmed|contradicted|not testable here)\*\*")


def _run_quick(name: str, out_dir: Path) -> str:
    summary = get_study(name).run(out_dir, quick=True, jobs=1)
    assert summary == out_dir / "summary.md"
    text = summary.read_text(encoding="utf-8")
    assert VERDICT.search(text), "a summary must give verdicts"
    for png in out_dir.glob("*.png"):
        assert png.with_name(png.stem + ".svg").is_file()
    assert (out_dir / "runs").is_dir()
    return text


def test_shallow_buffers_quick_reports_standing_queue_loss_knee_and_cycle(tmp_path: Path) -> None:
    text = _run_quick("shallow-buffers", tmp_path)
    assert "1.12 BDP" in text and "## 2. Loss rate vs queue size" in text
    # The 2 BBR vs 2 CUBIC cycle at 1.75 BDP is about 20 s in the write-up.
    row = next(line for line in text.splitlines() if line.startswith("| sim | 60 |"))
    period = float(row.split("|")[7])
    assert 15 <= period <= 25
    for stem in ("standing_queue_10bdp_sim", "loss_vs_queue", "duel_shares_vs_queue", "duel_1.75bdp_sim"):
        assert (tmp_path / f"{stem}.png").is_file()


def test_fairness_share_quick_shows_bbr_winning_shallow_and_cubic_deep_buffers(tmp_path: Path) -> None:
    text = _run_quick("fairness-share", tmp_path)
    rows = [line.split("|") for line in text.splitlines() if re.match(r"\| [0-9.]+ \| 0\.", line)]
    shares = {float(r[1]): float(r[2]) for r in rows}  # buffer_bdp -> BBR share
    assert shares[0.1] > 0.5 > shares[100]
    assert (tmp_path / "share_vs_buffer.svg").is_file()


def test_fairness_share_with_your_cc_in_bbrs_place_names_it_in_the_table_and_the_findings(tmp_path: Path) -> None:
    # The Vegas example keeps a few packets queued: CUBIC outgrows it once the buffer holds more.
    done = run_cli("reproduce", "fairness-share", "--quick", "--cc", EXAMPLES / "cc" / "vegas.bpf.c", "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "summary.md").read_text()
    label = "vegas.bpf.c:vegas"
    assert text.startswith(f"# fairness-share: 1 {label} (yours, in BBR's place) vs 1 CUBIC")
    assert f"| buffer_bdp | {label} share | CUBIC share |" in text
    deep = re.search(rf"at 100 BDP: CUBIC (\d+)%, {re.escape(label)} (\d+)%", text)
    assert deep and int(deep.group(1)) > 50, text
    assert (tmp_path / "share_vs_buffer.svg").is_file()


def test_kfoury2021_quick_covers_all_eight_experiments_with_every_bbr_version(tmp_path: Path) -> None:
    text = _run_quick("kfoury2021", tmp_path)
    for heading in ("## A.", "## B.", "## C.", "## D.", "## E.", "## F.", "## G.", "## H."):
        assert heading in text
    findings = text.split("## The slides' findings beside ours")[1].split("\n## ")[0]
    assert len(VERDICT.findall(findings)) >= 10, "every BBRv2 finding of the slides gets a verdict"
    for bbr in ("bbr", "bbr2", "bbr3"):
        assert (tmp_path / f"coexistence_heatmap_{bbr}.png").is_file()
        assert (tmp_path / f"many_cdf_{bbr}_loss1pct.svg").is_file()
    assert (tmp_path / "loss_goodput_1bdp.png").is_file()
    for bbr in ("bbr", "bbr2", "bbr3"):
        assert (tmp_path / f"aqm_fairness_{bbr}.png").is_file()
    aqm_section = text.split("## H.")[1].split("\n## ")[0]
    for queue_name in ("tail drop", "RED", "CAKE", "FQ-CoDel", "FQ-CoDel w/ ECN"):
        for bbr_label in ("BBRv1", "BBRv2", "BBRv3"):
            assert re.search(rf"\| {bbr_label} \| \d+ {bbr_label} \+ \d+ CUBIC \| {re.escape(queue_name)} \|", aqm_section), (bbr_label, queue_name)


def test_kfoury2021_runs_your_cc_beside_the_three_bbrs_with_its_own_rows_and_figures(tmp_path: Path) -> None:
    # Three of the experiments on a tiny plan (the full quick study is the test above): the
    # heatmaps (shares matched by the results' name of the source), RTT unfairness (Jain per
    # CC) and the loss sweep. The Reno-like example backs off by 0.3 per loss, CUBIC's beta.
    from dataclasses import replace

    from cclab.studies._common import user_cc
    from cclab.studies.kfoury2021 import loss_aqm, many_flows
    from cclab.studies.kfoury2021.plan import QUICK

    source = str(EXAMPLES / "cc" / "reno_beta07.bpf.c")
    plan = replace(QUICK, yours=user_cc(source)[0], heat_buffers=(1,), heat_losses=(0.0,), rtt_buffers=(2,), loss_rates=(0.0, 0.05), loss_buffers=(1,))
    kw = {"engine": "sim", "jobs": 1, "include_invalid": False}
    label = "reno_beta07.bpf.c:reno_beta07"
    coexistence, _ = many_flows.coexistence(tmp_path, plan, kw)
    row = next(line for line in coexistence.splitlines() if line.startswith(f"| {label} |"))
    cubic_pct, yours_pct = (float(cell) for cell in row.split("|")[5:7])
    assert 90 <= cubic_pct + yours_pct <= 100, row  # the two shares fill the link, less headers
    assert (tmp_path / "coexistence_heatmap_yours.png").is_file()
    unfairness, _ = many_flows.rtt_unfairness(tmp_path, plan, kw)
    assert re.search(rf"{re.escape(label)} [01]\.\d\d -> [01]\.\d\d", unfairness), unfairness
    sweep, _ = loss_aqm.loss_sweep(tmp_path, plan, kw)
    assert f"| {label} | 1 | 5 |" in sweep
    done = run_cli("reproduce", "kfoury2021", "--cc", "nosuch.bpf.c", "--quick", "--out", tmp_path / "refused")
    assert done.returncode == 2 and "--cc: no such file" in done.stderr, done.stderr


def test_kfoury2021_refuses_the_kernel_engine_before_running_anything(tmp_path: Path) -> None:
    from cclab.errors import CclabError

    with pytest.raises(CclabError, match="use --engine sim"):
        get_study("kfoury2021").run(tmp_path / "k", engine="kernel", quick=True)
    assert not (tmp_path / "k").exists()
