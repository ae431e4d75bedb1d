"""The L4S claims (RFC 9330, RFC 9331, RFC 9332) and DCTCP's (RFC 8257), each with our numbers.

Five experiments, each a small sweep of its own:
- A. One TCP Prague flow through DualPI2 (tc's defaults): the L4S queue's delay at full
  utilization ("about 1 ms at the 99th percentile", RFC 9330 section 3).
- B. Prague against CUBIC through DualPI2, at equal and unequal RTTs: the coupling (k = 2)
  gives them roughly equal rates (RFC 9332 section 2.1); neither takes less than a quarter.
- C. Two Prague flows of 5 and 20 ms through DualPI2: below its 25 ms reference Prague's
  increase is RTT-independent (draft-briscoe-iccrg-prague-congestion-control section 2.4.4),
  beside two DCTCP flows, which are not.
- D. Prague and DCTCP against CUBIC and Reno with ECN in one RFC 3168 queue (CoDel and PIE
  with ECN): the scalable flow takes most of the link (RFC 9330 section 4.3; the reason for
  DualPI2's two queues).
- E. DCTCP in a data center's setting: a 1 ms CE threshold (CoDel's `ce_threshold`) at 10 and
  80 ms: full utilization with a queue near the threshold where the threshold is at least
  a seventh of the BDP (RFC 8257 section 3.1, after Alizadeh et al.), not at 80 ms.

Simulator only here: this kernel has neither Prague nor DCTCP and cclab has no BPF port of
them yet (the study refuses the kernel engine in one line). BBRv3 with ECN is not in it:
v3 uses ECN only on an `ecn_low` route, which no spec field sets yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cclab.analysis.figures import new_figure
from cclab.analysis.timeseries import cc_label
from cclab.errors import CclabError
from cclab.studies._common import (
    STUDY_FLOW_SAMPLE_INTERVAL_MS,
    STUDY_QUEUE_SAMPLE_INTERVAL_MS,
    fmt,
    markdown_table,
    pct,
    progress,
    run_facts,
    run_study_sweep,
    save,
    verdict,
)
from cclab.sweep import Sweep, SkipRule

NAME = "l4s"
DESCRIPTION = "The L4S claims: Prague's delay through DualPI2, coupled shares with CUBIC, RTT independence, starvation in one classic ECN queue, DCTCP's threshold"

RATE_MBPS = 100.0
QUICK_RATE_MBPS = 50.0
DURATION_S = 60.0
QUICK_DURATION_S = 15.0
#: The share of the run left out of every metric (start-up).
WARMUP_FRACTION = 1 / 3
#: RFC 9330's "about 1 ms" p99, with the issue's margin: the claim holds at 2 ms or less.
L4S_P99_LIMIT_MS = 2.0
MIN_UTILIZATION = 0.9
#: "Roughly equal" (RFC 9332): neither flow under a quarter.
FAIR_LOW, FAIR_HIGH = 0.25, 0.75
#: "Most of the link" in one classic queue.
DOMINANT_SHARE = 0.75
#: RTT independence: the 5 ms flow within this of an equal share.
RTT_INDEPENDENT_WITHIN = 0.15
#: Prague's reference RTT (tcp_prague.c prague_rtt_target) and the pair's RTTs.
SHORT_RTT_MS, LONG_RTT_MS = 5.0, 20.0


def _spec(quick: bool, *, rtt_ms: float, flows: list[dict[str, Any]], aqm: str, aqm_params: dict[str, Any] | None = None) -> dict[str, Any]:
    duration = QUICK_DURATION_S if quick else DURATION_S
    bottleneck: dict[str, Any] = {"rate_mbps": QUICK_RATE_MBPS if quick else RATE_MBPS, "rtt_ms": rtt_ms, "buffer": "4bdp", "aqm": aqm}
    if aqm_params:
        bottleneck["aqm_params"] = aqm_params
    return {"duration_s": duration, "bottleneck": bottleneck, "flows": flows, "output": {"warmup_s": duration * WARMUP_FRACTION}}


def _sweep(name: str, base: dict[str, Any], axes: dict[str, list[Any]], skip: list[SkipRule] | None = None) -> Sweep:
    return Sweep(
        name=f"{NAME}-{name}", base=base, axes=axes, skip=skip or [],
        flow_sample_interval_ms=STUDY_FLOW_SAMPLE_INTERVAL_MS, queue_sample_interval_ms=STUDY_QUEUE_SAMPLE_INTERVAL_MS,
    )  # fmt: skip


def sweeps(quick: bool = False) -> dict[str, Sweep]:
    """The five experiments' sweeps, keyed A to E."""
    prague, cubic = {"cc": "prague"}, {"cc": "cubic"}
    return {
        "A": _sweep("delay", _spec(quick, rtt_ms=20, flows=[prague], aqm="dualpi2"),
                    {"bottleneck.rtt_ms": [10.0, 20.0] if quick else [10.0, 20.0, 50.0]}),
        "B": _sweep("coupled", _spec(quick, rtt_ms=20, flows=[prague, cubic], aqm="dualpi2"),
                    {"flows.0.extra_rtt_ms": [0.0, 20.0], "flows.1.extra_rtt_ms": [0.0, 20.0]},
                    [SkipRule(reason="both longer is the equal-RTT case again", when={"flows.0.extra_rtt_ms": 20.0, "flows.1.extra_rtt_ms": 20.0})]),
        "C": _sweep("rtt-independence", _spec(quick, rtt_ms=SHORT_RTT_MS, flows=[prague, {**prague, "extra_rtt_ms": LONG_RTT_MS - SHORT_RTT_MS}], aqm="dualpi2"),
                    {"flows.0.cc": ["prague", "dctcp"], "flows.1.cc": ["prague", "dctcp"]},
                    [SkipRule(reason="a pair of one CC at two RTTs", when={"flows.0.cc": "prague", "flows.1.cc": "dctcp"}),
                     SkipRule(reason="a pair of one CC at two RTTs", when={"flows.0.cc": "dctcp", "flows.1.cc": "prague"})]),
        "D": _sweep("classic-ecn-queue", _spec(quick, rtt_ms=20, flows=[prague, {"cc": "cubic", "ecn": True}], aqm="codel", aqm_params={"ecn": True}),
                    {"flows.0.cc": ["prague", "dctcp"], "flows.1.cc": ["cubic", "reno"], "bottleneck.aqm": ["codel"] if quick else ["codel", "pie"]}),
        "E": _sweep("dctcp-threshold", _spec(quick, rtt_ms=10, flows=[{"cc": "dctcp"}], aqm="codel", aqm_params={"ecn": True, "ce_threshold_ms": 1.0}),
                    {"bottleneck.rtt_ms": [10.0, 80.0]}),
    }  # fmt: skip


