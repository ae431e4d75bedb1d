"""`cclab validate`'s comparison over more runs: kernel samples pooled, several seeds per start.

    .venv/bin/python bench/pooled_validate.py --set rtt --kernel DIR [DIR ...] --starts DIR [DIR ...] [--seeds 6]
        [--seed-offset K] [--jitter-us US] [--stall-per-packet P] [--case NAME ...]

Each DIR is a `cclab validate --out` folder of the set. The valid kernel runs of every
`--kernel` folder are pooled (20 a case from two samples of ten). The simulator runs each case
once per simulator run of the `--starts` folders (keeping its paired start times), with that
run's seed and `--seeds - 1` more, on the installed simulator; `--seed-offset K` takes the
K-th to (K + seeds - 1)-th of that sequence instead, to see how far a case moves with the
seeds. Both sides then go through validate's own comparison (`compare_case`, `summarize`):
goodput error, share error, spread.
The simulator runs keep the `jitter_us` and `stall_per_packet` their folder recorded unless
`--jitter-us` or `--stall-per-packet` sets them (to judge a new default against folders made
under an old one, or to take a kind of noise out: `--stall-per-packet 0` runs without the
stalls).

Why: at ten runs a side, a case's share error moves by several points and its IQR by more
than 2x from one sample of seeds to the next, on the kernel too (docs/history/FIDELITY-investigations.md,
"The rtt set over more runs").
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import cclab  # noqa: E402
from cclab.fidelity.compare import compare_case, summarize  # noqa: E402
from cclab.fidelity.sets import get_set  # noqa: E402
from cclab.results import RunResult  # noqa: E402
from cclab.spec import Scenario  # noqa: E402

SEED_STRIDE = 1000  # extra seeds: far from validate's own


def run_dirs(directory: Path, engine: str) -> dict[str, list[Path]]:
    """The finished run folders of `engine`, by case."""
    found: dict[str, list[Path]] = collections.defaultdict(list)
    for meta_path in sorted(directory.glob("runs/*/run.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("engine") == engine and meta_path.with_name("result.json").exists():
            found[meta["axis_values"].get("case")].append(meta_path.parent)
    return found


def simulate(scenario: dict) -> RunResult:
    return cclab.run(Scenario.model_validate(scenario), "sim")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="set_name", required=True)
    parser.add_argument("--kernel", type=Path, nargs="+", required=True)
    parser.add_argument("--starts", type=Path, nargs="+", required=True)
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--seed-offset", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--jitter-us", type=float, default=None)
    parser.add_argument("--stall-per-packet", type=float, default=None)
    parser.add_argument("--case", dest="cases", action="append", default=None, help="only this case (repeat for more)")
    args = parser.parse_args()
    validation_set = get_set(args.set_name)
    unknown = sorted(set(args.cases or []) - {case.name for case in validation_set.cases})
    if unknown:
        print(f"--case: not in the {args.set_name} set: {', '.join(unknown)}", file=sys.stderr)
        sys.exit(2)
    kernel: dict[str, list[RunResult]] = collections.defaultdict(list)
    for directory in args.kernel:
        for case, dirs in run_dirs(directory, "kernel").items():
            runs = [RunResult.read(d) for d in dirs]
            kernel[case] += [run for run in runs if (run.validity or {}).get("valid", True)]
    starts: dict[str, list[Path]] = collections.defaultdict(list)
    for directory in args.starts:
        for case, dirs in run_dirs(directory, "sim").items():
            starts[case] += dirs
    comparisons = []
    with ProcessPoolExecutor(args.jobs) as pool:
        for case in validation_set.cases:
            if not kernel.get(case.name) or case.name not in starts or (args.cases and case.name not in args.cases):
                continue
            scenarios = []
            for run_dir in starts[case.name]:
                scenario = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["scenario"]
                if args.jitter_us is not None:
                    scenario = dict(scenario, jitter_us=args.jitter_us)
                if args.stall_per_packet is not None:
                    scenario = dict(scenario, stall_per_packet=args.stall_per_packet)
                seeds = range(args.seed_offset, args.seed_offset + args.seeds)
                scenarios += [dict(scenario, seed=scenario.get("seed", 1) + k * SEED_STRIDE) for k in seeds]
            sims = list(pool.map(simulate, scenarios))
            c = compare_case(case, sims, kernel[case.name])
            comparisons.append(c)
            share = "" if c.share_error_pts is None else f"share error {c.share_error_pts:4.1f} pts  "
            spread = ""
            if c.sim_spread_mbps is not None:
                spread = f"IQR sim/kernel {c.sim_spread_mbps:5.2f}/{c.kernel_spread_mbps:5.2f} Mbit/s (p {c.spread_p_value:.2f})"
            held = " (held out)" if c.held_out else ""
            print(f"{case.name:36s} goodput error {c.goodput_error:5.1%}  {share}{spread}  [{len(kernel[case.name])} kernel, {len(sims)} sim]{held}", flush=True)
    summary = summarize(comparisons)
    for criterion, measured, met in summary.criteria():
        if met is not None:
            print(f"{'met' if met else 'NOT met':7s} {criterion}: {measured}")
    print(summary.held_out_line())


if __name__ == "__main__":
    main()
