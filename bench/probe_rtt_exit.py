"""How BBR's PROBE_RTT ends, on each engine: what each one costs, and the rounds inside it.

    .venv/bin/python bench/probe_rtt_exit.py --validate DIR [DIR ...] [--case NAME]
    .venv/bin/python bench/probe_rtt_exit.py --sim SEEDS [--case NAME] [--jobs 2]
    .venv/bin/python bench/probe_rtt_exit.py --captures DIR [DIR ...] [--window 5 60]

--validate: for every single-BBR-flow run of `cclab validate` folders (the flow series'
cwnd at BBR's minimum of 4 packets after 5 s marks PROBE_RTT), the data the flow did not
deliver around it, against its own median rate: Mbit lost, and its count per 5-Mbit bin
per case and engine. The bins are the ways PROBE_RTT ends: its 4-packet flight returns
once a round, and it ends at the first ACK after 200 ms (`bbr_probe_rtt_mode_ms`, in
jiffies) and a round, so it lasts two or three rounds past the drain, or falls between
when a delayed ACK splits the flight.
--sim: the same for the installed simulator, on seeds 1..SEEDS of the rtt set's case
(default bbr-300M-100ms-1bdp) as the set specifies it.
--captures: router captures of such runs (`bench/router_capture.py` folders, one BBR flow):
per round of PROBE_RTT after the drain, the time from the ACK that released a flight
leaving the router to that flight's first packet arriving (the sender's answer), from a
flight's data to the ACK of it leaving (the path's return, delay line included), and from
one round to the next. `--window START END` (seconds after the SYN) takes the rounds of another
phase that idles between flights, as slow start's first rounds (`--window 0.15 1.0`).
Why: the share of runs that leave PROBE_RTT a round early decides this case's spread, and
it turns on how much longer than the configured RTT a round on an idle path is
(docs/history/FIDELITY-investigations.md, "The idle machine: PROBE_RTT's rounds and slow start's reads").
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

from concurrent.futures import ProcessPoolExecutor

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

CWND_MIN_TARGET_PKTS = 4  # tcp_bbr.c bbr_cwnd_min_target
#: PROBE_RTT comes 10 s after min_rtt's last update, never in the first seconds.
SEARCH_FROM_S = 5.0
#: Around PROBE_RTT: the drain before its first sample, the refill after its last.
BEFORE_S, AFTER_S = 0.3, 0.5
LOST_BIN_MBIT = 5.0
#: A data gap this long on the router's sender side is a PROBE_RTT round's idle time.
ROUND_GAP_S = 0.02


def lost_around_probe_rtt_mbit(series: pd.DataFrame) -> float | None:
    """Data one BBR flow did not deliver around its first PROBE_RTT after 5 s, against its median rate."""
    at_min = series[(series.cwnd_pkts <= CWND_MIN_TARGET_PKTS) & (series.time_s > SEARCH_FROM_S)]
    if at_min.empty:
        return None
    interval_s = float(series.time_s.diff().median())
    first, last = at_min.time_s.min(), at_min.time_s.max()
    window = series[(series.time_s > first - BEFORE_S) & (series.time_s < last + AFTER_S)]
    rate_mbps = float(series[series.time_s > SEARCH_FROM_S].throughput_mbps.median())
    return float((rate_mbps - window.throughput_mbps).clip(lower=0).sum() * interval_s)


def probe_rtt_costs(directory: Path, case: str | None) -> list[tuple[str, str, float]]:
    """(case, engine, Mbit lost) for each single-BBR-flow run's first PROBE_RTT."""
    rows = []
    for meta_path in sorted(directory.glob("runs/*/run.json")):
        run_dir = meta_path.parent
        meta = json.loads(meta_path.read_text())
        name = meta.get("axis_values", {}).get("case", "")
        flows = meta.get("scenario", {}).get("flows", [])
        if (case and name != case) or len(flows) != 1 or flows[0].get("cc") != "bbr" or flows[0].get("count", 1) != 1:
            continue
        if not (run_dir / "flow_series.parquet").exists():
            continue
        lost_mbit = lost_around_probe_rtt_mbit(pd.read_parquet(run_dir / "flow_series.parquet"))
        if lost_mbit is not None:
            rows.append((name, meta["engine"], lost_mbit))
    return rows


def _sim_cost(job: tuple[str, dict]) -> tuple[str, str, float] | None:
    import cclab
    from cclab.spec import Scenario

    name, spec = job
    lost_mbit = lost_around_probe_rtt_mbit(cclab.run(Scenario.model_validate(spec), "sim").flow_series)
    return None if lost_mbit is None else (name, "sim", lost_mbit)


def simulator_costs(case: str, seeds: int, jobs: int) -> list[tuple[str, str, float]]:
    from cclab.fidelity.sets import get_set

    cases = {c.name: c for c in get_set("rtt").cases}
    if case not in cases:
        print(f"--case: not in the rtt set: {case}", file=sys.stderr)
        sys.exit(2)
    runs = [(case, dict(cases[case].spec, seed=seed)) for seed in range(1, seeds + 1)]
    with ProcessPoolExecutor(jobs) as pool:
        return [row for row in pool.map(_sim_cost, runs) if row is not None]


