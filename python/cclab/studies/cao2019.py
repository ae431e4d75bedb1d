"""When to use BBR (Cao et al., IMC 2019, section 4.1), with the replication of Datta and
Fund (IMC 2023).

One flow for 60 s over 8 RTTs x 8 rates x 5 buffers, once with each of BBRv1 (the
paper's BBR), BBRv2, BBRv3 and CUBIC (1280 runs), then finite 10 MB and 100 MB flows of
BBRv1 and CUBIC over the same grid for flow completion times (LatDec). The study writes
goodput-gain, retransmission, utilization, LatDec and buffer/BDP heatmaps, the decision
tree, `summary.md` beside the paper's numbers (BBRv1), a section setting BBRv2 and BBRv3
beside it (Datta and Fund's buffer/BDP view with a column per version), and `model.json`,
the model `cclab recommend --study DIR [--bbr bbr3]` answers from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from cclab.analysis import decision_tree as dt
from cclab.analysis.figures import draw_heatmap, heatmap_figure, new_figure, pivot
from cclab.analysis.loss import loss_pct
from cclab.analysis.recommend import MODEL_FILE, model_from_study
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
    user_cc,
    verdict,
)
from cclab.sweep import Sweep

NAME = "cao2019"
DESCRIPTION = "When to use BBR (Cao et al., IMC 2019): 8 RTTs x 8 rates x 5 buffers, BBR vs CUBIC, decision tree, LatDec"

RTTS_MS = (5, 10, 25, 50, 75, 100, 150, 200)
RATES_MBPS = (10, 20, 50, 100, 250, 500, 750, 1000)
BUFFERS = ("100KB", "1MB", "10MB", "20MB", "50MB")
FLOW_SIZES = ("10MB", "100MB")
# "bbr" is BBRv1, the paper's; each later version gets its own paired table and tree.
BBR_VERSIONS = ("bbr", "bbr2", "bbr3")
DURATION_S = 60.0
QUICK_RTTS_MS = (10, 50, 200)
QUICK_RATES_MBPS = (10, 100, 500)
QUICK_BUFFERS = ("100KB", "10MB")
QUICK_DURATION_S = 10.0
# A finite flow runs until its last byte arrives; this only bounds a stuck one. 100 MB
# at 10 Mbit/s needs 84 s at best.
FINITE_MAX_DURATION_S = 600.0
SHALLOW_BYTES = 100_000
DEEP_BYTES = 10_000_000

# The paper's numbers (section 4.1.2), set beside ours in the summary.
PAPER = {
    "headline_cubic_mbps": 179.6,
    "headline_bbr_mbps": 386.0,
    "loss_pct_100KB": {"bbr": 10.1, "cubic": 0.9},
    "loss_pct_10MB": {"bbr": 0.8, "cubic": 1.3},
    "retrans_25ms_500M": {"bbr": (235798, 0), "cubic": (1649, 471)},
    "cubic_max_deep_gain_pct": 34.0,
    "cv_median": 0.819,
    "cv_mean": 0.813,
}
# Verdict thresholds: "grows with BDP" is a Spearman correlation of at least 0.5; "an
# order of magnitude" at least 10x; the tree "works" if its median CV accuracy is within
# 5 points of the paper's or above; "typically"/"almost all" mean > 50% / >= 80% of cells.
GROWS_RHO = 0.5
ORDER_OF_MAGNITUDE = 10.0
TREE_SLACK = 0.05
ALMOST_ALL = 0.8


def _base(duration_s: float) -> dict[str, Any]:
    return {
        "duration_s": duration_s,
        "bottleneck": {"rate_mbps": 100, "rtt_ms": 10, "buffer": "100KB"},
        "flows": [{"cc": "cubic"}],
    }


def _axes(quick: bool, ccs: tuple[str, ...] = (*BBR_VERSIONS, "cubic")) -> dict[str, list[Any]]:
    return {
        "bottleneck.rate_mbps": list(QUICK_RATES_MBPS if quick else RATES_MBPS),
        "bottleneck.rtt_ms": list(QUICK_RTTS_MS if quick else RTTS_MS),
        "bottleneck.buffer": list(QUICK_BUFFERS if quick else BUFFERS),
        "flows.0.cc": list(ccs),
    }


def goodput_sweep(quick: bool = False, contenders: tuple[str, ...] = BBR_VERSIONS) -> Sweep:
    return Sweep(
        name=f"{NAME}-goodput",
        base=_base(QUICK_DURATION_S if quick else DURATION_S),
        axes=_axes(quick, (*contenders, "cubic")),
        flow_sample_interval_ms=STUDY_FLOW_SAMPLE_INTERVAL_MS,
        queue_sample_interval_ms=STUDY_QUEUE_SAMPLE_INTERVAL_MS,
    )


def latency_sweep(quick: bool = False, contender: str = "bbr") -> Sweep:
    return Sweep(
        name=f"{NAME}-latency",
        base=_base(FINITE_MAX_DURATION_S),
        axes={**_axes(quick, (contender, "cubic")), "flows.0.size": list(FLOW_SIZES)},
        flow_sample_interval_ms=STUDY_FLOW_SAMPLE_INTERVAL_MS,
        queue_sample_interval_ms=STUDY_QUEUE_SAMPLE_INTERVAL_MS,
    )


def as_version(flows: pd.DataFrame, version: str) -> pd.DataFrame:
    """The rows of `version` and CUBIC, with `version` named "bbr": the paired table and the
    tree then compare that BBR with CUBIC exactly as they do BBRv1."""
    cc = flows["cc"].astype(str)
    return flows[cc.isin([version, "cubic"])].assign(cc=cc.replace({version: "bbr"}))


def goodput_table(flows: pd.DataFrame, version: str = "bbr") -> pd.DataFrame:
    """The paired table of `version` (BBRv1 by default) against CUBIC with each CC's loss percentage."""
    table = dt.paired_table(as_version(flows, version))
    for cc in ("bbr", "cubic"):
        table[f"loss_pct_{cc}"] = loss_pct(table[f"retrans_segments_{cc}"], table[f"data_segments_sent_{cc}"])
    return table