def _pair_share(flows: pd.DataFrame) -> pd.DataFrame:
    """Per run of two flows: flow 0's share of their goodput, and both flows' facts."""
    rows = []
    for key, run in flows.groupby("run_key", sort=False):
        run = run.sort_values("flow_id")
        first, second = run.iloc[0], run.iloc[1]
        total = first["goodput_mbps"] + second["goodput_mbps"]
        rows.append({
            "run_key": key, "first": str(first["cc"]), "second": str(second["cc"]),
            "first_rtt_ms": first["rtt_ms"] + first["extra_rtt_ms"], "second_rtt_ms": second["rtt_ms"] + second["extra_rtt_ms"],
            "aqm": first["aqm"], "share": first["goodput_mbps"] / total if total > 0 else float("nan"),
            "first_mbps": first["goodput_mbps"], "second_mbps": second["goodput_mbps"],
            "l4s_p99_ms": first.get("bottleneck_l4s_sojourn_p99_ms"), "classic_mean_ms": first.get("bottleneck_classic_sojourn_mean_ms"),
        })  # fmt: skip
    return pd.DataFrame(rows)


def _share_figure(pairs: dict[str, pd.DataFrame], engine: str):
    """One bar per pair: the first flow's share of the two flows' goodput."""
    labels, shares = [], []
    for letter, table in pairs.items():
        for row in table.itertuples():
            labels.append(f"{letter}: {cc_label(row.first)} {row.first_rtt_ms:g} ms vs {cc_label(row.second)} {row.second_rtt_ms:g} ms, {row.aqm}")
            shares.append(row.share)
    figure = new_figure(9.0, 0.45 * len(labels) + 1.5)
    ax = figure.add_subplot()
    y = np.arange(len(labels))
    ax.barh(y, shares, color="tab:blue")
    ax.axvline(0.5, color="black", linewidth=1)
    for edge in (FAIR_LOW, FAIR_HIGH):
        ax.axvline(edge, color="grey", linestyle=":", linewidth=1)
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("first flow's share of the pair's goodput")
    ax.set_title(f"Shares of each pair - {engine} engine", fontsize=10)
    return figure