def print_costs(rows: list[tuple[str, str, float]]) -> None:
    by_case: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for name, engine, lost in rows:
        by_case[(name, engine)].append(lost)
    for (name, engine), lost in sorted(by_case.items()):
        bins = collections.Counter(round(x / LOST_BIN_MBIT) * LOST_BIN_MBIT for x in lost)
        shown = ", ".join(f"{b:.0f}: {n}" for b, n in sorted(bins.items()))
        print(f"{name:32s} {engine:6s} {len(lost):3d} runs, Mbit lost around PROBE_RTT (5-Mbit bins): {shown}")


def flight_rounds(capture_dir: Path, window_s: tuple[float, float]) -> list[dict]:
    """Per round that idles before its flight (PROBE_RTT's after the drain): the sender's
    answer, the return and the cycle (s)."""
    from router_capture import read_pcap

    frames = read_pcap(capture_dir / "s0.pcap")
    counts = collections.Counter((f[1], f[3]) for f in frames if f[8] > 0)
    if not counts:
        return []
    sender = counts.most_common(1)[0][0]
    syn = next(f for f in frames if (f[1], f[3]) == sender and f[7] & 0x02)
    isn, t0 = syn[5], syn[0]
    data = [(f[0] - t0, (f[5] - isn) % 2**32 + f[8]) for f in frames if (f[1], f[3]) == sender and f[8] > 0]
    acks = [(f[0] - t0, (f[6] - isn) % 2**32) for f in frames if (f[2], f[4]) == sender and f[7] & 0x10]
    first_seen: dict[int, float] = {}
    for t, end in data:
        first_seen.setdefault(end, t)
    data_times = [t for t, _ in data]
    start_s, end_s = window_s
    gaps = [(a, b) for a, b in zip(data_times, data_times[1:], strict=False) if start_s < a and b < end_s and b - a > ROUND_GAP_S]
    rounds = []
    # The first gap (PROBE_RTT's drain) is ACKed by the flight before it: skip it.
    for a, b in gaps[1:]:
        inside = [(t, ack) for t, ack in acks if a < t <= b]
        if not inside:
            continue
        t_ack, ack = inside[0]
        rounds.append({"ack_s": t_ack, "answer_s": b - t_ack, "return_s": t_ack - first_seen[ack] if ack in first_seen else None})
    for prev, cur in zip(rounds, rounds[1:], strict=False):
        cur["cycle_s"] = cur["ack_s"] - prev["ack_s"]
    return rounds


def print_rounds(capture_dirs: list[Path], window_s: tuple[float, float]) -> None:
    answers, returns, cycles = [], [], []
    for directory in capture_dirs:
        for run_dir in sorted(p for p in directory.glob("run-*") if (p / "s0.pcap").exists()):
            rounds = flight_rounds(run_dir, window_s)
            line = ", ".join(
                f"answer {r['answer_s'] * 1e6:.0f} us, return {r['return_s'] * 1e3:.3f} ms" + (f", cycle {r['cycle_s'] * 1e3:.3f} ms" if "cycle_s" in r else "")
                for r in rounds
                if r["return_s"] is not None
            )
            print(f"{run_dir}: {line}")
            answers += [r["answer_s"] for r in rounds]
            returns += [r["return_s"] for r in rounds if r["return_s"] is not None]
            # A cycle of a flight a delayed ACK split is not a round: keep whole rounds.
            cycles += [r["cycle_s"] for r in rounds if "cycle_s" in r and r["cycle_s"] > 0.09]
    if answers:
        print(f"sender's answer: median {statistics.median(answers) * 1e6:.0f} us over {len(answers)} rounds")
    if returns:
        print(f"return (data at the router to its ACK leaving it): median {statistics.median(returns) * 1e3:.3f} ms over {len(returns)}")
    if cycles:
        print(f"round: median {statistics.median(cycles) * 1e3:.3f} ms over {len(cycles)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--validate", type=Path, nargs="+", help="cclab validate --out folders")
    group.add_argument("--sim", type=int, metavar="SEEDS", help="run the simulator on this many seeds")
    group.add_argument("--captures", type=Path, nargs="+", help="bench/router_capture.py --out folders")
    parser.add_argument("--case", help="one case of the set (--sim: default bbr-300M-100ms-1bdp)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel simulator runs")
    parser.add_argument("--window", type=float, nargs=2, default=(SEARCH_FROM_S, float("inf")), metavar=("START", "END"),
                        help="--captures: rounds in this span, seconds after the SYN (default 5 s to the end)")
    args = parser.parse_args()
    if args.validate:
        rows = [row for d in args.validate for row in probe_rtt_costs(d, args.case)]
        if not rows:
            sys.exit("no single-BBR-flow run with a PROBE_RTT after 5 s in those folders")
        print_costs(rows)
    elif args.sim:
        print_costs(simulator_costs(args.case or "bbr-300M-100ms-1bdp", args.sim, args.jobs))
    else:
        print_rounds(args.captures, tuple(args.window))


if __name__ == "__main__":
    main()
