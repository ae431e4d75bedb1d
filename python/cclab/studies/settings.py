"""The host settings that change the answer (Datta & Fund's replication of Cao et al., seed 004,
section 4): at the seeds' headline cells, for BBRv1, BBRv3 and CUBIC, one setting at a time from
cclab's defaults, and what each does to goodput, retransmissions and the BBR-vs-CUBIC winner.

The settings are those cclab can set today (`[host]` and a flow's socket buffers); MTU,
offloads, the sender's qdisc, the delay emulator's limit and SACK are not settings yet and are
named as such in the summary.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from cclab.analysis.timeseries import cc_label
from cclab.studies._common import fmt, markdown_table, progress, run_facts, save, verdict
from cclab.studies._manyflows import run_grid
from cclab.units import DEFAULT_MTU_BYTES, frame_bytes, mss_bytes

NAME = "settings"
DESCRIPTION = "one host setting at a time (socket buffers, RACK, the senders' NIC and qdisc) at the seeds' headline cells, for BBRv1, BBRv3 and CUBIC"

CCS = ("bbr", "bbr3", "cubic")
DURATION_S = 60.0
QUICK_DURATION_S = 10.0
WARMUP_S = 2.0
#: Cao et al.'s CUBIC at 500 Mbit/s, 200 ms, 100 KB (their Table/Figure of the headline cell).
PAPER_CUBIC_HEADLINE_MBPS = 179.6
#: Datta & Fund: BBR's utilization at 1 Gbit/s x 200 ms under iperf3's default socket buffer
#: (and netem's default limit) against their setting that never limits.
DATTA_FUND_DEFAULT_UTILIZATION = 0.12
DATTA_FUND_SET_UTILIZATION = 0.84
#: A setting "holds a flow down" below this share of the link, and leaves it free above this.
HELD_DOWN_UTILIZATION = 0.25
FREE_UTILIZATION = 0.75


@dataclass(frozen=True)
class Cell:
    name: str
    rate_mbps: float
    rtt_ms: float
    buffer: str

    def bottleneck(self) -> dict[str, Any]:
        return {"rate_mbps": self.rate_mbps, "rtt_ms": self.rtt_ms, "buffer": self.buffer}


#: The headline cells: the highest BDP, Cao et al.'s most quoted cell, a low-BDP deep buffer.
CELLS = (
    Cell("1 Gbit/s, 200 ms, 1 BDP", 1000, 200, "1bdp"),
    Cell("500 Mbit/s, 200 ms, 100 KB", 500, 200, "100KB"),
    Cell("10 Mbit/s, 10 ms, 10 MB", 10, 10, "10MB"),
)


@dataclass(frozen=True)
class Setting:
    name: str
    what: str
    host: dict[str, Any] | None = None
    #: iperf3 -w for both of the flow's buffers
    window: str | None = None


SETTINGS = (
    Setting("default", "cclab's defaults: buffers that never limit, RACK, a 10 Gbit/s NIC"),
    Setting("stock tcp_rmem", "Linux's stock receive-buffer cap, tcp_rmem[2] = 6 MiB", host={"tcp_rmem_max": "6MiB"}),
    Setting("stock tcp_wmem", "Linux's stock send-buffer cap, tcp_wmem[2] = 4 MiB", host={"tcp_wmem_max": "4MiB"}),
    Setting("iperf3 -w 100M", "SO_SNDBUF/SO_RCVBUF of 100 MB, clamped to net.core.wmem_max/rmem_max (4 MiB here)", window="100MB"),
    Setting("RACK off", "net.ipv4.tcp_recovery = 0: the duplicate-ACK scoreboard marks losses", host={"loss_recovery": "classic"}),
    Setting("1 Gbit/s NIC", "the senders' NIC at 1 Gbit/s, as on the seeds' testbeds", host={"access_rate_mbps": 1000}),
    Setting("fq at the sender", "sch_fq on the senders' interface: every CC paced at its pacing rate", host={"sender_qdisc": "fq"}),
    Setting("jumbo frames", "a 9000-byte MTU: 8948-byte segments in 9014-byte frames", host={"mtu": 9000}),
)
NOT_YET = ("segmentation offloads", "the delay emulator's queue limit", "SACK off")


def plan(quick: bool) -> tuple[dict[str, Any], list[dict[str, list[Any]]]]:
    """The base scenario and two grids over every cell and CC: the host settings (one at a time:
    each axis value is a whole `[host]` table), and iperf3 -w on the flow."""
    duration_s = QUICK_DURATION_S if quick else DURATION_S
    base = {"duration_s": duration_s, "bottleneck": CELLS[0].bottleneck(), "flows": [{"cc": CCS[0]}], "output": {"warmup_s": WARMUP_S}}
    cells = [c.bottleneck() for c in CELLS]
    hosts = {"bottleneck": cells, "flows.0.cc": list(CCS), "host": [s.host or {} for s in SETTINGS if s.window is None]}
    windows = {"bottleneck": cells, "flows.0": [{"cc": cc, "sndbuf": s.window, "rcvbuf": s.window} for s in SETTINGS if s.window for cc in CCS]}
    return base, [hosts, windows]


def payload_share(setting: str) -> float:
    """The goodput a full frame's payload allows under a setting, as a share of the rate."""
    mtu = next((s.host or {}).get("mtu", DEFAULT_MTU_BYTES) for s in SETTINGS if s.name == setting)
    return mss_bytes(mtu) / frame_bytes(mtu)