def findings(delay: pd.DataFrame, coupled: pd.DataFrame, rtt: pd.DataFrame, classic: pd.DataFrame, dctcp: pd.DataFrame) -> list[list[str]]:
    rows: list[list[str]] = []
    p99 = delay["bottleneck_l4s_sojourn_p99_ms"].astype(float)
    util = delay["bottleneck_utilization"].astype(float)
    rows.append([
        "A. An L4S flow through DualPI2 sees about 1 ms of queue (p99) at full utilization (RFC 9330 3)",
        f"L4S p99 {', '.join(fmt(v, 2) for v in p99)} ms at utilization {', '.join(pct(v) for v in util)} (RTTs {', '.join(fmt(v, 0) for v in delay['rtt_ms'])} ms)",
        verdict(bool((p99 <= L4S_P99_LIMIT_MS).all() and (util >= MIN_UTILIZATION).all())),
    ])  # fmt: skip
    rows.append([
        "B. Through DualPI2 a Prague and a CUBIC flow get roughly equal rates (RFC 9332 2.1): neither under a quarter",
        "; ".join(f"Prague {r.first_rtt_ms:g} / CUBIC {r.second_rtt_ms:g} ms: {pct(r.share)} (classic queue {fmt(r.classic_mean_ms)} ms)"
                  for r in coupled.itertuples()),
        verdict(bool(coupled["share"].between(FAIR_LOW, FAIR_HIGH).all())),
    ])  # fmt: skip
    prague = rtt[rtt["first"] == "prague"]
    dctcp_pair = rtt[rtt["first"] == "dctcp"]
    rows.append([
        f"C. Below 25 ms Prague's rate does not depend on its RTT: a {SHORT_RTT_MS:g} ms flow beside a {LONG_RTT_MS:g} ms one gets about half (draft-briscoe-iccrg-prague 2.4.4)",
        f"the {SHORT_RTT_MS:g} ms Prague flow: {pct(float(prague['share'].iloc[0]))}; the {SHORT_RTT_MS:g} ms DCTCP flow, for contrast "
        f"(ECT(0), so in the classic queue): {pct(float(dctcp_pair['share'].iloc[0]))}",
        verdict(bool(abs(float(prague["share"].iloc[0]) - 0.5) <= RTT_INDEPENDENT_WITHIN)),
    ])  # fmt: skip
    rows.append([
        "D. In one RFC 3168 queue a scalable flow takes most of the link from a classic ECN flow (RFC 9330 4.3)",
        "; ".join(f"{cc_label(r.first)} vs {cc_label(r.second)}, {r.aqm}: {pct(r.share)}" for r in classic.itertuples()),
        verdict(bool((classic["share"] > DOMINANT_SHARE).all())),
    ])  # fmt: skip
    by_rtt = {float(r.rtt_ms): r for r in dctcp.itertuples()}
    short, long = by_rtt[min(by_rtt)], by_rtt[max(by_rtt)]
    rows.append([
        "E. DCTCP with a 1 ms CE threshold fills the link with a queue near it where the threshold is at least BDP/7 (10 ms), not at 80 ms (RFC 8257 3.1)",
        f"{fmt(short.rtt_ms, 0)} ms: utilization {pct(short.bottleneck_utilization)}, queue mean {fmt(short.bottleneck_sojourn_mean_ms, 2)} ms; "
        f"{fmt(long.rtt_ms, 0)} ms: {pct(long.bottleneck_utilization)}, {fmt(long.bottleneck_sojourn_mean_ms, 2)} ms",
        verdict(bool(short.bottleneck_utilization >= 0.95 and short.bottleneck_sojourn_mean_ms <= 2.0 and long.bottleneck_utilization < 0.95)),
    ])  # fmt: skip
    return rows


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False) -> Path:
    if engine != "sim":
        raise CclabError("l4s: this study needs Prague and DCTCP, which the kernel engine cannot run here yet; use --engine sim")
    out_dir = Path(out_dir)
    progress(f"{NAME}: the L4S claims on the {engine} engine{' (quick)' if quick else ''}")
    results: dict[str, pd.DataFrame] = {}
    infos = []
    for letter, sweep in sweeps(quick).items():
        flows, info = run_study_sweep(sweep, out_dir, engine=engine, jobs=jobs, include_invalid=include_invalid)
        results[letter] = flows
        infos.append(info)
    info = {"runs": sum(i["runs"] for i in infos), "wall_s": sum(i["wall_s"] for i in infos),
            "invalid_runs": sum(i["invalid_runs"] for i in infos), "included_invalid": include_invalid}  # fmt: skip
    pairs = {letter: _pair_share(results[letter]) for letter in ("B", "C", "D")}
    for letter, table in pairs.items():
        table.to_csv(out_dir / f"pairs_{letter}.csv", index=False)
    delay, dctcp = results["A"].sort_values("rtt_ms"), results["E"].sort_values("rtt_ms")
    rows = findings(delay, pairs["B"], pairs["C"], pairs["D"], dctcp)
    figure = save(_share_figure(pairs, engine), out_dir, "shares")
    delay_rows = [[fmt(r.rtt_ms, 0), pct(r.bottleneck_utilization), fmt(r.bottleneck_l4s_sojourn_mean_ms, 2),
                   fmt(r.bottleneck_l4s_sojourn_p99_ms, 2), fmt(r.bottleneck_l4s_ce_marks), fmt(r.goodput_mbps)] for r in delay.itertuples()]  # fmt: skip
    pair_rows = [[letter, cc_label(r.first), fmt(r.first_rtt_ms, 0), cc_label(r.second), fmt(r.second_rtt_ms, 0), r.aqm, fmt(r.first_mbps), fmt(r.second_mbps), pct(r.share)]
                 for letter, table in pairs.items() for r in table.itertuples()]  # fmt: skip
    rate = QUICK_RATE_MBPS if quick else RATE_MBPS
    text = "\n\n".join([
        f"# {NAME}: the L4S claims ({engine} engine)",
        f"{DESCRIPTION}. {rate:g} Mbit/s, 4 BDP of buffer, {QUICK_DURATION_S if quick else DURATION_S:g} s runs, "
        f"metrics after the first third (warm-up); tc's defaults for DualPI2, CoDel and PIE.",
        run_facts(engine, quick, info),
        "## Findings\n\n" + markdown_table(["claim", "ours", "verdict"], rows),
        "## A. Prague alone through DualPI2\n\n"
        + markdown_table(["RTT ms", "utilization", "L4S queue mean ms", "L4S queue p99 ms", "L4S CE marks", "goodput Mbit/s"], delay_rows),
        "## B-D. Pairs\n\n"
        + markdown_table(["exp.", "first", "RTT ms", "second", "RTT ms", "queue", "first Mbit/s", "second Mbit/s", "first's share"], pair_rows),
        figure,
        "Why B can part from \"roughly equal\": RFC 9332's balance compares flows of equal round "
        "trips, and the classic flow's includes the classic queue, which PI2 holds near 15 ms, while "
        "the L4S flow's queue stays near 1 ms. At a 20 ms base RTT that is about 35 ms against 21, "
        "and a Reno-like rate goes as 1/RTT, so the classic flow gets less; the longer the base RTT "
        "against 15 ms, the closer to equal.",
        "Not in this study: the kernel engine (no Prague or DCTCP module here, no BPF port yet), "
        "BBRv3's ECN response (it needs an `ecn_low` route), and Prague's rate mode for windows of "
        "at most 4 packets (not modelled).",
    ])  # fmt: skip
    summary = out_dir / "summary.md"
    summary.write_text(text + "\n", encoding="utf-8")
    return summary
