"""BBR's loss "cliff point" (Cao et al., IMC 2019, section 4.2 and Figure 7).

One flow for 60 s on a 100 Mbit/s, 25 ms link with a 10 MB buffer and random loss from
0 to 50%, for BBR with PROBE_BW up-gains 1.1, 1.25 (Linux) and 1.5, CUBIC and Reno.
The paper predicts BBR's goodput falls off a cliff where gain x (1 - p) = 1, i.e. at
p = 1 - 1/gain (9.1%, 20%, 33.3%), and reports that BBR_1.5 falls earlier, near 20%,
because Linux BBR treats loss above 20% as a policer (long-term bandwidth sampling).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cclab.analysis.figures import line_figure
from cclab.analysis.loss import CLIFF_FRACTION, cliff_point, ideal_goodput_mbps, loss_pct, predicted_cliff
from cclab.studies._common import (
    fmt,
    markdown_table,
    one_flow_loss_sweep,
    pct,
    progress,
    run_facts,
    run_study_sweep,
    save,
    verdict,
)
from cclab.sweep import Sweep

NAME = "cliff"
DESCRIPTION = "BBR's goodput cliff under random loss for PROBE_BW gains 1.1/1.25/1.5, with CUBIC and Reno (Cao et al. Fig. 7)"

RATE_MBPS = 100.0
RTT_MS = 25.0
BUFFER = "10MB"
DURATION_S = 60.0
QUICK_DURATION_S = 10.0
GAINS = (1.1, 1.25, 1.5)
# 0 to 50%, with extra points around each predicted cliff (9.1%, 20%, 33.3%).
LOSSES = (0.0, 0.001, 0.01, 0.02, 0.05, 0.07, 0.08, 0.09, 0.1, 0.11, 0.12, 0.15, 0.18, 0.19, 0.2, 0.21, 0.22, 0.25, 0.3, 0.33, 0.35, 0.4, 0.5)
QUICK_LOSSES = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4)
# A cliff "agrees" with 1 - 1/gain when it lies within this many percentage points of it.
AGREEMENT_POINTS = 3.0


def variants(quick: bool = False) -> list[dict[str, Any]]:
    gains = (1.1, 1.25) if quick else GAINS
    entries: list[dict[str, Any]] = [{"cc": "bbr", "probe_bw_gain": gain} for gain in gains]
    return entries + [{"cc": "cubic"}, {"cc": "reno"}]


def sweep(quick: bool = False) -> Sweep:
    return one_flow_loss_sweep(
        NAME,
        duration_s=QUICK_DURATION_S if quick else DURATION_S,
        rate_mbps=RATE_MBPS,
        rtt_ms=RTT_MS,
        buffer=BUFFER,
        losses=QUICK_LOSSES if quick else LOSSES,
        flow_axis=("flows.0", variants(quick)),
    )


def variant_name(cc: str, gain: float | None) -> str:
    return f"BBR_{gain:g}" if cc == "bbr" else cc.upper()


def curves(flows: pd.DataFrame) -> pd.DataFrame:
    """Mean goodput and retransmissions per (variant, loss)."""
    named = flows.assign(
        variant=[variant_name(str(cc), gain) for cc, gain in zip(flows["cc"], flows["probe_bw_gain"], strict=True)],
        gain=pd.to_numeric(flows["probe_bw_gain"], errors="coerce"),
    )
    table = named.groupby(["variant", "loss"], as_index=False).agg(
        gain=("gain", "first"),
        goodput_mbps=("goodput_mbps", "mean"),
        retrans_segments=("retrans_segments", "mean"),
        data_segments_sent=("data_segments_sent", "mean"),
    )
    table["retrans_pct"] = loss_pct(table["retrans_segments"], table["data_segments_sent"])
    return table.sort_values(["variant", "loss"]).reset_index(drop=True)


def cliffs(table: pd.DataFrame) -> pd.DataFrame:
    """Per variant: loss-free goodput, detected cliff, predicted cliff, retransmission peak."""
    rows = []
    for variant, group in table.groupby("variant", sort=False):
        group = group.sort_values("loss")
        gain = group["gain"].iloc[0]
        peak = group.loc[group["retrans_segments"].idxmax()]
        rows.append(
            {
                "variant": variant,
                "gain": gain,
                "loss_free_goodput_mbps": float(group["goodput_mbps"].iloc[0]),
                "cliff_loss": cliff_point(group["loss"], group["goodput_mbps"]),
                "predicted_cliff_loss": predicted_cliff(gain) if np.isfinite(gain) else float("nan"),
                "peak_retrans_loss": float(peak["loss"]),
                "peak_retrans_segments": float(peak["retrans_segments"]),
            }
        )
    order = {name: i for i, name in enumerate([variant_name("bbr", g) for g in GAINS] + ["CUBIC", "RENO"])}
    return pd.DataFrame(rows).sort_values("variant", key=lambda s: s.map(order)).reset_index(drop=True)


def findings(cliff_table: pd.DataFrame) -> list[dict[str, Any]]:
    results = []
    for row in cliff_table.itertuples():
        if not np.isfinite(row.predicted_cliff_loss):
            continue
        gap = (row.cliff_loss - row.predicted_cliff_loss) * 100
        results.append(
            {
                "claim": f"{row.variant} falls off a cliff at 1 - 1/{row.gain:g} = {pct(row.predicted_cliff_loss)}",
                "ours": f"cliff at {pct(row.cliff_loss)} ({gap:+.1f} points)",
                "holds": bool(abs(gap) <= AGREEMENT_POINTS) if np.isfinite(row.cliff_loss) else False,
            }
        )
    bbr_15 = cliff_table[cliff_table["variant"] == "BBR_1.5"]
    if len(bbr_15) and np.isfinite(bbr_15["cliff_loss"].iloc[0]):
        cliff_15 = float(bbr_15["cliff_loss"].iloc[0])
        results.append(
            {
                "claim": "BBR_1.5 falls well before its predicted 33% (Linux's policer detection above ~20% loss)",
                "ours": f"cliff at {pct(cliff_15)}",
                "holds": bool(cliff_15 < predicted_cliff(1.5) - AGREEMENT_POINTS / 100),
            }
        )
    bbr_125 = cliff_table[cliff_table["variant"] == "BBR_1.25"]
    loss_based = cliff_table[cliff_table["variant"].isin(["CUBIC", "RENO"])]
    if len(bbr_125) and len(loss_based):
        worst = float(loss_based["cliff_loss"].max())
        results.append(
            {
                "claim": "Reno and CUBIC lose goodput at far lower loss than BBR",
                "ours": f"CUBIC/Reno cliffs at {', '.join(pct(v, 2) for v in loss_based['cliff_loss'])} vs BBR_1.25 at {pct(float(bbr_125['cliff_loss'].iloc[0]))}",
                "holds": bool(worst < float(bbr_125["cliff_loss"].iloc[0]) / 5),
            }
        )
    bbr = cliff_table[np.isfinite(cliff_table["predicted_cliff_loss"])]
    near = [abs(r.peak_retrans_loss - r.cliff_loss) <= 0.05 for r in bbr.itertuples() if np.isfinite(r.cliff_loss)]
    if near:
        results.append(
            {
                "claim": "BBR's retransmissions peak around its cliff point",
                "ours": "; ".join(f"{r.variant}: peak at {pct(r.peak_retrans_loss)}" for r in bbr.itertuples()),
                "holds": all(near),
            }
        )
    return results


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False) -> Path:
    out_dir = Path(out_dir)
    progress(f"{NAME}: goodput cliff under random loss on the {engine} engine{' (quick)' if quick else ''}")
    flows, info = run_study_sweep(sweep(quick), out_dir, engine=engine, jobs=jobs, include_invalid=include_invalid)
    table = curves(flows)
    table.to_csv(out_dir / "curves.csv", index=False)
    cliff_table = cliffs(table)
    cliff_table.to_csv(out_dir / "cliffs.csv", index=False)

    scenario = f"{RATE_MBPS:g} Mbit/s, {RTT_MS:g} ms, buffer {BUFFER}, {flows['duration_s'].max():g} s"
    series = {name: (group["loss"] * 100, group["goodput_mbps"]) for name, group in table.groupby("variant")}
    dense = np.linspace(0, 0.5, 100)
    series["ideal: rate x 1448/1514 x (1 - loss)"] = (dense * 100, ideal_goodput_mbps(RATE_MBPS, dense))
    styles = {"ideal: rate x 1448/1514 x (1 - loss)": {"marker": None, "linestyle": "--", "color": "black"}}
    predicted = {f"1 - 1/{g:g}": predicted_cliff(g) * 100 for g in sorted(cliff_table["gain"].dropna().unique())}
    goodput_link = save(
        line_figure(series, xlabel="random loss rate (%)", ylabel="goodput (Mbit/s)",
                    title=f"Goodput vs loss - {engine} engine - {scenario}", styles=styles, vlines=predicted),
        out_dir, "goodput_vs_loss",
    )
    retrans = {name: (group["loss"] * 100, group["retrans_segments"]) for name, group in table.groupby("variant")}
    retrans_link = save(
        line_figure(retrans, xlabel="random loss rate (%)", ylabel="retransmitted segments per flow",
                    title=f"Retransmissions vs loss - {engine} engine - {scenario}", vlines=predicted),
        out_dir, "retrans_vs_loss",
    )

    results = findings(cliff_table)
    cliff_rows = [
        [r.variant, fmt(r.loss_free_goodput_mbps), pct(r.cliff_loss), pct(r.predicted_cliff_loss) if np.isfinite(r.predicted_cliff_loss) else "-",
         f"{pct(r.peak_retrans_loss)} ({fmt(r.peak_retrans_segments, 0)})"]
        for r in cliff_table.itertuples()
    ]
    losses = sorted(table["loss"].unique())
    goodput_rows = [
        [f"{loss * 100:g}%"] + [fmt(float(table[(table["variant"] == v) & (table["loss"] == loss)]["goodput_mbps"].mean())) for v in cliff_table["variant"]]
        for loss in losses
    ]
    text = "\n\n".join(
        [
            f"# {NAME}: BBR's loss cliff ({engine} engine)",
            f"{DESCRIPTION}. {scenario}.",
            run_facts(engine, quick, info),
            f"**Cliff point** (our definition): the loss rate at which goodput first falls below "
            f"{CLIFF_FRACTION:.0%} of the variant's loss-free goodput, interpolated between the two "
            "measured loss rates around the crossing (on log loss; linearly from loss 0). "
            f"A cliff agrees with 1 - 1/gain when within {AGREEMENT_POINTS:g} percentage points.",
            "## Findings\n\n"
            + markdown_table(["claim (Cao et al. 4.2)", "ours", "verdict"], [[r["claim"], r["ours"], verdict(r["holds"])] for r in results]),
            "The paper itself found BBR_1.5's cliff well before 33%: Linux BBR takes a loss rate above "
            "20% in an interval as a sign of a policer and switches to its long-term bandwidth "
            "(tcp_bbr.c, bbr_lt_bw_sampling with bbr_lt_loss_thresh = 50/256), which our simulator "
            "implements as Linux does.",
            "Random loss happens before the bottleneck queue here, so a lost packet never used the "
            "bottleneck and BBR can run above the (1 - loss) line in the figure.",
            "## Cliffs\n\n"
            + markdown_table(["variant", "goodput at 0 loss (Mbit/s)", "cliff (ours)", "1 - 1/gain", "retransmissions peak at"], cliff_rows),
            "## Goodput (Mbit/s)\n\n" + markdown_table(["loss", *cliff_table["variant"]], goodput_rows),
            goodput_link,
            retrans_link,
        ]
    )
    summary = out_dir / "summary.md"
    summary.write_text(text + "\n", encoding="utf-8")
    return summary