def _setting_name(host: Any, flow: Any) -> str:
    if isinstance(flow, dict):
        return next(s.name for s in SETTINGS if s.window is not None and s.window == flow.get("sndbuf"))
    return next(s.name for s in SETTINGS if s.window is None and (s.host or {}) == host)


def table(flows: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell, CC, setting): goodput, utilization, retransmissions, and the change
    from the default."""
    cell_of = {json.dumps(c.bottleneck(), sort_keys=True): c for c in CELLS}
    rows = []
    for row in flows.to_dict("records"):
        cell = cell_of[json.dumps(row["x_cell"], sort_keys=True)]
        setting = _setting_name(row.get("x_host"), row.get("x_flow"))
        rows.append({"cell": cell.name, "cc": row["cc"], "setting": setting,
                     "goodput_mbps": row["goodput_mbps"], "utilization": row["goodput_mbps"] / (cell.rate_mbps * payload_share(setting)),
                     "retrans_segments": row["retrans_segments"]})  # fmt: skip
    out = pd.DataFrame(rows).groupby(["cell", "cc", "setting"], as_index=False, sort=False).mean(numeric_only=True)
    order = {s.name: i for i, s in enumerate(SETTINGS)}
    cells = {c.name: i for i, c in enumerate(CELLS)}
    out = out.sort_values(["cell", "cc", "setting"], key=lambda col: col.map(cells) if col.name == "cell" else col.map(order) if col.name == "setting" else col)
    default = out[out["setting"] == "default"].set_index(["cell", "cc"])["goodput_mbps"]
    out["change"] = [g / default.get((c, cc), float("nan")) - 1 for c, cc, g in zip(out["cell"], out["cc"], out["goodput_mbps"], strict=True)]
    return out.reset_index(drop=True)


def winners(result: pd.DataFrame) -> pd.DataFrame:
    """BBRv1 against CUBIC per cell and setting (ahead by more than 5%, else a tie), and whether
    the setting flips the default's answer."""
    rows = []
    for (cell, setting), group in result.groupby(["cell", "setting"], sort=False):
        goodput = group.set_index("cc")["goodput_mbps"]
        bbr, cubic = goodput.get("bbr"), goodput.get("cubic")
        margin = bbr / cubic - 1 if cubic else float("inf")
        rows.append({"cell": cell, "setting": setting, "winner": "BBR" if margin > 0.05 else "CUBIC" if margin < -0.05 else "tie", "margin": margin})
    out = pd.DataFrame(rows)
    default = out[out["setting"] == "default"].set_index("cell")["winner"]
    out["flips"] = [w != default[c] for c, w in zip(out["cell"], out["winner"], strict=True)]
    return out


def findings(result: pd.DataFrame, won: pd.DataFrame, quick: bool) -> list[list[str]]:
    rows = []
    top = result[(result["cell"] == CELLS[0].name) & (result["cc"] == "bbr")].set_index("setting")["utilization"]
    stock, free = top.get("stock tcp_wmem"), top.get("default")
    rows.append([
        f"With iperf3's default socket buffer, BBR used {DATTA_FUND_DEFAULT_UTILIZATION:.0%} of 1 Gbit/s x 200 ms instead of "
        f"{DATTA_FUND_SET_UTILIZATION:.0%} (Datta & Fund)",
        f"{stock:.0%} under Linux's stock tcp_wmem[2] (4 MiB), {free:.0%} with buffers that never limit",
        verdict(None if stock is None or free is None else bool(stock < HELD_DOWN_UTILIZATION and free > FREE_UTILIZATION)),
    ])  # fmt: skip
    headline = result[(result["cell"] == CELLS[1].name) & (result["cc"] == "cubic")].set_index("setting")["goodput_mbps"]
    nic, veth = headline.get("1 Gbit/s NIC"), headline.get("default")
    if nic is not None and veth is not None:
        closer = abs(nic - PAPER_CUBIC_HEADLINE_MBPS) < abs(veth - PAPER_CUBIC_HEADLINE_MBPS)
        rows.append([
            f"CUBIC at 500 Mbit/s, 200 ms, 100 KB: {PAPER_CUBIC_HEADLINE_MBPS} Mbit/s (Cao et al., 1 Gbit/s NICs, 60 s)",
            f"{nic:.1f} Mbit/s with a 1 Gbit/s NIC, {veth:.1f} with a 10 Gbit/s one",
            # In 10 s runs CUBIC has not left its first climb at this RTT: no comparison.
            "n/a (--quick: 10 s runs)" if quick else "**the 1 Gbit/s NIC is closer**" if closer else "**the 1 Gbit/s NIC is not closer**",
        ])  # fmt: skip
    flips = won[won["flips"]]
    rows.append([
        "Which settings flip BBR-vs-CUBIC (BBRv1 against CUBIC, 5% margin)",
        "; ".join(f"{r.setting} at {r.cell} ({r.winner})" for r in flips.itertuples()) or "none",
        "–",
    ])
    return rows


