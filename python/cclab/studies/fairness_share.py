"""1 BBR vs 1 CUBIC across buffer sizes: each CC's share (Cao et al., IMC 2019, §4.3, Figure 8).

1 Gbit/s, 20 ms, buffers 0.1 to 100 BDP. The seed's text of §4.3 is cut off after its
first sentence; what it keeps is the figure ("BBR and Cubic's bandwidth share under
1Gbps BW, 20ms RTT, and different buffer sizes") and, from §4.1, the mechanism: BBR
wins where the buffer is shallow (it ignores the losses that make CUBIC back off) and
CUBIC where it is deep (BBR caps its inflight at 2 BDP while CUBIC fills the buffer).
We test that trend and report where the shares cross.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from cclab.analysis import fairness, queue, timeseries
from cclab.analysis.steady import steady_label, warmup_s_of
from cclab.studies._common import user_cc
from cclab.studies._manyflows import bdp_label, invalid_note, md_table, run_grid, verdict

NAME = "fairness-share"
DESCRIPTION = "1 BBR vs 1 CUBIC at 1 Gbit/s, 20 ms: each CC's share across buffers of 0.1-100 BDP (Cao et al. §4.3)"

RATE_MBPS = 1000
RTT_MS = 20
WARMUP_S = 5.0
SHARE_WINDOW_S = 1.0


@dataclass(frozen=True)
class Plan:
    duration_s: float
    buffers_bdp: tuple[float, ...]


FULL = Plan(60, (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100))
QUICK = Plan(20, (0.1, 1, 10, 100))


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False,
        cc: str | None = None) -> Path:
    """`cc`: a congestion control of the user's (a C source) in BBR's place."""
    out_dir = Path(out_dir)
    plan = QUICK if quick else FULL
    # The spec names a source by its path, its results by its label (FILE.c:MAP).
    contender, key, name = "bbr", "bbr", "BBR"
    if cc is not None:
        contender, key = user_cc(cc)
        name = key
    base = {
        "duration_s": plan.duration_s,
        "bottleneck": {"rate_mbps": RATE_MBPS, "rtt_ms": RTT_MS},
        "flows": [{"cc": contender}, {"cc": "cubic"}],
        "output": {"warmup_s": WARMUP_S},  # goodputs, shares and queue after the start-up
    }
    grid = run_grid(
        out_dir, "bbr-vs-cubic" if cc is None else "yours-vs-cubic", base, {"bottleneck.buffer": [bdp_label(b) for b in plan.buffers_bdp]},
        columns={"bottleneck.buffer": "x_buffer"}, engine=engine, jobs=jobs, include_invalid=include_invalid,
    )  # fmt: skip
    rows = []
    for _, run_row in grid.runs().iterrows():
        result = grid.run(run_row["run_key"])
        shares = fairness.cc_shares(result.flows, rate_mbps=RATE_MBPS, duration_s=plan.duration_s - warmup_s_of(result)).set_index("cc")
        series = result.flow_series[result.flow_series["time_s"] > warmup_s_of(result)]
        over_time = fairness.cc_shares_over_time(series, result.flows.set_index("flow_id")["cc"].astype(str), SHARE_WINDOW_S)
        q = fairness.share_quartiles(over_time).set_index("cc")
        rows.append(
            {
                "buffer_bdp": float(str(run_row["x_buffer"]).removesuffix("bdp")),
                "BBR share": float(shares.loc[key, "share"]),
                "CUBIC share": float(shares.loc["cubic", "share"]),
                "BBR p25": float(q.loc[key, "p25"]),
                "BBR p75": float(q.loc[key, "p75"]),
                "BBR Mbit/s": float(shares.loc[key, "goodput_mbps"]),
                "CUBIC Mbit/s": float(shares.loc["cubic", "goodput_mbps"]),
                "utilization": result.bottleneck["utilization"],
                "queue p50 BDP": result.bottleneck["queue_p50_bytes"] / queue.bdp_bytes(RATE_MBPS * 1e6, RTT_MS / 1e3),
                "converged": steady_label(result.steady_state),
            }
        )
    frame = pd.DataFrame(rows).sort_values("buffer_bdp").reset_index(drop=True)
    frame["CUBIC p25"] = 1 - frame["BBR p75"]
    frame["CUBIC p75"] = 1 - frame["BBR p25"]
    timeseries.xy_figure(
        {name: frame.rename(columns={"BBR share": "y", "BBR p25": "lo", "BBR p75": "hi"}),
         "CUBIC": frame.rename(columns={"CUBIC share": "y", "CUBIC p25": "lo", "CUBIC p75": "hi"})},
        x="buffer_bdp", y="y", band=("lo", "hi"), logx=True, xlabel="buffer (BDP, log scale)",
        ylabel=f"share of goodput (after {WARMUP_S:g} s; band: quartiles of 1 s shares)",
        title=f"1 {name} vs 1 CUBIC, {RATE_MBPS / 1000:g} Gbit/s, {RTT_MS} ms", stem=out_dir / "share_vs_buffer",
        colors={name: timeseries.cc_color("bbr"), "CUBIC": timeseries.cc_color("cubic")}, hlines={"equal share": 0.5},
    )  # fmt: skip
    summary = out_dir / "summary.md"
    # The table's columns keep BBR's place; with a source in it, its own name heads them.
    shown = frame if cc is None else frame.rename(columns=lambda c: c.replace("BBR", name))
    summary.write_text(_summary(shown, plan, quick, engine, name) + invalid_note(grid, include_invalid), encoding="utf-8")
    return summary


def _crossing_bdp(frame: pd.DataFrame, name: str = "BBR") -> float | None:
    """Where BBR's (or `name`'s) share first falls below one half, interpolated on a log buffer axis."""
    x, y = np.log10(frame["buffer_bdp"].to_numpy()), frame[f"{name} share"].to_numpy()
    for i in range(1, len(x)):
        if y[i - 1] >= 0.5 > y[i]:
            return float(10 ** (x[i - 1] + (y[i - 1] - 0.5) * (x[i] - x[i - 1]) / (y[i - 1] - y[i])))
    return None


def _summary(frame: pd.DataFrame, plan: Plan, quick: bool, engine: str, name: str = "BBR") -> str:
    """`name`: the CC in BBR's place (its columns are named after it); the seed's claims stay BBR's."""
    fmt = {c: ".2f" for c in frame.columns if c != "converged"}
    fmt.update({"buffer_bdp": "g", f"{name} Mbit/s": ".1f", "CUBIC Mbit/s": ".1f", "utilization": ".3f"})
    columns = ["buffer_bdp", f"{name} share", "CUBIC share", f"{name} p25", f"{name} p75", f"{name} Mbit/s", "CUBIC Mbit/s", "utilization", "queue p50 BDP", "converged"]
    shallow, deep = frame.iloc[0], frame.iloc[-1]
    bbr_shallow = bool(shallow[f"{name} share"] > 0.5)
    cubic_deep = bool(deep["CUBIC share"] > 0.5)
    crossing = _crossing_bdp(frame, name)
    mode = "quick (a demo, not a measurement)" if quick else "full"
    heading = DESCRIPTION if name == "BBR" else (f"1 {name} (yours, in BBR's place) vs 1 CUBIC at 1 Gbit/s, 20 ms: each CC's share across "
                                                 "buffers; the seed's claims are BBR's, the verdicts say whether yours behaves alike")
    return (
        f"# {NAME}: {heading}\n\n"
        f"Mode: {mode}; engine {engine}; {plan.duration_s:g} s per run. Shares are of the goodput after a {WARMUP_S:g} s warm-up; "
        f"p25/p75 are quartiles of {name}'s share over {SHARE_WINDOW_S:g} s windows after a {WARMUP_S:g} s warm-up.\n\n"
        f"{md_table(frame.to_dict('records'), columns, fmt)}\n\n"
        "## Findings\n\n"
        f"- Seed (Figure 8, and §4.1's mechanism): BBR takes most of the link in shallow buffers. Ours at "
        f"{shallow['buffer_bdp']:g} BDP: {name} {shallow[f'{name} share']:.0%}, CUBIC {shallow['CUBIC share']:.0%}. "
        f"Verdict: {verdict(bbr_shallow)}.\n"
        f"- Seed: CUBIC takes most of the link in deep buffers. Ours at {deep['buffer_bdp']:g} BDP: CUBIC "
        f"{deep['CUBIC share']:.0%}, {name} {deep[f'{name} share']:.0%}. Verdict: {verdict(cubic_deep)}.\n"
        f"- The shares cross ({name} below one half) at about "
        f"{f'{crossing:.2g} BDP' if crossing is not None else 'no buffer tried'}. The seed's text that would "
        "give the paper's crossing point is cut off, so this number has nothing to be compared with.\n"
        "- Figure: `share_vs_buffer.png|svg`.\n"
    )
