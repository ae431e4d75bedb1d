"""Does BBR still beat CUBIC behind an AQM? Cao et al.'s grid behind fq_codel, CAKE and PIE.

Cao et al. (seed 000) find that the buffer decides who wins behind a tail-drop FIFO: BBR
in shallow buffers, CUBIC in deep ones where the BDP is small. Users sit behind fq_codel
(Linux's default qdisc), CAKE (home routers) and PIE (cable modems), which keep the queue
near a few milliseconds whatever the buffer. This study runs one flow of BBRv1, BBRv3 and
CUBIC over the Cao grid's rates, RTTs and buffers behind FIFO and each AQM (tc defaults,
the buffer as the hard limit) and asks whether each of the FIFO findings survives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cclab.analysis import decision_tree as dt
from cclab.analysis.figures import draw_heatmap, new_figure, pivot
from cclab.analysis.timeseries import cc_label
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
from cclab.studies.cao2019 import (
    BUFFERS,
    DEEP_BYTES,
    QUICK_BUFFERS,
    QUICK_DURATION_S,
    RATES_MBPS,
    RTTS_MS,
    SHALLOW_BYTES,
    goodput_table,
)
from cclab.sweep import Sweep

NAME = "aqm"
DESCRIPTION = "Does BBR (v1, v3) still beat CUBIC behind fq_codel, CAKE or PIE? Cao et al.'s grid behind each AQM"

AQMS = ("fifo", "fq_codel", "cake", "pie")
BBRS = ("bbr", "bbr3")
DURATION_S = 30.0
QUICK_RATES_MBPS = (10, 100)
QUICK_RTTS_MS = (10, 100)
# "Most" cells is more than half; a finding "survives" an AQM when at least this share of
# the cells where it held behind FIFO still show it.
SURVIVES = 0.8
#: A queue discipline "holds" its delay when the median sojourn in the deep buffer stays
#: within this many times its target (5 ms for fq_codel and CAKE, 15 ms for PIE).
TARGET_FACTOR = 3.0
TARGET_MS = {"fq_codel": 5.0, "cake": 5.0, "pie": 15.0}


def sweep(quick: bool) -> Sweep:
    return Sweep(
        name=f"{NAME}-grid",
        base={"duration_s": QUICK_DURATION_S if quick else DURATION_S,
              "bottleneck": {"rate_mbps": 100, "rtt_ms": 10, "buffer": "100KB"}, "flows": [{"cc": "cubic"}]},
        axes={
            "bottleneck.rate_mbps": list(QUICK_RATES_MBPS if quick else RATES_MBPS),
            "bottleneck.rtt_ms": list(QUICK_RTTS_MS if quick else RTTS_MS),
            "bottleneck.buffer": list(QUICK_BUFFERS if quick else BUFFERS),
            "bottleneck.aqm": list(AQMS),
            "flows.0.cc": [*BBRS, "cubic"],
        },
        flow_sample_interval_ms=STUDY_FLOW_SAMPLE_INTERVAL_MS,
        queue_sample_interval_ms=STUDY_QUEUE_SAMPLE_INTERVAL_MS,
    )  # fmt: skip


def tables(flows: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """(aqm, bbr version) -> the paired table of that BBR against CUBIC behind that queue."""
    out = {}
    for aqm, group in flows.groupby(flows["aqm"].astype(str)):
        for bbr in BBRS:
            table = goodput_table(group, bbr)
            sojourn = group.assign(cc=group["cc"].astype(str)).pivot_table(
                index=list(dt.NETWORK_KEYS), columns="cc", values="bottleneck_sojourn_p50_ms", aggfunc="mean")
            for cc in (bbr, "cubic"):
                if cc in sojourn.columns:
                    name = "bbr" if cc == bbr else "cubic"
                    table = table.merge(sojourn[cc].rename(f"sojourn_p50_ms_{name}").reset_index(), on=list(dt.NETWORK_KEYS), how="left")
            out[(str(aqm), bbr)] = table
    return out


def _keyed(table: pd.DataFrame) -> pd.DataFrame:
    return table.set_index(list(dt.NETWORK_KEYS))


def findings(by: dict[tuple[str, str], pd.DataFrame]) -> list[list[str]]:
    rows: list[list[str]] = []
    for bbr in BBRS:
        fifo = _keyed(by[("fifo", bbr)])
        name = cc_label(bbr)
        shallow_bbr = fifo[(fifo.index.get_level_values("buffer_bytes") == SHALLOW_BYTES) & (fifo["winner"] == "BBR")]
        deep_low = fifo[(fifo.index.get_level_values("buffer_bytes") == DEEP_BYTES) & (fifo["buffer_bdp"] > 1)]
        cubic_deep = deep_low[deep_low["winner"] == "CUBIC"]
        share = len(shallow_bbr) / max(int((fifo.index.get_level_values("buffer_bytes") == SHALLOW_BYTES).sum()), 1)
        rows.append([f"FIFO: {name} beats CUBIC in most shallow (100 KB) networks (Cao)", f"{pct(share, 0)} of them", verdict(share > 0.5)])
        for aqm in AQMS[1:]:
            table = _keyed(by[(aqm, bbr)])
            kept = table.reindex(shallow_bbr.index)["winner"].eq("BBR").mean() if len(shallow_bbr) else float("nan")
            rows.append([f"behind {aqm}: {name} still beats CUBIC where it did behind FIFO in 100 KB",
                         f"{pct(kept, 0)} of {len(shallow_bbr)} networks", verdict(bool(kept >= SURVIVES) if np.isfinite(kept) else None)])
            flipped = table.reindex(cubic_deep.index)["winner"].eq("CUBIC").mean() if len(cubic_deep) else float("nan")
            rows.append([f"behind {aqm}: CUBIC keeps its deep-buffer (10 MB, buffer > BDP) edge over {name}",
                         f"{pct(flipped, 0)} of {len(cubic_deep)} networks" if len(cubic_deep) else "no such network behind FIFO",
                         verdict(bool(flipped >= SURVIVES) if len(cubic_deep) else None)])
            shallow = table[table.index.get_level_values("buffer_bytes") == SHALLOW_BYTES]["winner"]
            deep = table[table.index.get_level_values("buffer_bytes") == DEEP_BYTES]["winner"]
            same = (shallow.droplevel("buffer_bytes") == deep.droplevel("buffer_bytes").reindex(shallow.droplevel("buffer_bytes").index)).mean()
            rows.append([f"behind {aqm}: the buffer no longer decides ({name} vs CUBIC wins alike at 100 KB and 10 MB)",
                         f"same winner in {pct(same, 0)} of rate x RTT networks", verdict(bool(same >= SURVIVES))])
    for aqm in AQMS[1:]:
        deep = _keyed(by[(aqm, "bbr")])
        deep = deep[deep.index.get_level_values("buffer_bytes") == DEEP_BYTES]
        cubic = deep.get("sojourn_p50_ms_cubic", pd.Series(dtype=float)).median()
        v1 = deep.get("sojourn_p50_ms_bbr", pd.Series(dtype=float)).median()
        limit = TARGET_FACTOR * TARGET_MS[aqm]
        rows.append([f"{aqm} holds the median queueing delay near its {TARGET_MS[aqm]:g} ms target in a 10 MB buffer",
                     f"median sojourn p50: CUBIC {fmt(cubic, 1)} ms, BBRv1 {fmt(v1, 1)} ms (limit {limit:g} ms)",
                     verdict(bool(cubic <= limit and v1 <= limit) if np.isfinite(cubic) and np.isfinite(v1) else None)])
    return rows


def gain_figure(by: dict[tuple[str, str], pd.DataFrame], bbr: str, scenario: str) -> Any:
    figure = new_figure(6.0 * len(AQMS), 10.0)
    for row, (buffer_bytes, label) in enumerate(((SHALLOW_BYTES, "100 KB"), (DEEP_BYTES, "10 MB"))):
        for col, aqm in enumerate(AQMS):
            ax = figure.add_subplot(2, len(AQMS), row * len(AQMS) + col + 1)
            table = by[(aqm, bbr)]
            rows = table[table["buffer_bytes"] == buffer_bytes]
            marks = pivot(rows.assign(t=rows["transient"].astype(float)), x="rtt_ms", y="rate_mbps", value="t") if "transient" in rows else None
            draw_heatmap(ax, pivot(rows, x="rtt_ms", y="rate_mbps", value="gain_pct"), kind="diverging",
                         xlabel="base RTT (ms)", ylabel="rate (Mbit/s)", colorbar_label="GpGain (%)",
                         title=f"{cc_label(bbr)} over CUBIC, {aqm}, {label}", transient=marks)  # fmt: skip
    figure.suptitle(f"{cc_label(bbr)}'s goodput gain over CUBIC behind each queue (red: {cc_label(bbr)} better) - {scenario}")
    return figure


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False) -> Path:
    out_dir = Path(out_dir)
    progress(f"{NAME}: Cao's grid behind {', '.join(AQMS)} on the {engine} engine{' (quick)' if quick else ''}")
    flows, info = run_study_sweep(sweep(quick), out_dir, engine=engine, jobs=jobs, include_invalid=include_invalid)
    by = tables(flows)
    pd.concat([t.assign(aqm=aqm, bbr=bbr) for (aqm, bbr), t in by.items()], ignore_index=True).to_csv(out_dir / "goodput.csv", index=False)
    scenario = f"{engine} engine, {flows['duration_s'].max():g} s flows"
    links = {bbr: save(gain_figure(by, bbr, scenario), out_dir, f"gain_{bbr}") for bbr in BBRS}
    summary_rows = []
    for (aqm, bbr), table in sorted(by.items(), key=lambda kv: (BBRS.index(kv[0][1]), AQMS.index(kv[0][0]))):
        shallow = table[table["buffer_bytes"] == SHALLOW_BYTES]
        deep = table[table["buffer_bytes"] == DEEP_BYTES]
        summary_rows.append([cc_label(bbr), aqm, pct(float((table["winner"] == "BBR").mean()), 0),
                             f"{fmt(shallow['gain_pct'].median())}%", f"{fmt(deep['gain_pct'].median())}%",
                             f"{fmt(table['loss_pct_bbr'].mean(), 2)}%", f"{fmt(table['loss_pct_cubic'].mean(), 2)}%",
                             fmt(table.get('sojourn_p50_ms_bbr', pd.Series(dtype=float)).median(), 1),
                             fmt(table.get('sojourn_p50_ms_cubic', pd.Series(dtype=float)).median(), 1)])  # fmt: skip
    text = "\n\n".join([
        f"# {NAME}: {DESCRIPTION} ({engine} engine)",
        __doc__.split("\n\n", 1)[1].strip(),
        run_facts(engine, quick, info),
        "## Findings\n\n" + markdown_table(["finding", "ours", "verdict"], findings(by)),
        f"A FIFO finding survives an AQM when it still holds in at least {SURVIVES:.0%} of the networks where it held "
        f"behind FIFO; a queue holds its delay when the median of the runs' median sojourn stays within {TARGET_FACTOR:g}x its target.",
        "## Per queue\n\n" + markdown_table(
            ["BBR", "queue", "networks BBR wins", "median GpGain 100 KB", "median GpGain 10 MB", "mean BBR loss", "mean CUBIC loss",
             "median sojourn p50 BBR (ms)", "median sojourn p50 CUBIC (ms)"], summary_rows),
        "## Goodput gain per queue\n\n" + "\n\n".join(links.values()),
    ])  # fmt: skip
    summary = out_dir / "summary.md"
    summary.write_text(text + "\n", encoding="utf-8")
    return summary
