"""The report of `cclab validate`: summary.md, its figures, and the console lines."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from cclab.fidelity import figures
from cclab.results import RunResult
from cclab.studies._common import fmt, markdown_table

if TYPE_CHECKING:
    from cclab.fidelity.compare import ValidationReport


def _pct(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{100 * value:.1f}%"


def _ratio(value: float | None) -> str:
    if value is None:
        return "—"
    return "∞" if not math.isfinite(value) else f"{value:.2f}"


def write_report(report: ValidationReport, shown: dict[str, dict[str, RunResult]]) -> Path:
    """summary.md and figures; `shown` holds, per case and engine, the run to draw."""
    out = report.out_dir
    figure_dir = out / "figures"
    for comparison in report.comparisons:
        runs = shown[comparison.case]
        figures.case_figure(comparison.case, runs, figure_dir / comparison.case)
    if report.comparisons:
        figures.goodput_scatter(report.comparisons, figure_dir / "goodput_scatter")
        figures.error_bars(report.comparisons, figure_dir / "errors")

    summary = report.summary
    lines = [
        f"# Fidelity: validation set `{report.set.name}`, simulator against kernel",
        "",
        f"{report.set.description}. {len(report.set.cases)} cases; {summary.cases} compared; "
        f"{report.wall_s:.0f} s wall for this call (finished runs are reused). Each simulator run starts its "
        "flows' data as late, relative to each other, as its kernel twin's first data segments left (iperf3's "
        "launches are a few ms late, more so for a client launched while another starts up, and its data follows "
        "the SYN by two RTTs and a few ms more; kernel runs from before that stamp are paired on their SYNs).",
        "",
        "## Figures of merit",
        "",
        markdown_table(["criterion", "measured", "met"], [(name, measured, {True: "yes", False: "**no**", None: "n/a"}[met]) for name, measured, met in summary.criteria()]),
        "",
        f"Median mean-queue difference: {_pct(summary.queue_median_error_of_limit)} of the buffer; "
        f"median mean-RTT error: {_pct(summary.rtt_median_error)}.",
        "",
        summary.steady_line(),
        "",
        summary.held_out_line(),
        "",
        "![goodput per case](figures/goodput_scatter.png)",
        "![errors per case](figures/errors.png)",
        "",
        "## Cases",
        "",
        markdown_table(
            ["case", "regime", "goodput sim / kernel (Mbit/s)", "error", "retrans sim / kernel", "ratio", "mean queue sim / kernel (KB)", "mean RTT sim / kernel (ms)", "winner sim / kernel"],
            [
                (
                    f"[{c.case}](figures/{c.case}.png)",
                    c.regime,
                    f"{fmt(c.sim_goodput_mbps, 2)} / {fmt(c.kernel_goodput_mbps, 2)}",
                    _pct(c.goodput_error),
                    f"{c.sim_retrans} / {c.kernel_retrans}",
                    _ratio(c.retrans_ratio),
                    f"{fmt(c.sim_queue_mean_bytes / 1e3)} / {fmt(c.kernel_queue_mean_bytes / 1e3)}",
                    f"{fmt(c.sim_rtt_mean_ms)} / {fmt(c.kernel_rtt_mean_ms)}",
                    f"{c.sim_winner} / {c.kernel_winner}" if c.sim_winner else "",
                )
                for c in report.comparisons
            ],
        ),
        "",
        "## BBR against CUBIC",
        "",
        "Pairs are the same one-flow network with each CC; in a mixed case the CCs share one link. "
        "The margin is BBR's lead over CUBIC in goodput; within 5% is a tie. The engines agree when the "
        "same CC is ahead on both or both call it a tie.",
        "",
        markdown_table(["pair or case", "sim", "kernel", "agree"], [(w.name, w.sim, w.kernel, "yes" if w.agrees else "**no**") for w in summary.winner_checks]),
    ]
    shared = [c for c in report.comparisons if c.share_error_pts is not None or c.sim_spread_mbps is not None]
    if shared:
        lines += [
            "",
            "## Shares and spreads",
            "",
            "The largest difference between the engines in a flow group's share of the link (flows of one CC, "
            "gain and RTT; each engine's median over its runs), and the run-to-run spread: the interquartile "
            "range across runs of each group's goodput, averaged over groups. p is the permutation test of one "
            "shared spread (below 0.05: the spreads differ); \"2x by chance\" is how often a simulator with the "
            "kernel's spread would land within 2x at these run counts. Held-out cases were not looked at "
            "while fixing the simulator.",
            "",
            markdown_table(
                ["case", "share error (points)", "spread sim / kernel (Mbit/s)", "p", "2x by chance", "held out"],
                [
                    (c.case, "–" if c.share_error_pts is None else f"{c.share_error_pts:.1f}",
                     "–" if c.sim_spread_mbps is None else f"{fmt(c.sim_spread_mbps, 2)} / {fmt(c.kernel_spread_mbps, 2)}",
                     "–" if c.spread_p_value is None else f"{c.spread_p_value:.2f}",
                     "–" if c.spread_null_within_share is None else f"{c.spread_null_within_share:.0%}",
                     "yes" if c.held_out else "")
                    for c in shared
                ],
            ),
        ]  # fmt: skip
    aqm_cases = [c for c in report.comparisons if c.regime == "aqm"]
    if aqm_cases:
        lines += [
            "",
            "## Queue disciplines",
            "",
            "Median per-packet queueing delay at the bottleneck and CE marks on each engine; they agree when within "
            "2 ms or 25%. The kernel engine's queue is the kernel's qdisc where it has one, else cclab's own "
            "(the run's provenance says which).",
            "",
            markdown_table(
                ["case", "queue", "sojourn p50 sim / kernel (ms)", "agree", "CE marks sim / kernel", "goodput error"],
                [
                    (c.case, c.aqm, f"{fmt(c.sim_sojourn_p50_ms, 2)} / {fmt(c.kernel_sojourn_p50_ms, 2)}",
                     {True: "yes", False: "**no**", None: "–"}[c.sojourn_agrees], f"{c.sim_ce_marks} / {c.kernel_ce_marks}", _pct(c.goodput_error))
                    for c in aqm_cases
                ],
            ),
        ]  # fmt: skip
    if report.excluded:
        lines += ["", "## Left out", "", *[f"- {line}" for line in report.excluded]]
    path = report.summary_path
    staging = path.with_name(f".{path.name}.partial")
    staging.write_text("\n".join(lines) + "\n", encoding="utf-8")
    staging.replace(path)
    return path


def console_lines(report: ValidationReport) -> list[str]:
    lines = [f"{report.set.name}: {report.summary.cases} cases compared ({len(report.excluded)} left out)"]
    lines += [f"  {({True: 'ok ', False: 'NO ', None: 'n/a'})[met]} {name}: {measured}" for name, measured, met in report.summary.criteria()]
    lines.append(f"  {report.summary.steady_line()}")
    if report.summary.held_out_line():
        lines.append(f"  {report.summary.held_out_line()}")
    lines += [f"  left out: {line}" for line in report.excluded]
    return lines