def figure(result: pd.DataFrame, engine: str):  # -> matplotlib Figure
    import matplotlib.pyplot as plt
    import numpy as np

    from cclab.analysis.timeseries import cc_color

    names = [s.name for s in SETTINGS]
    fig, axes = plt.subplots(1, len(CELLS), figsize=(5 * len(CELLS), 4.2), sharey=True, layout="constrained")
    width = 0.8 / len(CCS)
    for ax, cell in zip(axes, CELLS, strict=True):
        for i, cc in enumerate(CCS):
            rows = result[(result["cell"] == cell.name) & (result["cc"] == cc)].set_index("setting").reindex(names)
            ax.bar(np.arange(len(names)) + (i - (len(CCS) - 1) / 2) * width, rows["utilization"] * 100, width, color=cc_color(cc), label=cc_label(cc))
        ax.set_xticks(np.arange(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_title(cell.name, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("goodput (% of the link's payload rate)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"One setting at a time - {engine} engine", fontsize=11)
    return fig


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False) -> Path:
    from cclab.errors import CclabError

    out_dir = Path(out_dir)
    if engine != "sim":
        # 1 Gbit/s x 200 ms and 500 Mbit/s x 200 ms are host-limited on a 2-core kernel testbed
        # (docs/FIDELITY.md); the settings it can run are in `cclab validate --set host`.
        raise CclabError(f"{NAME}: its cells are past what the kernel engine emulates faithfully on this kind of host; use --engine sim "
                         "(the kernel engine's side of these settings: cclab validate --set host)")  # fmt: skip
    progress(f"{NAME}: one host setting at a time on the {engine} engine{' (quick)' if quick else ''}")
    base, (hosts, windows) = plan(quick)
    columns = {"bottleneck": "x_cell", "flows.0.cc": "x_cc", "host": "x_host", "flows.0": "x_flow"}
    started = time.monotonic()
    grids = [run_grid(out_dir, f"{NAME}-{part}", base, axes, columns=columns, engine=engine, jobs=jobs, include_invalid=include_invalid)
             for part, axes in (("host", hosts), ("window", windows))]  # fmt: skip
    result = table(pd.concat([g.flows for g in grids], ignore_index=True))
    result.to_csv(out_dir / "settings.csv", index=False)
    won = winners(result)
    won.to_csv(out_dir / "winners.csv", index=False)
    link = save(figure(result, engine), out_dir, "settings")

    rows = [[r.cell, cc_label(r.cc), r.setting, fmt(r.goodput_mbps), f"{r.utilization:.0%}", fmt(r.retrans_segments, 0),
             "–" if r.setting == "default" else f"{r.change:+.0%}"] for r in result.itertuples()]  # fmt: skip
    info = {"runs": sum(len(g.runs()) for g in grids), "wall_s": time.monotonic() - started, "invalid_runs": sum(len(g.invalid) for g in grids), "included_invalid": include_invalid}
    text = "\n\n".join(
        [
            f"# {NAME}: the settings that change the answer ({engine} engine)",
            f"{DESCRIPTION}. One flow, {base['duration_s']:g} s, measured after {WARMUP_S:g} s.",
            run_facts(engine, quick, info),
            "## Settings\n\n" + markdown_table(["setting", "what it is"], [[s.name, s.what] for s in SETTINGS])
            + f"\n\nNot settings yet: {', '.join(NOT_YET)}.",
            "## Findings\n\n" + markdown_table(["claim", "ours", "verdict"], findings(result, won, quick)),
            "Datta & Fund's own fix, iperf3 -w 100M, needs a host whose net.core.wmem_max and rmem_max "
            "let 100 MB through: Linux clamps SO_SNDBUF/SO_RCVBUF to them before doubling, and on the "
            "kernel engine's host they are 4 MiB (read-only in a namespace), so here -w 100M is an 8 MiB "
            "buffer (the row `iperf3 -w 100M`).",
            link,
            "## Every run\n\n" + markdown_table(["cell", "CC", "setting", "goodput (Mbit/s)", "of the link", "retransmitted", "against default"], rows),
            "## BBRv1 against CUBIC\n\n" + markdown_table(
                ["cell", "setting", "ahead", "BBR's margin", "flips the default's answer"],
                [[r.cell, r.setting, r.winner, f"{r.margin:+.0%}", "yes" if r.flips else "no"] for r in won.itertuples()],
            ),
        ]
    )
    summary = out_dir / "summary.md"
    summary.write_text(text + "\n", encoding="utf-8")
    return summary
