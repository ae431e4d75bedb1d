"""How slow start ends, run after run: the receiver's window and HyStart's exit point.

    .venv/bin/python bench/slow_start_modes.py --engine sim --runs 200
    sudo .venv/bin/python bench/slow_start_modes.py --engine kernel --runs 30
        [--case cubic-300M-100ms-1bdp] [--duration 3] [--jobs 2]

Each run is one case of the rtt validation set cut to --duration seconds, seeds 1..N (the
simulator keeps its default noise). Per run: how long the receiver's window stopped the
sender (`rwnd_limited_ms`), and cwnd at the first flow-series sample after slow start, which
is about where HyStart (or the first loss) ended it. The summary: the runs the window held
back for at least a round's worth (50 ms), and the exit cwnd in 250-packet bins.
Why: at 300 Mbit/s x 100 ms, a slow-start round the window holds back makes every later
round ~10% smaller, so HyStart's ACK train (longer than delay_min/2, 50.5 ms here, i.e. a
round of more than ~1250 packets) fires a round later, at ~3500-3900 packets instead of
~2540, and the run's queue and losses follow. Whether the window holds a round back depends
on where autotuning's measurement ends against slow start's bursts, and so on the TS
clock's phase (docs/FIDELITY.md, model 19).
"""

from __future__ import annotations

import argparse
import collections
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import cclab  # noqa: E402
from cclab.fidelity.sets import get_set  # noqa: E402
from cclab.spec import Scenario  # noqa: E402

#: A window that stopped the sender this long held back (most of) a slow-start round.
WINDOW_HELD_A_ROUND_MS = 50.0
EXIT_BIN_PKTS = 250


def one_run(args: tuple[dict, str]) -> tuple[float, float | None, bool, str]:
    spec, engine = args
    result = cclab.run(Scenario.model_validate(spec), engine)
    flow = result.flows.iloc[0]
    series = result.flow_series
    after = series[series.cc_mode.notna() & (series.cc_mode != "slow_start")]
    exit_cwnd = float(after.cwnd_pkts.iloc[0]) if len(after) else None
    validity = result.validity or {}
    reasons = "; ".join(validity.get("reasons", []))
    return float(flow.rwnd_limited_ms), exit_cwnd, bool(validity.get("valid", True)), reasons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=("sim", "kernel"), required=True)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--case", default="cubic-300M-100ms-1bdp")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds (default 3: slow start is over by ~1.5 s)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel simulator runs (kernel runs go one at a time)")
    args = parser.parse_args()
    cases = {case.name: case for case in get_set("rtt").cases}
    if args.case not in cases:
        print(f"--case: not in the rtt set: {args.case}", file=sys.stderr)
        sys.exit(2)
    base = cases[args.case].spec
    jobs = [(dict(base, seed=seed, duration_s=args.duration), args.engine) for seed in range(1, args.runs + 1)]
    if args.engine == "kernel":
        rows = [one_run(job) for job in jobs]
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            rows = list(pool.map(one_run, jobs))
    held = sum(1 for window_ms, *_ in rows if window_ms >= WINDOW_HELD_A_ROUND_MS)
    bins = collections.Counter(None if c is None else round(c / EXIT_BIN_PKTS) * EXIT_BIN_PKTS for _, c, _, _ in rows)
    print(f"{args.case}, {args.engine}, {len(rows)} runs of {args.duration:g} s")
    print(f"  the window held back a round (rwnd_limited >= {WINDOW_HELD_A_ROUND_MS:g} ms): {held} ({100 * held / len(rows):.1f}%)")
    shown = ", ".join(f"{'none' if b is None else b}: {n}" for b, n in sorted(bins.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)))
    print(f"  cwnd after slow start, {EXIT_BIN_PKTS}-packet bins: {shown}")
    invalid = collections.Counter(reasons for _, _, valid, reasons in rows if not valid)
    if invalid:
        print(f"  invalid runs (counted above all the same): {sum(invalid.values())}: " + "; ".join(f"{n} x {r}" for r, n in invalid.most_common(3)))


if __name__ == "__main__":
    main()
