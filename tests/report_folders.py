"""Folders of each kind `cclab report` reads, made small: a real simulator run and sweep,
a real quick study, and constructed cao2019-style and validate folders (the cao2019 grid
needs BBRv2/v3 in the simulator and validate needs the kernel engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from cclab.analysis.figures import save_figure
from cclab.results import RunResult
from cclab.sweep import Sweep, run_sweep
from conftest import constructed_engine_output, run_cli

RUN_SPEC = """\
duration_s = 2
seed = 1

[bottleneck]
rate_mbps = 20
rtt_ms = 20
buffer = "1bdp"

[[flows]]
cc = "bbr"

[[flows]]
cc = "cubic"
start_s = 0.5
"""

# Two networks x two CCs, one second each.
SWEEP = {
    "name": "tiny",
    "base": {"duration_s": 1, "seed": 1, "bottleneck": {"rate_mbps": 10, "rtt_ms": 20, "buffer": "1bdp"}, "flows": [{"cc": "cubic"}]},
    "axes": {"bottleneck.rate_mbps": [10, 20], "flows.0.cc": ["cubic", "bbr"]},
}

# goodput.csv as cao2019 writes it (the columns the report reads), 2 buffers x 2 rates x 3 RTTs.
GOODPUT_ROWS = [
    (rate, rtt, buffer, bbr, cubic)
    for buffer, scale in ((100_000, 1.0), (10_000_000, 0.5))
    for rate in (10.0, 100.0)
    for rtt, bbr, cubic in ((10.0, 0.95 * rate, 0.90 * rate * scale), (50.0, 0.94 * rate, 0.6 * rate), (200.0, 0.9 * rate, 0.3 * rate / scale))
]


def sim_run(tmp: Path) -> Path:
    """`cclab run --out`: the report is written with the result."""
    spec = tmp / "tiny.toml"
    spec.write_text(RUN_SPEC, encoding="utf-8")
    out = tmp / "run"
    done = run_cli("run", spec, "--out", out)
    assert done.returncode == 0, done.stderr
    return out


def kernel_like_run(tmp: Path) -> Path:
    """A constructed run with what the kernel engine writes: no mode events, ECN marks, a failed check."""
    spec = {"seed": 7, "duration_ns": 10**9, "flows": [], "bottleneck": {"rate_bps": 50_000_000, "rtt_ns": 25_000_000, "queue_limit_bytes": 156_250, "queue_limit_packets": None, "loss_probability": 0.0, "aqm": {"kind": "fq_codel"}}}
    output = {**constructed_engine_output(), "validity": {"valid": False, "reasons": ["iperf3 reported a stall"]}}
    result = RunResult.from_engine_output(output, spec=spec, engine="kernel")
    return result.write(tmp / "kernel-run")


def sweep_folder(tmp: Path) -> Path:
    out = tmp / "sweep"
    report = run_sweep(Sweep.from_dict(SWEEP), out, jobs=1, progress=False)
    assert not report.failed
    return out


def study_folder(tmp: Path) -> Path:
    """`cclab reproduce rebbr --quick`: a real study with figures/ and summary.md."""
    out = tmp / "rebbr"
    done = run_cli("reproduce", "rebbr", "--quick", "--jobs", "1", "--out", out)
    assert done.returncode == 0, done.stderr
    return out


def _figure(out_dir: Path, stem: str) -> None:
    figure = Figure(figsize=(3, 2))
    figure.add_subplot().plot([0, 1, 2], [1, 3, 2])
    save_figure(figure, out_dir, stem)


def cao_folder(tmp: Path) -> Path:
    out = tmp / "cao2019"
    out.mkdir()
    frame = pd.DataFrame(GOODPUT_ROWS, columns=["rate_mbps", "rtt_ms", "buffer_bytes", "goodput_mbps_bbr", "goodput_mbps_cubic"])
    frame["gain_pct"] = (frame["goodput_mbps_bbr"] - frame["goodput_mbps_cubic"]) / frame["goodput_mbps_cubic"] * 100
    frame.to_csv(out / "goodput.csv", index=False)
    for stem in ("gain_100KB", "decision_tree"):
        _figure(out / "figures", stem)
    (out / "summary.md").write_text(
        "# cao2019: When to use BBR\n\n"
        "| claim | paper | ours | verdict |\n|---|---|---|---|\n"
        "| BBR wins at 100 KB | yes | 8 of 12 | **holds** |\n\n"
        "![gain_100KB](figures/gain_100KB.png)\n\n"
        "## Decision tree\n\n![decision_tree](figures/decision_tree.png)\n",
        encoding="utf-8",
    )
    return out


def validate_folder(tmp: Path) -> Path:
    out = tmp / "validate-quick"
    out.mkdir()
    (out / "set.json").write_text(json.dumps({"name": "quick", "cases": ["one_cubic"]}), encoding="utf-8")
    pd.DataFrame([{"case": "one_cubic", "sim_goodput_mbps": 9.5, "kernel_goodput_mbps": 9.4}]).to_csv(out / "comparison.csv", index=False)
    for stem in ("goodput_scatter", "one_cubic"):
        _figure(out / "figures", stem)
    (out / "summary.md").write_text(
        "# Fidelity: validation set `quick`, simulator against kernel\n\n"
        "## Figures of merit\n\n| criterion | measured | met |\n|---|---|---|\n| goodput within 10% | 1.1% | yes |\n\n"
        "![goodput per case](figures/goodput_scatter.png)\n\n"
        "## Cases\n\n| case | goodput |\n|---|---|\n| [one_cubic](figures/one_cubic.png) | 9.5 / 9.4 |\n",
        encoding="utf-8",
    )
    return out