def latency_table(flows: pd.DataFrame) -> pd.DataFrame:
    """Per network and flow size: both CCs' completion times and LatDec (NaN where either
    flow did not complete within FINITE_MAX_DURATION_S)."""
    completed = flows.assign(fct_s=flows["fct_s"].where(flows["completed"].astype(bool)))
    parts = []
    for size, group in completed.groupby("size_bytes"):
        table = dt.paired_table(group, metrics=("fct_s", "goodput_mbps"))
        table["size_mb"] = size / 1e6
        table["latdec_pct"] = dt.latency_decrease_pct(table["fct_s_bbr"], table["fct_s_cubic"])
        parts.append(table)
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _cell(table: pd.DataFrame, rate: float, rtt: float, buffer_bytes: float, column: str) -> float:
    row = table[(table["rate_mbps"] == rate) & (table["rtt_ms"] == rtt) & (table["buffer_bytes"] == buffer_bytes)]
    return float(row[column].iloc[0]) if len(row) else float("nan")


def _mean(series: pd.Series) -> float:
    return float(series.mean()) if len(series) else float("nan")


def numbers(table: pd.DataFrame) -> dict[str, Any]:
    """Our values of every number the paper reports."""
    shallow = table[table["buffer_bytes"] == SHALLOW_BYTES]
    deep = table[table["buffer_bytes"] == DEEP_BYTES]
    cubic_over_bbr = dt.gain_pct(deep["goodput_mbps_cubic"], deep["goodput_mbps_bbr"])
    return {
        "headline_cubic_mbps": _cell(table, 500, 200, SHALLOW_BYTES, "goodput_mbps_cubic"),
        "headline_bbr_mbps": _cell(table, 500, 200, SHALLOW_BYTES, "goodput_mbps_bbr"),
        "loss_pct_100KB": {cc: _mean(shallow[f"loss_pct_{cc}"]) for cc in ("bbr", "cubic")},
        "loss_pct_10MB": {cc: _mean(deep[f"loss_pct_{cc}"]) for cc in ("bbr", "cubic")},
        "retrans_25ms_500M": {
            cc: (_cell(table, 500, 25, SHALLOW_BYTES, f"retrans_segments_{cc}"), _cell(table, 500, 25, DEEP_BYTES, f"retrans_segments_{cc}"))
            for cc in ("bbr", "cubic")
        },
        "cubic_max_deep_gain_pct": float(cubic_over_bbr.max()) if len(deep) else float("nan"),
    }


