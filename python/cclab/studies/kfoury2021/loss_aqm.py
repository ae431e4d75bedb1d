"""Experiments G (one flow under random loss) and H (BBR and CUBIC mixes behind AQMs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from cclab.analysis import fairness, loss, queue, timeseries
from cclab.studies._manyflows import Grid, bdp_label, invalid_note, md_table, run_grid
from cclab.studies.kfoury2021.plan import RATE_MBPS, Finding, Plan, buffer_bdp, label, link, result_cc, slug

#: H's queue disciplines as the slides name them; "FQ-CoDel w/ ECN" is fq_codel (ECN on, tc's
#: default) with ECN-capable senders. RED is not in the slides: it is the classic AQM without
#: flow queues (tc's defaults, drops), the contrast that tells flow isolation from early drops.
AQM_VARIANTS = {
    "tail drop": ("fifo", False), "RED": ("red", False), "CAKE": ("cake", False),
    "FQ-CoDel": ("fq_codel", False), "FQ-CoDel w/ ECN": ("fq_codel", True),
}  # fmt: skip


def loss_sweep(out_dir: Path, plan: Plan, kw: dict) -> tuple[str, list[Finding]]:
    base = {"duration_s": plan.duration_s, "bottleneck": link(100, "1bdp"), "flows": [{"cc": "bbr"}]}
    grid = run_grid(
        out_dir, "loss-sweep", base,
        {"flows.0.cc": list(plan.all_ccs), "bottleneck.buffer": [bdp_label(b) for b in plan.loss_buffers], "bottleneck.loss": list(plan.loss_rates)},
        columns={"flows.0.cc": "x_cc", "bottleneck.buffer": "x_buffer", "bottleneck.loss": "x_loss"}, **kw,
    )  # fmt: skip
    frame = grid.flows.assign(
        cc_label=grid.flows["x_cc"].map(label), buffer_bdp=grid.flows["x_buffer"].map(buffer_bdp), loss_pct=100 * grid.flows["x_loss"],
        retrans_pct=100 * grid.flows["retrans_segments"] / grid.flows["data_segments_sent"].clip(lower=1),
    )
    cliffs = []
    for (cc, buffer), sub in frame.groupby(["x_cc", "buffer_bdp"]):
        cliff = loss.cliff_point(sub["x_loss"], sub["goodput_mbps"])
        cliffs.append({"cc": label(cc), "x_cc": cc, "buffer_bdp": buffer, "cliff loss %": 100 * cliff})
    cliff_frame = pd.DataFrame(cliffs).sort_values(["buffer_bdp", "cc"])
    for buffer, sub in frame[frame["x_loss"] > 0].groupby("buffer_bdp"):
        lines = {label(cc): g.groupby("loss_pct", as_index=False)[["goodput_mbps", "retrans_pct"]].mean() for cc, g in sub.groupby("x_cc")}
        colors = {label(cc): timeseries.cc_color(cc) for cc in plan.all_ccs}
        timeseries.xy_figure(lines, x="loss_pct", y="goodput_mbps", logx=True, xlabel="random loss (%, log scale)", ylabel="goodput (Mbit/s)",
                             title=f"One flow, 1 Gbit/s, 100 ms, {buffer:g} BDP", stem=out_dir / f"loss_goodput_{buffer:g}bdp", colors=colors)
        timeseries.xy_figure(lines, x="loss_pct", y="retrans_pct", logx=True, xlabel="random loss (%, log scale)", ylabel="retransmitted / sent (%)",
                             title=f"Retransmissions, one flow, 1 Gbit/s, 100 ms, {buffer:g} BDP", stem=out_dir / f"loss_retrans_{buffer:g}bdp", colors=colors)  # fmt: skip
    # A CC whose goodput never halves has its cliff beyond the sweep: order it last.
    reach = {row["x_cc"]: (math.inf if math.isnan(row["cliff loss %"]) else row["cliff loss %"]) for row in cliffs if row["buffer_bdp"] == max(plan.loss_buffers)}
    ordered = reach["cubic"] < reach["bbr2"] < reach["bbr"] if len(reach) == len(plan.all_ccs) else None
    heavy = frame[frame["x_loss"] >= 0.01].groupby("x_cc")["retrans_pct"].mean()
    agnostic = bool(heavy.get("bbr", np.nan) > heavy.get("bbr2", np.nan)) if not heavy.empty else None
    table = frame.groupby(["cc_label", "buffer_bdp", "loss_pct"], as_index=False)[["goodput_mbps", "retrans_pct"]].mean()
    fmt = {"buffer_bdp": "g", "loss_pct": "g", "goodput_mbps": ".1f", "retrans_pct": ".2f", "cliff loss %": ".2f"}
    show = ", ".join(f"{label(cc)} {reach[cc]:.2g}%" if math.isfinite(reach[cc]) else f"{label(cc)} beyond {100 * max(plan.loss_rates):g}%" for cc in reach)
    findings = [
        Finding("G. one flow under loss", "BBRv2 tolerates far more loss than CUBIC, less than BBRv1",
                f"loss at which goodput halves ({max(plan.loss_buffers):g} BDP): {show}", ordered),
        Finding("G. one flow under loss", "BBRv1 is loss-agnostic, so it retransmits more",
                f"mean retransmission rate at >= 1% loss: BBRv1 {heavy.get('bbr', np.nan):.1f}%, BBRv2 {heavy.get('bbr2', np.nan):.1f}%", agnostic),
    ]  # fmt: skip
    text = (
        "\n## G. Throughput and retransmissions vs random loss (one flow, 1 Gbit/s, 100 ms)\n\n"
        f"{md_table(table.to_dict('records'), ['cc_label', 'buffer_bdp', 'loss_pct', 'goodput_mbps', 'retrans_pct'], fmt)}\n\n"
        f"{md_table(cliff_frame.to_dict('records'), ['cc', 'buffer_bdp', 'cliff loss %'], fmt)}\n"
        f"{invalid_note(grid, kw['include_invalid'])}\n"
        "- Cliff: the loss at which goodput falls below half its loss-free value (`cclab.analysis.loss.cliff_point`); "
        "– where it never does within the sweep. BBRv2/v3 back off once a round loses more than 2% (their loss threshold).\n"
        "- Figures: `loss_goodput_{buffer}bdp.png|svg`, `loss_retrans_{buffer}bdp.png|svg`.\n"
    )
    return text, findings


def _mix(n_bbr: int, n_cubic: int, bbr: str, ecn: bool) -> list[dict]:
    return [{"cc": bbr, "count": n_bbr, "ecn": ecn}, {"cc": "cubic", "count": n_cubic, "ecn": ecn}]


def aqm_fairness(out_dir: Path, plan: Plan, kw: dict) -> tuple[str, list[Finding]]:
    grids = []
    # The mixes as a counts x counts grid less the pairs the slides do not run.
    counts = sorted({n for mix in plan.aqm_mixes for n in mix})
    unwanted = [{"reason": "not one of the slides' mixes", "when": {"flows.0.count": nb, "flows.1.count": nc}}
                for nb in counts for nc in counts if (nb, nc) not in plan.aqm_mixes]  # fmt: skip
    for name, (aqm, ecn) in AQM_VARIANTS.items():
        for bbr in plan.bbrs:
            base = {"duration_s": plan.duration_s, "bottleneck": link(20, bdp_label(plan.aqm_buffer_bdp), aqm=aqm), "flows": _mix(1, 1, bbr, ecn)}
            grid = run_grid(
                out_dir, f"aqm-{aqm}{'-ecn' if ecn else ''}-{slug(bbr)}", base,
                {"flows.0.count": counts, "flows.1.count": counts}, columns={"flows.0.count": "x_bbrs", "flows.1.count": "x_cubics"},
                skip=unwanted, **kw,
            )  # fmt: skip
            grid.flows["x_variant"] = name
            grid.flows["x_bbr"] = bbr
            grids.append(grid)
    grid = Grid(flows=pd.concat([g.flows for g in grids], ignore_index=True),
                invalid=pd.concat([g.invalid for g in grids]), out_dir=out_dir)  # fmt: skip
    rows = []
    for _, flows in grid.flows.groupby("run_key"):
        bbr = flows["x_bbr"].iloc[0]
        ours, cubic = flows[flows.cc == result_cc(bbr)], flows[flows.cc == "cubic"]
        shares = fairness.cc_shares(flows, rate_mbps=RATE_MBPS).set_index("cc")["share"]
        rows.append({
            "BBR": label(bbr), "x_bbr": bbr, "queue": flows["x_variant"].iloc[0], "mix": f"{len(ours)} {label(bbr)} + {len(cubic)} CUBIC",
            "n": len(flows), "Jain": fairness.jain_index(flows["goodput_mbps"]),
            "BBR Mbit/s per flow": ours["goodput_mbps"].mean(), "CUBIC Mbit/s per flow": cubic["goodput_mbps"].mean(),
            "BBR share": float(shares.get(result_cc(bbr), 0)), "utilization": float(flows["bottleneck_utilization"].iloc[0]),
            "sojourn p50 ms": flows["bottleneck_sojourn_p50_ms"].iloc[0] if "bottleneck_sojourn_p50_ms" in flows else np.nan,
            "retrans %": 100 * queue.aggregate_retransmission_rate(flows),
        })  # fmt: skip
    frame = pd.DataFrame(rows).sort_values(["BBR", "n", "queue"])
    for bbr in plan.bbrs:
        sub = frame[frame.x_bbr == bbr]
        timeseries.xy_figure(
            {name: sub[sub.queue == name] for name in AQM_VARIANTS}, x="n", y="Jain", logx=True,
            xlabel="flows in the mix (log scale)", ylabel="Jain's fairness index over all flows",
            title=f"{label(bbr)} and CUBIC mixes, 1 Gbit/s, 20 ms, {plan.aqm_buffer_bdp:g} BDP", stem=out_dir / f"aqm_fairness_{slug(bbr)}",
        )  # fmt: skip
    jain = frame[frame.x_bbr == "bbr2"].groupby("queue")["Jain"].mean()
    better = bool(jain.get("FQ-CoDel", np.nan) > jain.get("tail drop", np.nan) and jain.get("CAKE", np.nan) > jain.get("tail drop", np.nan)) if not jain.empty else None
    ours = ", ".join(f"{name} {jain.get(name, np.nan):.2f}" for name in AQM_VARIANTS)
    isolation = bool(jain.get("FQ-CoDel", np.nan) > jain.get("RED", np.nan)) if not jain.empty else None
    by_bbr = frame.groupby(["BBR", "queue"])["Jain"].mean()
    per_version = "; ".join(
        f"{label(bbr)}: " + ", ".join(f"{name} {by_bbr.get((label(bbr), name), np.nan):.2f}" for name in AQM_VARIANTS) for bbr in plan.bbrs
    )
    fmt = {"Jain": ".3f", "BBR Mbit/s per flow": ".1f", "CUBIC Mbit/s per flow": ".1f", "BBR share": ".2f", "utilization": ".3f",
           "sojourn p50 ms": ".1f", "retrans %": ".2f"}  # fmt: skip
    columns = ["BBR", "mix", "queue", "Jain", "BBR Mbit/s per flow", "CUBIC Mbit/s per flow", "BBR share", "utilization", "sojourn p50 ms", "retrans %"]
    findings = [
        Finding("H. AQMs and fairness", "Flow-queueing AQMs (FQ-CoDel, CAKE) make BBRv2 and CUBIC mixes fairer than tail drop",
                f"mean Jain over the BBRv2 mixes: {ours}", better),
        Finding("H. AQMs and fairness", "(not in the slides) RED drops early but keeps one queue for all flows, so it should not "
                "isolate BBRv2 from CUBIC as FQ-CoDel does", f"mean Jain over the BBRv2 mixes: RED {jain.get('RED', np.nan):.2f}, "
                f"FQ-CoDel {jain.get('FQ-CoDel', np.nan):.2f}", isolation),
    ]  # fmt: skip
    text = (
        f"\n## H. BBRv1/v2/v3 and CUBIC mixes behind tail drop, RED, CAKE, FQ-CoDel and FQ-CoDel with ECN (1 Gbit/s, 20 ms, {plan.aqm_buffer_bdp:g} BDP)\n\n"
        f"{md_table(frame.to_dict('records'), columns, fmt)}\n{invalid_note(grid, kw['include_invalid'])}\n"
        f"- Mean Jain's index over the mixes: {per_version}.\n"
        "- The slides do not give the buffer; we use the one above as every queue's hard limit. CAKE runs at its "
        "defaults (triple-isolate, 100 ms rtt) behind the bottleneck's shaper; RED at tc's defaults for this buffer "
        "(max = buffer/4, min = max/3, probability 2%), dropping.\n"
        "- Figures: `aqm_fairness_{bbr,bbr2,bbr3}.png|svg`.\n"
    )
    return text, findings
