"""Kfoury, Gomez, Crichigno: "Performance Evaluation of TCP BBRv2 Alpha ..." (slides, 2021; seed 003).

BBRv2 (google/bbr v2alpha) against BBRv1 and CUBIC, with BBRv3 beside them, on a 1 Gbit/s
bottleneck. Eight experiments, one module each group:

- `many_flows`: A. 100 flows of one CC across buffers, with and without 1% loss;
  B. 1 CUBIC vs 1 BBR (v1, v2, v3) coexistence heatmaps; C. RTT unfairness (10 vs 50 ms)
  under tail drop and FQ-CoDel;
- `delay`: D. retransmission rate vs number of flows in a 0.02 BDP buffer; E. queueing delay
  with 2-50 flows in a 10 BDP buffer; F. completion time of 50 CUBIC + 50 BBR flows;
- `loss_aqm`: G. one flow's throughput and retransmissions vs random loss; H. fairness of
  BBRv1, v2 and v3 mixed with CUBIC behind tail drop, RED, CAKE, FQ-CoDel and FQ-CoDel with ECN.

The slides run 300 s per experiment; we run 60 s (F: until the flows finish, up to 240 s).
The summary opens with the slides' BBRv2 findings beside ours, a verdict each.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cclab.errors import CclabError
from cclab.studies._common import user_cc
from cclab.studies._manyflows import md_table
from cclab.studies.kfoury2021 import delay, loss_aqm, many_flows
from cclab.studies.kfoury2021.plan import FULL, QUICK, Finding, label

NAME = "kfoury2021"
DESCRIPTION = (
    "BBRv2 (and v3) vs BBRv1 and CUBIC on 1 Gbit/s: fairness, coexistence, RTT unfairness, retransmissions, "
    "delay, FCT, loss, AQMs (Kfoury et al., seed 003)"
)


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False,
        cc: str | None = None) -> Path:
    """`cc`: a congestion control of the user's (a C source), run beside the three BBRs in
    every experiment that has them (its rows, figures and grids named `yours`); the slides'
    findings stay about BBRv2."""
    if engine == "kernel":
        raise CclabError(
            f"{NAME}: runs 100 flows at 1 Gbit/s, beyond what the kernel engine emulates faithfully on a "
            "2-core machine (docs/BENCHMARKS.md, \"Many flows\"); use --engine sim"
        )
    out_dir = Path(out_dir)
    plan = QUICK if quick else FULL
    if cc is not None:
        plan = replace(plan, yours=user_cc(cc)[0])
    kw = {"engine": engine, "jobs": jobs, "include_invalid": include_invalid}
    mode = "quick (a demo, not a measurement)" if quick else "full"
    sections: list[str] = []
    findings: list[Finding] = []
    for experiment in (
        many_flows.many_flows, many_flows.coexistence, many_flows.rtt_unfairness,
        delay.retransmissions, delay.queueing_delay, delay.fct,
        loss_aqm.loss_sweep, loss_aqm.aqm_fairness,
    ):  # fmt: skip
        text, found = experiment(out_dir, plan, kw)
        sections.append(text)
        findings.extend(found)
    head = [
        f"# {NAME}: {DESCRIPTION}\n",
        f"Mode: {mode}; engine {engine}; {plan.duration_s:g} s per run unless said. BBRv1 is Linux's tcp_bbr.c, "
        "BBRv2 google/bbr's v2alpha, BBRv3 its v3. Shares are of delivered goodput; utilization is the "
        "bottleneck's busy fraction.\n",
        *([f"Your congestion control, {label(plan.yours)}, runs beside the three BBRs wherever they run; its "
           "figures are the BBRs' with `yours` in place of the version (e.g. `coexistence_heatmap_yours.png`).\n"] if plan.yours else []),
        "\n## The slides' findings beside ours\n",
        md_table([f.row() for f in findings], ["experiment", "the slides", "ours", "verdict"]),
        "",
    ]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(head + sections), encoding="utf-8")
    return summary