def findings(table: pd.DataFrame, fit: dt.TreeFit, latency: pd.DataFrame, ours: dict[str, Any]) -> list[dict[str, Any]]:
    shallow = table[table["buffer_bytes"] == SHALLOW_BYTES]
    deep = table[table["buffer_bytes"] == DEEP_BYTES]
    results: list[dict[str, Any]] = []

    rho = float(spearmanr(shallow["bdp_mb"], shallow["gain_pct"]).statistic) if len(shallow) > 2 else float("nan")
    median_bdp = shallow["bdp_mb"].median()
    low, high = shallow[shallow["bdp_mb"] <= median_bdp]["gain_pct"], shallow[shallow["bdp_mb"] > median_bdp]["gain_pct"]
    results.append({
        "claim": "In shallow buffers (100 KB) BBR's goodput gain grows with the BDP",
        "ours": f"Spearman rho(BDP, GpGain) = {rho:.2f}; median GpGain {low.median():.1f}% below the median BDP, {high.median():.1f}% above",
        "holds": bool(rho >= GROWS_RHO) if np.isfinite(rho) else None,
    })

    low_bdp = deep[deep["buffer_bdp"] > 1]
    cubic_wins = float((low_bdp["winner"] == "CUBIC").mean()) if len(low_bdp) else float("nan")
    cubic_edge = dt.gain_pct(low_bdp["goodput_mbps_cubic"], low_bdp["goodput_mbps_bbr"])
    results.append({
        "claim": "In deep buffers (10 MB) CUBIC has the edge where the BDP is low (buffer > BDP)",
        "ours": f"CUBIC wins {pct(cubic_wins, 0)} of those {len(low_bdp)} cells, by a median {cubic_edge.median():.1f}% "
        f"(max {ours['cubic_max_deep_gain_pct']:.1f}% over all 10 MB cells; paper: max 34%)",
        "holds": bool(cubic_wins > 0.5) if len(low_bdp) else None,
    })

    loss = ours["loss_pct_100KB"]
    ratio = loss["bbr"] / loss["cubic"] if loss["cubic"] > 0 else float("inf")
    with np.errstate(divide="ignore", invalid="ignore"):
        cell_ratio = (shallow["retrans_segments_bbr"] / shallow["retrans_segments_cubic"].replace(0, np.nan)).median()
    results.append({
        "claim": "At 100 KB BBR retransmits an order of magnitude more than CUBIC",
        "ours": f"mean loss {loss['bbr']:.1f}% vs {loss['cubic']:.2f}% ({ratio:.0f}x; paper 10.1% vs 0.9%, 11x); median per-cell ratio {cell_ratio:.0f}x",
        "holds": bool(ratio >= ORDER_OF_MAGNITUDE) if np.isfinite(loss["bbr"]) else None,
    })

    results.append({
        "claim": "A decision tree on rate, RTT and buffer predicts the better CC (paper: 81.9% median, 81.3% mean 5-fold CV)",
        "ours": f"{pct(fit.cv_median)} median, {pct(fit.cv_mean)} mean 5-fold CV; {pct(fit.test_accuracy)} on the 25% held out",
        "holds": bool(fit.cv_median >= PAPER["cv_median"] - TREE_SLACK),
    })

    if len(latency):
        big = latency[latency["size_mb"] == 100]
        small = latency[latency["size_mb"] == 10]
        big_shallow = big[big["buffer_bytes"] == SHALLOW_BYTES]["latdec_pct"].dropna()
        big_deep_low = big[(big["buffer_bytes"] == DEEP_BYTES) & (big["buffer_bdp"] > 1)]["latdec_pct"].dropna()
        small_all = small["latdec_pct"].dropna()
        results += [
            {
                "claim": "100 MB flows, 100 KB buffer: BBR typically completes sooner",
                "ours": f"LatDec > 0 in {pct(float((big_shallow > 0).mean()) if len(big_shallow) else float('nan'), 0)} of {len(big_shallow)} cells (median {big_shallow.median():.1f}%)",
                "holds": bool((big_shallow > 0).mean() > 0.5) if len(big_shallow) else None,
            },
            {
                "claim": "100 MB flows, 10 MB buffer: CUBIC completes sooner where the BDP is small (buffer > BDP)",
                "ours": f"LatDec < 0 in {pct(float((big_deep_low < 0).mean()) if len(big_deep_low) else float('nan'), 0)} of {len(big_deep_low)} cells (median {big_deep_low.median():.1f}%)",
                "holds": bool((big_deep_low < 0).mean() > 0.5) if len(big_deep_low) else None,
            },
            {
                "claim": "10 MB flows: BBR completes sooner in almost all cases",
                "ours": f"LatDec > 0 in {pct(float((small_all > 0).mean()) if len(small_all) else float('nan'), 0)} of {len(small_all)} cells, all buffers (median {small_all.median():.1f}%)",
                "holds": bool((small_all > 0).mean() >= ALMOST_ALL) if len(small_all) else None,
            },
        ]
    return results


