"""Experiments A (100 flows of one CC), B (coexistence with CUBIC) and C (RTT unfairness)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap

from cclab.analysis import fairness, timeseries
from cclab.analysis.figures import TRANSIENT_LEGEND, TRANSIENT_MARK
from cclab.studies._manyflows import Grid, bdp_label, invalid_note, md_table, run_grid
from cclab.studies.kfoury2021.plan import FAIR_SHARE_MBPS, RATE_MBPS, Finding, Plan, buffer_bdp, label, link, result_cc, slug

# ---- A. 100 flows of one CC ---------------------------------------------------------------


def many_flows(out_dir: Path, plan: Plan, kw: dict) -> tuple[str, list[Finding]]:
    base = {"duration_s": plan.duration_s, "bottleneck": link(20, "1bdp"), "flows": [{"cc": "bbr", "count": 100}]}
    grid = run_grid(
        out_dir, "many-flows", base,
        {"flows.0.cc": list(plan.all_ccs), "bottleneck.buffer": [bdp_label(b) for b in plan.many_buffers],
         "bottleneck.loss": list(plan.many_losses)},
        columns={"flows.0.cc": "x_cc", "bottleneck.buffer": "x_buffer", "bottleneck.loss": "x_loss"}, **kw,
    )  # fmt: skip
    rows = []
    for (cc, buffer, loss), flows in grid.flows.groupby(["x_cc", "x_buffer", "x_loss"]):
        stats = fairness.summary_stats(flows["goodput_mbps"])
        rows.append({"cc": label(cc), "x_cc": cc, "buffer_bdp": buffer_bdp(buffer), "loss %": 100 * loss, **stats,
                     "utilization": float(flows["bottleneck_utilization"].iloc[0])})  # fmt: skip
    frame = pd.DataFrame(rows).sort_values(["cc", "loss %", "buffer_bdp"])
    for (cc, loss), sub in grid.flows.groupby(["x_cc", "x_loss"]):
        groups = {f"{buffer_bdp(b):g} BDP": g["goodput_mbps"].to_numpy() for b, g in sorted(sub.groupby("x_buffer"), key=lambda kv: buffer_bdp(kv[0]))}
        timeseries.cdf_figure(
            groups, xlabel="per-flow throughput (Mbit/s)", stem=out_dir / f"many_cdf_{slug(cc)}_loss{100 * loss:g}pct",
            title=f"100 {label(cc)} flows, 1 Gbit/s, 20 ms, {100 * loss:g}% loss", vlines={"fair share 9.57 Mbit/s": FAIR_SHARE_MBPS},
        )  # fmt: skip
    fmt = {"buffer_bdp": "g", "loss %": "g", "mean": ".2f", "std": ".2f", "min": ".2f", "max": ".2f", "jain": ".3f", "utilization": ".3f"}
    table = md_table(frame.to_dict("records"), ["cc", "loss %", "buffer_bdp", "mean", "std", "min", "max", "jain", "utilization"], fmt)
    lossy = frame[frame["loss %"] > 0]
    util = {cc: lossy[lossy.x_cc == cc]["utilization"] for cc in plan.all_ccs}
    robust = bool(util["bbr"].min() >= 0.95 and util["bbr"].min() > util["cubic"].max()) if not lossy.empty else None
    between = None
    if not lossy.empty:
        between = bool((util["bbr2"].mean() > util["cubic"].mean()) and (util["bbr2"].mean() <= util["bbr"].mean() + 0.01))
    loss_pct = 100 * max(plan.many_losses)
    ours = ", ".join(f"{label(cc)} {util[cc].mean():.0%}" for cc in plan.all_ccs) if not lossy.empty else "–"
    findings = [
        Finding("A. 100 flows, 1% loss", "BBRv1 keeps high throughput under loss", f"mean utilization {ours}", robust),
        Finding("A. 100 flows, 1% loss", "BBRv2 tolerates loss better than CUBIC, less than BBRv1", f"mean utilization {ours}", between),
    ]
    text = (
        "\n## A. 100 flows of one CC (throughput in Mbit/s per flow)\n\n"
        f"{table}\n{invalid_note(grid, kw['include_invalid'])}\n"
        f"- With {loss_pct:g}% loss the link's mean utilization is {ours}.\n"
        "- The slides' CDFs carry no numbers in the text; ours are in the table (the ideal is 9.57 Mbit/s per flow, "
        "1 Gbit/s x 1448/1514 / 100).\n"
        f"- Figures: `many_cdf_{{cc}}_loss{{{','.join(f'{100 * loss:g}' for loss in plan.many_losses)}}}pct.png|svg`.\n"
    )
    return text, findings


# ---- B. 1 CUBIC vs 1 BBR heatmaps -------------------------------------------------------------


def coexistence(out_dir: Path, plan: Plan, kw: dict) -> tuple[str, list[Finding]]:
    base = {"duration_s": plan.duration_s, "bottleneck": link(20, "1bdp"), "flows": [{"cc": "cubic"}, {"cc": "bbr"}]}
    grid = run_grid(
        out_dir, "coexistence", base,
        {"flows.1.cc": list(plan.bbrs), "bottleneck.buffer": [bdp_label(b) for b in plan.heat_buffers], "bottleneck.loss": list(plan.heat_losses)},
        columns={"flows.1.cc": "x_bbr", "bottleneck.buffer": "x_buffer", "bottleneck.loss": "x_loss"}, **kw,
    )  # fmt: skip
    rows = []
    for (bbr, buffer, loss), flows in grid.flows.groupby(["x_bbr", "x_buffer", "x_loss"]):
        shares = fairness.cc_shares(flows, rate_mbps=RATE_MBPS).set_index("cc")["link_share"]
        rows.append({"BBR": label(bbr), "x_bbr": bbr, "buffer_bdp": buffer_bdp(buffer), "loss %": 100 * loss,
                     "utilization": float(flows["bottleneck_utilization"].iloc[0]),
                     "CUBIC %": 100 * float(shares.get("cubic", 0)), "BBR %": 100 * float(shares.get(result_cc(bbr), 0)),
                     "Jain": fairness.jain_index(flows["goodput_mbps"]),
                     # Shares that were still moving at the end of the run (cclab.analysis.steady).
                     "transient": bool(flows["steady_converged"].eq(False).fillna(False).any())})  # fmt: skip
    frame = pd.DataFrame(rows).sort_values(["BBR", "buffer_bdp", "loss %"])
    frame["converged"] = np.where(frame["transient"], "no (transient)", "yes")
    for bbr in plan.bbrs:
        sub = frame[frame.x_bbr == bbr]
        if not sub.empty:
            _heatmap(sub, bbr, out_dir / f"coexistence_heatmap_{slug(bbr)}")
    fmt = {"buffer_bdp": "g", "loss %": "g", "utilization": ".3f", "CUBIC %": ".1f", "BBR %": ".1f", "Jain": ".3f"}
    # Distance from an even split, in share points, averaged over the cells.
    imbalance = {bbr: float((frame[frame.x_bbr == bbr]["BBR %"] - frame[frame.x_bbr == bbr]["CUBIC %"]).abs().mean()) for bbr in plan.bbrs}
    v1_wins = int(((frame.x_bbr == "bbr") & (frame["BBR %"] > frame["CUBIC %"])).sum())
    v1_cells = int((frame.x_bbr == "bbr").sum())
    ours = ", ".join(f"{label(b)} {imbalance[b]:.0f}" for b in plan.bbrs)
    findings = [
        Finding("B. 1 CUBIC vs 1 BBR", "BBRv1 is unfair to CUBIC", f"BBRv1 has the larger share in {v1_wins} of {v1_cells} cells", v1_wins > v1_cells / 2),
        Finding("B. 1 CUBIC vs 1 BBR", "BBRv2 coexists with CUBIC better than BBRv1",
                f"mean gap between the two shares (points): {ours}", imbalance["bbr2"] < imbalance["bbr"]),
    ]  # fmt: skip
    text = (
        "\n## B. 1 CUBIC vs 1 BBR: utilization and each CC's share of the link\n\n"
        f"{md_table(frame.to_dict('records'), ['BBR', 'buffer_bdp', 'loss %', 'utilization', 'CUBIC %', 'BBR %', 'Jain', 'converged'], fmt)}\n"
        f"{invalid_note(grid, kw['include_invalid'])}\n"
        f"- Mean gap between the BBR and CUBIC shares over the cells, in points: {ours}.\n"
        "- Figures: `coexistence_heatmap_{bbr,bbr2,bbr3}.png|svg` (as the slides: utilization on top, CUBIC bottom "
        "left, BBR bottom right, in %).\n"
    )
    return text, findings


def _heatmap(frame: pd.DataFrame, bbr: str, stem: Path) -> None:
    buffers = sorted(frame["buffer_bdp"].unique())
    losses = sorted(frame["loss %"].unique())
    grid = frame.set_index(["buffer_bdp", "loss %"])
    values = np.array([[grid.loc[(b, p), "BBR %"] for p in losses] for b in buffers])
    fig, ax = plt.subplots(figsize=(1.6 * len(losses) + 2, 1.2 * len(buffers) + 1.5))
    # CUBIC's colour at 0% BBR, white at an even split, BBR's colour at 100%.
    cmap = LinearSegmentedColormap.from_list("cubic_bbr", [timeseries.cc_color("cubic"), "#ffffff", timeseries.cc_color(bbr)])
    image = ax.imshow(values, cmap=cmap, vmin=0, vmax=100, origin="lower", aspect="auto", alpha=0.7)
    for i, b in enumerate(buffers):
        for j, p in enumerate(losses):
            cell = grid.loc[(b, p)]
            mark = TRANSIENT_MARK if cell["transient"] else ""
            ax.text(j, i + 0.15, f"{100 * cell['utilization']:.0f}{mark}", ha="center", va="center", fontsize=11, weight="bold")
            ax.text(j, i - 0.2, f"{cell['CUBIC %']:.0f}   {cell['BBR %']:.0f}", ha="center", va="center", fontsize=9)
    ax.set_xticks(range(len(losses)), [f"{p:g}%" for p in losses])
    ax.set_yticks(range(len(buffers)), [f"{b:g}" for b in buffers])
    ax.set_xlabel("random loss")
    ax.set_ylabel("buffer (BDP)")
    legend = f"; {TRANSIENT_LEGEND}" if frame["transient"].any() else ""
    ax.set_title(f"1 CUBIC vs 1 {label(bbr)}, 1 Gbit/s, 20 ms\nutilization % (top); CUBIC % | {label(bbr)} % (bottom){legend}", fontsize=10)
    fig.colorbar(image, ax=ax, label=f"{label(bbr)}'s share of the link (%)")
    timeseries.save(fig, stem)


# ---- C. RTT unfairness --------------------------------------------------------------------


def rtt_unfairness(out_dir: Path, plan: Plan, kw: dict) -> tuple[str, list[Finding]]:
    grids = []
    for cc in plan.all_ccs:
        base = {"duration_s": plan.duration_s, "bottleneck": link(10, "1bdp"), "flows": [{"cc": cc}, {"cc": cc, "extra_rtt_ms": 40}]}
        grids.append(run_grid(
            out_dir, f"rtt-unfairness-{slug(cc)}", base,
            {"bottleneck.buffer": [bdp_label(b) for b in plan.rtt_buffers], "bottleneck.aqm": ["fifo", "fq_codel"]},
            columns={"bottleneck.buffer": "x_buffer", "bottleneck.aqm": "x_aqm"}, **kw,
        ))  # fmt: skip
    grid = Grid(flows=pd.concat([g.flows for g in grids], ignore_index=True), invalid=pd.concat([g.invalid for g in grids]), out_dir=out_dir)
    rows = []
    for _, flows in grid.flows.groupby("run_key"):
        flows = flows.sort_values("flow_id")
        short, long_ = flows["goodput_mbps"].iloc[0], flows["goodput_mbps"].iloc[1]
        rows.append({"cc": label(flows["cc"].iloc[0]), "x_cc": flows["cc"].iloc[0], "aqm": flows["x_aqm"].iloc[0],
                     "buffer (BDP at 10 ms)": buffer_bdp(flows["x_buffer"].iloc[0]),
                     "10 ms Mbit/s": short, "50 ms Mbit/s": long_, "50 ms share": long_ / (short + long_),
                     "Jain": fairness.jain_index([short, long_]),
                     "retrans %": 100 * flows["retrans_segments"].sum() / max(flows["data_segments_sent"].sum(), 1)})  # fmt: skip
    frame = pd.DataFrame(rows).sort_values(["cc", "aqm", "buffer (BDP at 10 ms)"])
    fmt = {"buffer (BDP at 10 ms)": "g", "10 ms Mbit/s": ".1f", "50 ms Mbit/s": ".1f", "50 ms share": ".2f", "Jain": ".3f", "retrans %": ".2f"}
    jain = frame.groupby(["x_cc", "aqm"])["Jain"].mean()
    v1_tail = frame[(frame.x_cc == "bbr") & (frame.aqm == "fifo")]
    mitigates = {cc: bool(jain.get((cc, "fq_codel"), np.nan) > jain.get((cc, "fifo"), np.nan)) for cc in ("bbr", "bbr2")}
    ours = "; ".join(f"{label(cc)} {jain.get((result_cc(cc), 'fifo'), np.nan):.2f} -> {jain.get((result_cc(cc), 'fq_codel'), np.nan):.2f}" for cc in plan.all_ccs)
    retrans = frame.groupby(["x_cc"])["retrans %"].mean()
    findings = [
        Finding("C. 10 vs 50 ms", "BBRv1 is RTT-unfair with tail drop",
                f"BBRv1 tail-drop Jain {', '.join(f'{v:.2f}' for v in v1_tail['Jain'])}", bool((v1_tail["Jain"] < 0.9).any()) if not v1_tail.empty else None),
        Finding("C. 10 vs 50 ms", "FQ-CoDel mitigates the RTT unfairness (BBRv1 and BBRv2)",
                f"mean Jain tail drop -> FQ-CoDel: {ours}", mitigates["bbr"] and mitigates["bbr2"]),
        Finding("C. 10 vs 50 ms", "BBRv2 retransmits little (~0.1%)",
                f"mean retransmission rate BBRv2 {retrans.get('bbr2', np.nan):.2f}%, BBRv1 {retrans.get('bbr', np.nan):.2f}%",
                bool(retrans.get("bbr2", np.nan) < min(1.0, retrans.get("bbr", np.nan)))),
    ]  # fmt: skip
    columns = ["cc", "aqm", "buffer (BDP at 10 ms)", "10 ms Mbit/s", "50 ms Mbit/s", "50 ms share", "Jain", "retrans %"]
    text = (
        "\n## C. RTT unfairness: a 10 ms and a 50 ms flow, tail drop and FQ-CoDel\n\n"
        f"{md_table(frame.to_dict('records'), columns, fmt)}\n{invalid_note(grid, kw['include_invalid'])}\n"
        f"- Mean Jain's index, tail drop -> FQ-CoDel: {ours}.\n"
        "- Buffers are in BDP of the 10 ms path (1.25 MB per BDP) and are FQ-CoDel's hard limit too; the slides do not give theirs.\n"
    )
    return text, findings
