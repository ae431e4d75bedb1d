"""Links that change: how fast BBR (v1, v3) and CUBIC follow a rate that drops 5x for 10 s
and comes back, and what each gets over a stepped and a cellular-like Mahimahi trace.

No seed paper measures this; the study answers the question of the links issue with
schedules and traces, on either engine (on the kernel the traces replay in the userspace
bottleneck, so its rates stay within that bottleneck's envelope). Its traces are generated here (seeded) and shipped as
`examples/traces/*.trace` by `examples/traces/make_traces.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from cclab.analysis import timeseries  # noqa: E402
from cclab.spec.link import OPPORTUNITY_BYTES, constant_rate_trace_ms, mean_rate_bps, write_trace  # noqa: E402
from cclab.studies._manyflows import invalid_note, md_table, run_grid  # noqa: E402
from cclab.units import FRAME_BYTES, MSS_BYTES

NAME = "changing-links"
DESCRIPTION = "BBRv1, BBRv3 and CUBIC on links that change: a 5x rate dip for 10 s, a stepped and a cellular-like trace"

CCS = ("cubic", "bbr", "bbr3")
RATE_MBPS, DIP_MBPS, RTT_MS = 50, 10, 40
#: A flow has recovered once a 100 ms sample reaches this share of the restored rate's goodput ceiling.
RECOVERED_SHARE = 0.9
GOODPUT_PER_FRAME = MSS_BYTES / FRAME_BYTES


@dataclass(frozen=True)
class Plan:
    dip_at_s: float
    dip_s: float
    dip_duration_s: float
    trace_duration_s: float


FULL = Plan(dip_at_s=10, dip_s=10, dip_duration_s=35, trace_duration_s=60)
QUICK = Plan(dip_at_s=4, dip_s=4, dip_duration_s=12, trace_duration_s=10)


def step_trace_ms() -> list[int]:
    """20 Mbit/s for 10 s, 4 Mbit/s for 10 s, 20 Mbit/s for 10 s (then it repeats)."""
    return constant_rate_trace_ms([(20, 10), (4, 10), (20, 10)])


def cellular_like_trace_ms(seed: int = 7, seconds: int = 30) -> list[int]:
    """A variable link: the rate walks in log space every 100 ms between 0.5 and 40 Mbit/s,
    drawn back towards 10, with an outage of 0.3-0.8 s about every 5 s, as cellular traces
    show (mean 4.7 Mbit/s over the 30 s of seed 7)."""
    rng = np.random.default_rng(seed)
    times: list[int] = []
    log_rate, carried, outage_left_ms = np.log(10.0), 0.0, 0
    for chunk in range(seconds * 10):
        if outage_left_ms <= 0 and rng.random() < 0.02:
            outage_left_ms = int(rng.integers(300, 800))
        log_rate = float(np.clip(log_rate + rng.normal(0, 0.25) + 0.05 * (np.log(10.0) - log_rate), np.log(0.5), np.log(40)))
        for ms in range(chunk * 100 + 1, chunk * 100 + 101):
            if outage_left_ms > 0:
                outage_left_ms -= 1
                continue
            carried += np.exp(log_rate) * 1e6 / (OPPORTUNITY_BYTES * 8 * 1000)
            whole = int(carried)
            times += [ms] * whole
            carried -= whole
    if not times or times[-1] != seconds * 1000:
        times.append(seconds * 1000)
    return times


def write_traces(folder: Path) -> dict[str, Path]:
    paths = {"step": folder / "step_20_4_20mbit.trace", "cellular": folder / "cellular_like.trace"}
    write_trace(paths["step"], step_trace_ms())
    write_trace(paths["cellular"], cellular_like_trace_ms())
    return paths


def run(out_dir: Path, *, engine: str = "sim", quick: bool = False, jobs: int | None = None, include_invalid: bool = False) -> Path:
    out_dir = Path(out_dir)
    plan = QUICK if quick else FULL
    kw = {"engine": engine, "jobs": jobs, "include_invalid": include_invalid}
    dip_end_s = plan.dip_at_s + plan.dip_s
    dip_base = {
        "duration_s": plan.dip_duration_s,
        "bottleneck": {"rate_mbps": RATE_MBPS, "rtt_ms": RTT_MS, "buffer": "1bdp",
                       "schedule": [{"at_s": plan.dip_at_s, "rate_mbps": DIP_MBPS}, {"at_s": dip_end_s, "rate_mbps": RATE_MBPS}]},
        "flows": [{"cc": "cubic"}],
    }  # fmt: skip
    dip = run_grid(out_dir, "dip", dip_base, {"flows.0.cc": list(CCS)}, columns={"flows.0.cc": "x_cc"}, **kw)
    dip_rows = [_dip_row(dip.run(r["run_key"]), r["x_cc"], plan) for _, r in dip.runs().iterrows()]

    traces = write_traces(out_dir / "traces")
    trace_rows, trace_runs = [], {}
    for label, path in traces.items():
        base = {"duration_s": plan.trace_duration_s, "bottleneck": {"trace": str(path), "rtt_ms": RTT_MS, "buffer": "1bdp"}, "flows": [{"cc": "cubic"}]}
        grid = run_grid(out_dir, f"trace-{label}", base, {"flows.0.cc": list(CCS)}, columns={"flows.0.cc": "x_cc"}, **kw)
        for _, r in grid.runs().iterrows():
            result = grid.run(r["run_key"])
            trace_runs[(label, r["x_cc"])] = result
            flow = result.flows.iloc[0]
            trace_rows.append({"trace": label, "CC": timeseries.cc_label(r["x_cc"]), "goodput Mbit/s": flow["goodput_mbps"],
                               "link used": result.bottleneck["utilization"],
                               "RTT p50 ms": flow["rtt_p50_ms"], "RTT p95 ms": flow["rtt_p95_ms"], "retrans": flow["retrans_segments"]})  # fmt: skip
        _trace_figure(label, path, {cc: trace_runs[(label, cc)] for cc in CCS}, out_dir / f"trace_{label}")
    _dip_figure({r["x_cc"]: dip.run(r["run_key"]) for _, r in dip.runs().iterrows()}, plan, out_dir / "dip")
    summary = out_dir / "summary.md"
    summary.write_text(_summary(pd.DataFrame(dip_rows), pd.DataFrame(trace_rows), plan, quick, engine) + invalid_note(dip, include_invalid), encoding="utf-8")
    return summary


def _window(series: pd.DataFrame, column: str, from_s: float, to_s: float) -> pd.Series:
    return series.loc[(series["time_s"] > from_s) & (series["time_s"] <= to_s), column]


def _dip_row(result, cc: str, plan: Plan) -> dict:  # noqa: ANN001
    fs, qs = result.flow_series, result.queue_series
    dip_end_s = plan.dip_at_s + plan.dip_s
    restored_mbps = RATE_MBPS * GOODPUT_PER_FRAME
    after = fs[(fs["time_s"] > dip_end_s) & (fs["throughput_mbps"] >= RECOVERED_SHARE * restored_mbps)]
    queue_in_dip = _window(qs, "queue_bytes", plan.dip_at_s, dip_end_s)
    return {
        "CC": timeseries.cc_label(cc),
        "before Mbit/s": _window(fs, "throughput_mbps", plan.dip_at_s - min(5, plan.dip_at_s / 2), plan.dip_at_s).mean(),
        "in the dip Mbit/s": _window(fs, "throughput_mbps", plan.dip_at_s + 1, dip_end_s).mean(),
        # The delay the queue reached once the rate fell, at the dip's rate.
        "peak queue delay ms": float(queue_in_dip.max()) * 8 / (DIP_MBPS * 1e6) * 1e3 if len(queue_in_dip) else np.nan,
        "retrans in the dip": int(_window(fs, "retrans_segments", plan.dip_at_s, dip_end_s).sum()),
        "queue at the return kB": float(_window(qs, "queue_bytes", dip_end_s - 0.01, dip_end_s).mean()) / 1e3,
        "recovery s": float(after["time_s"].iloc[0] - dip_end_s) if len(after) else np.nan,
        "after Mbit/s": _window(fs, "throughput_mbps", dip_end_s + plan.dip_s / 2, plan.dip_duration_s).mean(),
    }


def _dip_figure(runs: dict, plan: Plan, stem: Path) -> None:
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    dip_end_s = plan.dip_at_s + plan.dip_s
    times = [0, plan.dip_at_s, plan.dip_at_s, dip_end_s, dip_end_s, plan.dip_duration_s]
    rates = [RATE_MBPS, RATE_MBPS, DIP_MBPS, DIP_MBPS, RATE_MBPS, RATE_MBPS]
    top.plot(times, [r * GOODPUT_PER_FRAME for r in rates], color="#444444", ls="--", lw=1, label="link (goodput ceiling)")
    for cc, result in runs.items():
        fs, qs = result.flow_series, result.queue_series
        top.plot(fs["time_s"], fs["throughput_mbps"], color=timeseries.cc_color(cc), lw=1.2, label=timeseries.cc_label(cc))
        bottom.plot(qs["time_s"], qs["queue_bytes"] / 1e3, color=timeseries.cc_color(cc), lw=0.8, label=timeseries.cc_label(cc))
    top.set_ylabel("throughput (Mbit/s, 100 ms)")
    top.set_title(f"The rate drops {RATE_MBPS // DIP_MBPS}x for {plan.dip_s:g} s: {RATE_MBPS} -> {DIP_MBPS} -> {RATE_MBPS} Mbit/s, {RTT_MS} ms, 1 BDP")
    top.legend(fontsize=8)
    bottom.set_ylabel("queue (kB)")
    bottom.set_xlabel("time (s)")
    timeseries.save(fig, stem)


def _trace_figure(label: str, path: Path, runs: dict, stem: Path) -> None:
    from cclab.spec.link import read_trace_ms

    times_ms = np.array(read_trace_ms(path))
    duration_s = max(float(r.flow_series["time_s"].max()) for r in runs.values())
    bins = np.arange(0, duration_s + 0.1, 0.1)
    period_ms = int(times_ms[-1])
    repeats = int(np.ceil(duration_s * 1000 / period_ms))
    all_ms = np.concatenate([times_ms + k * period_ms for k in range(repeats)])
    capacity_mbps = np.histogram(all_ms / 1000, bins=bins)[0] * MSS_BYTES * 8 / 0.1 / 1e6
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.fill_between(bins[1:], capacity_mbps, step="pre", color="#dddddd", label="trace capacity (goodput, 100 ms)")
    for cc, result in runs.items():
        fs = result.flow_series
        ax.plot(fs["time_s"], fs["throughput_mbps"], color=timeseries.cc_color(cc), lw=1.1, label=timeseries.cc_label(cc))
    mean = mean_rate_bps(list(times_ms)) / 1e6
    ax.set_title(f"{label} trace (mean {mean:.1f} Mbit/s), {RTT_MS} ms, 1 BDP of the mean")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("throughput (Mbit/s, 100 ms)")
    ax.legend(fontsize=8)
    timeseries.save(fig, stem)


def _summary(dip: pd.DataFrame, traces: pd.DataFrame, plan: Plan, quick: bool, engine: str) -> str:
    fmt = {c: ".1f" for c in list(dip.columns) + list(traces.columns) if c not in ("CC", "trace")}
    fmt.update({"recovery s": ".2f", "link used": ".0%", "retrans": "d", "retrans in the dip": "d"})
    by_cc = dip.set_index("CC")
    fastest = by_cc["recovery s"].idxmin() if by_cc["recovery s"].notna().any() else "none"
    mode = "quick (a demo, not a measurement)" if quick else "full"
    return (
        f"# {NAME}: {DESCRIPTION}\n\n"
        f"Mode: {mode}; engine {engine}. No seed paper measures this: these are our measurements, with the mechanism "
        "that explains them.\n\n"
        f"## A {RATE_MBPS // DIP_MBPS}x rate dip: {RATE_MBPS} -> {DIP_MBPS} Mbit/s at {plan.dip_at_s:g} s, back at "
        f"{plan.dip_at_s + plan.dip_s:g} s ({RTT_MS} ms, 1 BDP of {RATE_MBPS} Mbit/s)\n\n"
        f"{md_table(dip.to_dict('records'), list(dip.columns), fmt)}\n\n"
        f"- Recovery: seconds after the rate returns until a 100 ms sample reaches {RECOVERED_SHARE:.0%} of the restored "
        f"goodput ceiling. Fastest here: {fastest}. Two mechanisms decide it (see the queue at the return). A flow "
        "whose window kept the buffer full through the dip (CUBIC fills it: it is 5 BDP at the dip's rate) is back "
        "within a round trip or two: the queue drains at the restored rate and the faster ACKs clock out its window. "
        "A flow that kept little queued (BBR paces at its estimate, under a 2-BDP cwnd) must find the new rate: "
        "by its 1.25 PROBE_BW gain alone, once per 8-round cycle, a 5x rise would take log(5)/log(1.25) = 7 "
        "cycles, 56 round trips (2.2 s at 40 ms). A recovery faster than that means the estimate also rose "
        "another way (rate samples while what was queued drains at the restored rate are the likely one; not "
        "yet traced).\n"
        "- Peak queue delay: the largest backlog during the dip, drained at the dip's rate (the rate fell under "
        "packets sent for the old one). Queue at the return: the mean backlog in the last 10 ms of the dip.\n"
        "- Figure: `dip.png|svg` (throughput and queue over time).\n\n"
        f"## Over a trace ({plan.trace_duration_s:g} s, {RTT_MS} ms, buffer 1 BDP of the trace's mean rate)\n\n"
        f"{md_table(traces.to_dict('records'), list(traces.columns), fmt)}\n\n"
        "- `step`: 20 -> 4 -> 20 Mbit/s, 10 s each; `cellular`: a seeded log-rate walk between 0.5 and 40 Mbit/s "
        "with outages (`examples/traces/`). \"Link used\": the share of the trace's delivery opportunities in the "
        "run that carried data.\n"
        "- Figures: `trace_step.png|svg`, `trace_cellular.png|svg`.\n"
    )