# ---- figures ------------------------------------------------------------------------------

AXES = {"x": "rtt_ms", "y": "rate_mbps", "xlabel": "base RTT (ms)", "ylabel": "bottleneck rate (Mbit/s)"}
# Buffer/BDP bins (Datta and Fund, Fig. 6): decades and half-decades around 1 BDP.
RATIO_EDGES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0, np.inf)


def _panels(rows: int, cols: int) -> tuple[Any, list[Any]]:
    figure = new_figure(7.5 * cols, 5.5 * rows)
    return figure, [figure.add_subplot(rows, cols, i + 1) for i in range(rows * cols)]


def _grid(table: pd.DataFrame, value: str) -> pd.DataFrame:
    return pivot(table, x=AXES["x"], y=AXES["y"], value=value)


def gain_figure(table: pd.DataFrame, buffer_bytes: int, label: str, scenario: str) -> Any:
    return heatmap_figure(
        table[table["buffer_bytes"] == buffer_bytes], x=AXES["x"], y=AXES["y"], value="gain_pct", kind="diverging", transient="transient",
        xlabel=AXES["xlabel"], ylabel=AXES["ylabel"], colorbar_label="GpGain = (BBR - CUBIC) / CUBIC (%)",
        title=f"BBR's goodput gain over CUBIC (red: BBR better) - buffer {label} - {scenario}",
    )


def retrans_figure(table: pd.DataFrame, buffer_bytes: int, label: str, scenario: str) -> Any:
    rows = table[table["buffer_bytes"] == buffer_bytes]
    values = pd.concat([rows["retrans_segments_bbr"], rows["retrans_segments_cubic"]])
    positive = values[values > 0]
    limits = (float(positive.min()), float(positive.max())) if len(positive) else None
    figure, axes = _panels(1, 2)
    for ax, cc in zip(axes, ("bbr", "cubic"), strict=True):
        draw_heatmap(ax, _grid(rows, f"retrans_segments_{cc}"), kind="log", limits=limits,
                     xlabel=AXES["xlabel"], ylabel=AXES["ylabel"], colorbar_label="retransmitted segments per flow (log)",
                     title=f"{cc.upper()} retransmissions - buffer {label} - {scenario}")
    return figure


def utilization_figure(table: pd.DataFrame, scenario: str) -> Any:
    figure, axes = _panels(2, 2)
    for ax, (buffer_bytes, label, cc) in zip(axes, [(b, lab, cc) for b, lab in ((SHALLOW_BYTES, "100 KB"), (DEEP_BYTES, "10 MB")) for cc in ("bbr", "cubic")], strict=True):
        rows = table[table["buffer_bytes"] == buffer_bytes].assign(util=lambda t: t[f"bottleneck_utilization_{cc}"] * 100)
        draw_heatmap(ax, _grid(rows, "util"), kind="sequential", limits=(0, 100), xlabel=AXES["xlabel"], ylabel=AXES["ylabel"],
                     colorbar_label="link utilization (% of time busy)", title=f"{cc.upper()} link utilization - buffer {label} - {scenario}")
    return figure


