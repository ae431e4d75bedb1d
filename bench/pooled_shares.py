"""Flow-group shares of the simulator against several kernel samples pooled, with more seeds.

    .venv/bin/python bench/pooled_shares.py --kernel DIR [DIR ...] --starts DIR [--seeds 2]

Each DIR is a `cclab validate --out` folder. The kernel runs of every `--kernel` folder are
pooled (20 runs from two samples of ten). The simulator runs each case once per simulator run
of the `--starts` folder (keeping its paired start times), with that run's seed and `--seeds - 1`
more, on the installed simulator. Per case: each flow group's (CC and extra RTT) median share of
the goodput on both engines, and the largest difference in points. With ten runs a side, the
share error of a case moves by several points from one sample of seeds to the next
(docs/FIDELITY.md, "Shares over more runs").
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import cclab  # noqa: E402
from cclab.spec import Scenario  # noqa: E402

SEED_STRIDE = 1000  # extra seeds: far from validate's own


def group_shares(resolved_flows: list[dict], goodputs_mbps: list[float]) -> dict[tuple[str, int], float]:
    groups: dict[tuple[str, int], float] = collections.defaultdict(float)
    for flow, goodput in zip(resolved_flows, goodputs_mbps):
        groups[(flow["cc"], flow.get("extra_rtt_ns", 0))] += goodput
    total = sum(groups.values()) or 1.0
    return {group: value / total for group, value in groups.items()}


def runs_of(directory: Path, engine: str) -> dict[str, list[tuple[dict, dict]]]:
    """(scenario, result) of each valid run of `engine`, by case."""
    found: dict[str, list[tuple[dict, dict]]] = collections.defaultdict(list)
    for meta_path in sorted(directory.glob("runs/*/run.json")):
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        result_path = meta_path.with_name("result.json")
        if meta.get("engine") != engine or not result_path.exists():
            continue
        result = json.loads(result_path.read_text(encoding="utf-8"))
        if (result.get("validity") or {}).get("valid", True):
            found[meta["axis_values"].get("case")].append((meta["scenario"], result))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", type=Path, nargs="+", required=True)
    parser.add_argument("--starts", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    kernel: dict[str, list[dict]] = collections.defaultdict(list)
    for directory in args.kernel:
        for case, runs in runs_of(directory, "kernel").items():
            for scenario, result in runs:
                flows = Scenario.model_validate(scenario).resolve()["flows"]
                kernel[case].append(group_shares(flows, [f["goodput_mbps"] for f in result["flows"]]))
    starts = runs_of(args.starts, "sim")
    worst = []
    for case in sorted(kernel):
        groups = sorted(kernel[case][0])
        if len(groups) < 2 or case not in starts:
            continue
        sim = []
        for scenario, _ in starts[case]:
            for k in range(args.seeds):
                seeded = Scenario.model_validate(dict(scenario, seed=scenario.get("seed", 1) + k * SEED_STRIDE))
                result = cclab.run(seeded, "sim")
                sim.append(group_shares(seeded.resolve()["flows"], list(result.flows["goodput_mbps"])))
        kernel_median = {g: statistics.median(run[g] for run in kernel[case]) for g in groups}
        sim_median = {g: statistics.median(run[g] for run in sim) for g in groups}
        error = 100 * max(abs(sim_median[g] - kernel_median[g]) for g in groups)
        worst.append(error)
        shares = " ".join(f"{100 * kernel_median[g]:.1f}/{100 * sim_median[g]:.1f}" for g in groups)
        print(f"{case:36s} kernel/sim shares (%): {shares}   error {error:.1f} points  ({len(kernel[case])} kernel runs, {len(sim)} simulator runs)")
    if worst:
        print(f"cases within 5 points: {sum(e <= 5 for e in worst)} of {len(worst)}; worst {max(worst):.1f}")


if __name__ == "__main__":
    main()
