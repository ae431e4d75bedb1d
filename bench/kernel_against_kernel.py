"""Two samples of a validation set's runs compared with `cclab validate`'s own criteria.

    .venv/bin/python bench/kernel_against_kernel.py DIR_A DIR_B [--set rtt] [--runs 10]
        [--engine-a kernel] [--engine-b kernel]

Each DIR is a `cclab validate --out` folder. Sample A takes the simulator's place, so two
kernel samples say what a perfect simulator would score against a sample of that many runs:
the floor under every criterion (docs/history/FIDELITY-investigations.md, "the kernel against itself"). With
`--engine-a sim` it scores one folder's simulator runs against another folder's kernel runs.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from cclab.fidelity.compare import compare_case, summarize  # noqa: E402
from cclab.fidelity.sets import get_set  # noqa: E402
from cclab.results import RunResult  # noqa: E402


def runs_by_case(directory: Path, engine: str, runs: int) -> dict[str, list[RunResult]]:
    found: dict[str, list[RunResult]] = collections.defaultdict(list)
    for meta in sorted(directory.glob("runs/*/run.json")):
        run = json.loads(meta.read_text(encoding="utf-8"))
        if run["engine"] == engine and run["repetition"] < runs:
            found[run["axis_values"]["case"]].append(RunResult.read(meta.parent))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir_a", type=Path)
    parser.add_argument("dir_b", type=Path)
    parser.add_argument("--set", default="rtt")
    parser.add_argument("--runs", type=int, default=10, help="the first N repetitions of each case")
    parser.add_argument("--engine-a", default="kernel")
    parser.add_argument("--engine-b", default="kernel")
    args = parser.parse_args()
    a = runs_by_case(args.dir_a, args.engine_a, args.runs)
    b = runs_by_case(args.dir_b, args.engine_b, args.runs)
    comparisons = [compare_case(case, a[case.name], b[case.name]) for case in get_set(args.set).cases if a.get(case.name) and b.get(case.name)]
    if not comparisons:
        sys.exit(f"no case has runs of both samples in {args.dir_a} ({args.engine_a}) and {args.dir_b} ({args.engine_b})")
    s = summarize(comparisons)
    print(json.dumps({
        "cases": s.cases,
        "goodput_median_error": round(s.goodput_median_error, 4),
        "goodput_p90_error": round(s.goodput_p90_error, 4),
        "held_out_goodput_median_error": round(s.held_out_goodput_median_error, 4),
        "held_out_goodput_p90_error": round(s.held_out_goodput_p90_error, 4),
        "shares_within_5_points": round(s.share_within_share, 3),
        "worst_share_error_points": round(s.share_max_error_pts, 1),
        "iqr_within_2x": round(s.spread_within_share, 3),
        "iqr_within_2x_for_a_perfect_simulator": round(s.spread_null_within_share, 3),
        "spreads_that_differ": f"{s.spread_differing_cases} of {s.spread_tested_cases}",
    }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