def latdec_figure(latency: pd.DataFrame, scenario: str) -> Any:
    figure, axes = _panels(2, 2)
    cases = [(size, b, lab) for size in (10.0, 100.0) for b, lab in ((SHALLOW_BYTES, "100 KB"), (DEEP_BYTES, "10 MB"))]
    for ax, (size, buffer_bytes, label) in zip(axes, cases, strict=True):
        rows = latency[(latency["size_mb"] == size) & (latency["buffer_bytes"] == buffer_bytes)]
        if rows.empty:
            ax.set_axis_off()
            continue
        draw_heatmap(ax, _grid(rows, "latdec_pct"), kind="diverging", xlabel=AXES["xlabel"], ylabel=AXES["ylabel"],
                     colorbar_label="LatDec = (CUBIC - BBR) / CUBIC completion time (%)",
                     title=f"LatDec, {size:g} MB flows (red: BBR sooner) - buffer {label} - {scenario}")
    return figure


def ratio_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Medians per buffer/BDP bin of each CC's utilization and loss and each BBR version's
    GpGain over CUBIC (`tables`: version -> its paired table; CUBIC's from BBRv1's)."""
    labels = [f"{lo:g}-{hi:g}" if np.isfinite(hi) else f">{lo:g}" for lo, hi in zip(RATIO_EDGES[:-1], RATIO_EDGES[1:], strict=True)]
    keys = list(dt.NETWORK_KEYS)
    base = next(iter(tables.values()))  # CUBIC's columns: the same networks in every table
    merged = base[[*keys, "buffer_bdp", "bottleneck_utilization_cubic", "loss_pct_cubic"]].rename(
        columns={"bottleneck_utilization_cubic": "util_cubic", "loss_pct_cubic": "loss_cubic"})
    for version, table in tables.items():
        part = table[[*keys, "bottleneck_utilization_bbr", "loss_pct_bbr", "gain_pct"]].rename(
            columns={"bottleneck_utilization_bbr": f"util_{version}", "loss_pct_bbr": f"loss_{version}", "gain_pct": f"gain_{version}"})
        merged = merged.merge(part, on=keys, how="left")
    binned = merged.assign(ratio_bin=pd.cut(merged["buffer_bdp"], bins=list(RATIO_EDGES), labels=labels, right=False))
    rows = []
    for name, group in binned.groupby("ratio_bin", observed=True):
        row: dict[str, Any] = {"ratio_bin": str(name), "cells": len(group)}
        for cc in (*tables, "cubic"):
            row[f"util_{cc}"] = group[f"util_{cc}"].median() * 100
            row[f"loss_{cc}"] = group[f"loss_{cc}"].median()
        for version in tables:
            row[f"gain_{version}"] = group[f"gain_{version}"].median()
        rows.append(row)
    return pd.DataFrame(rows)


def ratio_figure(ratios: pd.DataFrame, versions: tuple[str, ...], scenario: str) -> Any:
    figure = new_figure(11.0, 11.0)
    axes = [figure.add_subplot(3, 1, i + 1) for i in range(3)]
    columns = list(ratios["ratio_bin"])
    ccs = (*versions, "cubic")
    specs = [
        ([f"util_{cc}" for cc in ccs], [cc_label(cc) for cc in ccs], "sequential", (0, 100), "median link utilization (%)"),
        ([f"loss_{cc}" for cc in ccs], [cc_label(cc) for cc in ccs], "log", None, "median retransmissions / segments sent (%, log)"),
        ([f"gain_{v}" for v in versions], [f"{cc_label(v)} over CUBIC" for v in versions], "diverging", None, "median GpGain (BBR - CUBIC)/CUBIC (%)"),
    ]
    for ax, (cols, names, kind, limits, label) in zip(axes, specs, strict=True):
        grid = pd.DataFrame([ratios[c].to_numpy() for c in cols], index=names, columns=columns)
        draw_heatmap(ax, grid, kind=kind, limits=limits, xlabel="buffer / BDP", ylabel="", colorbar_label=label,
                     title=f"{label} by buffer/BDP, all buffers - {scenario}",
                     cell_format=lambda v: "n/a" if not np.isfinite(v) else (f"{v:.2f}" if abs(v) < 1 else f"{v:.0f}"))
        ax.set_yticks(range(len(names)), names)
        ax.set_xticks(range(len(columns)), columns)
    return figure


def version_rows(tables: dict[str, pd.DataFrame], fits: dict[str, dict[str, dt.TreeFit]]) -> list[list[str]]:
    """One summary row per BBR version against CUBIC over the same grid."""
    rows = []
    for version, table in tables.items():
        shallow = table[table["buffer_bytes"] == SHALLOW_BYTES]
        deep = table[table["buffer_bytes"] == DEEP_BYTES]
        best = max(fits[version].values(), key=lambda fit: fit.cv_mean)
        rows.append([
            cc_label(version), pct(float((table["winner"] == "BBR").mean()), 0),
            f"{fmt(shallow['gain_pct'].median())}%", f"{fmt(deep['gain_pct'].median())}%",
            f"{fmt(_mean(shallow['loss_pct_bbr']), 2)}%", f"{fmt(_mean(deep['loss_pct_bbr']), 2)}%", pct(best.cv_mean),
        ])
    return rows


# ---- the study ----------------------------------------------------------------------------


def _paper_rows(ours: dict[str, Any], contender: str = "BBR") -> list[list[str]]:
    """The paper's BBR beside ours (`contender`: the CC in BBR's place)."""
    p = PAPER
    shown = {"bbr": contender, "cubic": "CUBIC"}
    rows = [
        ["goodput at 500 Mbit/s, 200 ms, 100 KB: CUBIC", f"{p['headline_cubic_mbps']} Mbit/s", f"{fmt(ours['headline_cubic_mbps'])} Mbit/s"],
        [f"goodput at 500 Mbit/s, 200 ms, 100 KB: {contender}", f"{p['headline_bbr_mbps']} Mbit/s", f"{fmt(ours['headline_bbr_mbps'])} Mbit/s"],
    ]
    for key, label in (("loss_pct_100KB", "100 KB"), ("loss_pct_10MB", "10 MB")):
        for cc in ("bbr", "cubic"):
            rows.append([f"mean loss (retransmissions / segments sent), {label}: {shown[cc]}", f"{p[key][cc]}%", f"{fmt(ours[key][cc], 2)}%"])
    for cc in ("bbr", "cubic"):
        before, after = ours["retrans_25ms_500M"][cc]
        paper_before, paper_after = p["retrans_25ms_500M"][cc]
        rows.append([f"retransmissions at 25 ms, 500 Mbit/s, 100 KB -> 10 MB: {shown[cc]}", f"{paper_before:,} -> {paper_after:,}", f"{fmt(before, 0)} -> {fmt(after, 0)}"])
    rows.append(["CUBIC's largest goodput gain over BBR at 10 MB", f"{p['cubic_max_deep_gain_pct']:g}%", f"{fmt(ours['cubic_max_deep_gain_pct'])}%"])
    return rows


def seeds_paragraph(flows: pd.DataFrame, version: str) -> str:
    """How far the tree's accuracy holds from one seed's networks to another's (flows of the
    goodput grid, a `repetition` per seed), or how to find out with one seed."""
    across = dt.accuracy_across_seeds({int(r): goodput_table(g, version) for r, g in flows.groupby("repetition")}) if "repetition" in flows.columns else None
    if not across:
        return "One seed per network: run with `--seeds 3` or more to see how far the tree's accuracy holds across seeds."
    return (
        f"Across {across['seeds']} seeds: a tree fitted on one seed's networks scores {pct(across['own_seed_accuracy'])} on that "
        f"seed and {pct(across['other_seed_accuracy_median'])} on another's (median; {pct(across['other_seed_accuracy_min'])}-"
        f"{pct(across['other_seed_accuracy_max'])}); {pct(across['label_agreement'])} of the {across['networks']} networks have the "
        "same winner in every seed; on the others no one answer is right for every seed."
    )


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False,
        cc: str | None = None) -> Path:
    """`cc`: a congestion control of the user's (a C source, `cclab reproduce cao2019 --cc FILE`)
    in BBR's place: the grid, tables, trees, verdicts and model are then "that CC or CUBIC"."""
    out_dir = Path(out_dir)
    # The sweeps name a user's source by its path, its results by its label (FILE.c:MAP).
    if cc is None:
        contenders, primary = BBR_VERSIONS, "bbr"
    else:
        spec_cc, primary = user_cc(cc)
        contenders = (spec_cc,)
    name = "BBR" if cc is None else primary
    progress(f"{NAME}: the {name}-vs-CUBIC grid on the {engine} engine{' (quick)' if quick else ''}")
    flows, info = run_study_sweep(goodput_sweep(quick, contenders), out_dir, engine=engine, jobs=jobs, include_invalid=include_invalid)
    progress(f"{NAME}: finite 10 MB and 100 MB flows over the same grid (LatDec)")
    finite, finite_info = run_study_sweep(latency_sweep(quick, contenders[0]), out_dir, engine=engine, jobs=jobs, include_invalid=include_invalid)
    versions = contenders if cc is None else (primary,)

    table = goodput_table(flows, primary)
    table.to_csv(out_dir / "goodput.csv", index=False)
    latency = latency_table(as_version(finite, primary))
    latency.to_csv(out_dir / "latency.csv", index=False)
    ours = numbers(table)

    paper_fit = dt.fit_tree(table, dt.PAPER_FEATURES)
    extended_fit = dt.fit_tree(table, dt.EXTENDED_FEATURES)
    duration = flows["duration_s"].max()
    scenario = f"{engine} engine, {duration:g} s flows"

    links = {
        "gain_100KB": save(gain_figure(table, SHALLOW_BYTES, "100 KB", scenario), out_dir, "gain_100KB"),
        "gain_10MB": save(gain_figure(table, DEEP_BYTES, "10 MB", scenario), out_dir, "gain_10MB"),
        "retrans_100KB": save(retrans_figure(table, SHALLOW_BYTES, "100 KB", scenario), out_dir, "retrans_100KB"),
        "utilization": save(utilization_figure(table, scenario), out_dir, "utilization"),
        "tree": save(dt.tree_figure(paper_fit, f"Decision tree: BBR (orange) or CUBIC (blue) on rate, RTT, buffer - 75% training split - {scenario}"), out_dir, "decision_tree"),
        "tree_extended": save(dt.tree_figure(extended_fit, f"Decision tree with BDP and buffer/BDP features - 75% training split - {scenario}"), out_dir, "decision_tree_extended"),
        "latdec": save(latdec_figure(latency, f"{engine} engine"), out_dir, "latdec") if len(latency) else "",
    }
    tables = {primary: table}
    fits = {primary: {"paper": paper_fit, "extended": extended_fit}}
    for version in versions[1:]:
        tables[version] = goodput_table(flows, version)
        tables[version].to_csv(out_dir / f"goodput_{version}.csv", index=False)
        fits[version] = {"paper": dt.fit_tree(tables[version], dt.PAPER_FEATURES), "extended": dt.fit_tree(tables[version], dt.EXTENDED_FEATURES)}
        links[f"gain_100KB_{version}"] = save(
            gain_figure(tables[version], SHALLOW_BYTES, f"100 KB ({cc_label(version)})", scenario), out_dir, f"gain_100KB_{version}")
    ratios = ratio_table(tables)
    links["ratio"] = save(ratio_figure(ratios, versions, scenario), out_dir, "buffer_bdp")

    def version_model(version: str) -> dict[str, Any]:
        return model_from_study(tables[version], engine=engine, quick=quick, duration_s=float(duration), fits=fits[version])

    model = version_model(primary)
    # `cclab recommend --bbr bbr3` answers from these: the same grid, that version against CUBIC.
    model["versions"] = {version: version_model(version) for version in versions[1:]}
    if cc is not None:
        model["contender"] = name  # what `cclab recommend` calls the side that is not CUBIC
    (out_dir / MODEL_FILE).write_text(json.dumps(model, indent=1, allow_nan=False) + "\n", encoding="utf-8")

    seeds_line = "\n\n" + seeds_paragraph(flows, primary)
    results = findings(table, paper_fit, latency, ours)
    incomplete = int(finite["completed"].eq(False).sum()) if len(finite) else 0
    parts = [
        f"# {NAME}: when to use {name} ({engine} engine)",
        DESCRIPTION + "." + ("" if cc is None else f" Here the contender is {name}, a congestion control of yours, in BBR's place: "
                             "the paper's numbers and claims are BBR's, the verdicts say whether yours behaves alike."),
        run_facts(engine, quick, info) + f" Finite flows: {finite_info['runs']} runs, {finite_info['wall_s']:.0f} s"
        + (f", {incomplete} did not complete within {FINITE_MAX_DURATION_S:g} s (left out of LatDec)" if incomplete else "") + ".",
        "## The paper's numbers beside ours\n\n" + markdown_table(["quantity", "paper", "ours"], _paper_rows(ours, name)),
        "## Findings\n\n" + markdown_table(["claim", "ours", "verdict"], [[r["claim"], r["ours"], verdict(r["holds"])] for r in results]),
        f"Verdict thresholds: \"grows\" is a Spearman correlation >= {GROWS_RHO}; \"an order of magnitude\" >= {ORDER_OF_MAGNITUDE:g}x; "
        f"the tree holds if its median CV accuracy is at least {pct(PAPER['cv_median'] - TREE_SLACK)}; \"typically\" is more than half "
        f"of the cells and \"almost all\" at least {ALMOST_ALL:.0%}.",
        "## Decision tree\n\n"
        + markdown_table(
            ["features", "5-fold CV median", "5-fold CV mean", "held-out 25%", "depth", "leaves"],
            [
                [", ".join(dt.FEATURE_LABELS[f] for f in fit.features), pct(fit.cv_median), pct(fit.cv_mean), pct(fit.test_accuracy), fit.model.get_depth(), fit.model.get_n_leaves()]
                for fit in (paper_fit, extended_fit)
            ],
        )
        + f"\n\nPaper: 81.9% median, 81.3% mean. Label: the CC with the higher mean goodput (ties go to CUBIC). "
        f"Trees are limited to depth {dt.MAX_DEPTH} and {dt.MIN_SAMPLES_LEAF} samples per leaf so they stay readable. "
        "The extended features add the BDP and buffer/BDP, the quantities the paper uses to explain its own tree; "
        f"`cclab recommend` uses the {model['tree_choice']} tree (the higher mean CV accuracy), refitted on every network."
        + seeds_line,
        links["tree"],
        links["tree_extended"],
        "## Goodput gain\n\n" + links["gain_100KB"] + "\n\n" + links["gain_10MB"],
        "## Retransmissions at 100 KB\n\n" + links["retrans_100KB"],
        "## Link utilization\n\n" + links["utilization"],
        "## Flow completion time (LatDec)\n\n"
        + ("Finite 10 MB and 100 MB flows over the same grid; completion time is from the flow's start to its last byte delivered.\n\n" + links["latdec"] if links["latdec"] else "No finite-flow runs."),
        "" if cc is not None else "## BBRv2 and BBRv3 beside BBRv1\n\n"
        "The paper compares BBRv1 with CUBIC; the same grid with google/bbr's v2alpha and v3, each against CUBIC "
        "(GpGain = (that BBR - CUBIC) / CUBIC; its tree built the same way).\n\n"
        + markdown_table(
            ["BBR", "networks it beats CUBIC", "median GpGain 100 KB", "median GpGain 10 MB", "mean loss 100 KB", "mean loss 10 MB", "tree CV mean"],
            version_rows(tables, fits),
        )
        + "\n\n" + "\n\n".join(links[f"gain_100KB_{v}"] for v in BBR_VERSIONS[1:]),
        "## Buffer as a ratio of BDP (all buffers)\n\n"
        + markdown_table(
            ["buffer/BDP", "cells", *(f"{cc_label(c)} util %" for c in (*versions, "cubic")),
             *(f"{cc_label(c)} loss %" for c in (*versions, "cubic")), *(f"{cc_label(v)} GpGain %" for v in versions)],
            [[r["ratio_bin"], r["cells"], *(fmt(r[f"util_{c}"]) for c in (*versions, "cubic")),
              *(fmt(r[f"loss_{c}"], 2) for c in (*versions, "cubic")), *(fmt(r[f"gain_{v}"]) for v in versions)]
             for r in ratios.to_dict("records")],
        )
        + "\n\n" + links["ratio"],
    ]
    text = "\n\n".join(part for part in parts if part)
    summary = out_dir / "summary.md"
    summary.write_text(text + "\n", encoding="utf-8")
    return summary
