"""The kernel engine's timing noise, which the simulator's default `jitter_us` stands for.

    sudo .venv/bin/python bench/kernel_jitter.py [DIR ...] [--runs N]

Summarises the delay line's release lateness (each ACK's time past its due time) over every
kernel result under the DIRs (e.g. a `cclab validate` output's runs/), after `--runs N` fresh
10 s kernel runs of two CUBIC flows at 20 and 40 ms if asked (root). Prints the distribution
of the runs' mean, p50 and p99, and the exponential's fit: its mean is the median run's mean,
and an exponential's p50/mean (0.69) and p99/mean (4.6) say whether the shape fits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import cclab  # noqa: E402


def lateness_of_runs(dirs: list[Path]) -> list[dict[str, float]]:
    found = []
    for directory in dirs:
        for path in sorted(directory.rglob("result.json")):
            provenance = json.loads(path.read_text()).get("provenance", {})
            report = (provenance.get("delay") or {}).get("report") if provenance.get("engine") == "kernel" else None
            if report and report.get("packets"):
                found.append(report["lateness_ns"])
    return found


def fresh_runs(count: int, out: Path) -> None:
    spec = {
        "duration_s": 10,
        "engine": "kernel",
        "bottleneck": {"rate_mbps": 50, "rtt_ms": 20, "buffer": "1bdp"},
        "flows": [{"cc": "cubic"}, {"cc": "cubic", "extra_rtt_ms": 20}],
    }
    for seed in range(1, count + 1):
        cclab.run({**spec, "seed": seed}).write(out / "runs" / str(seed))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--runs", type=int, default=0, help="fresh kernel runs first (root)")
    args = parser.parse_args()
    dirs = list(args.dirs)
    if args.runs:
        scratch = Path(tempfile.mkdtemp(prefix="cclab-jitter-"))
        fresh_runs(args.runs, scratch)
        dirs.append(scratch)
    runs = lateness_of_runs(dirs)
    if not runs:
        sys.exit("no kernel result with a delay-line report under " + ", ".join(map(str, dirs)))
    summary = {}
    for key in ("mean", "p50", "p99"):
        values = [run[key] for run in runs]
        summary[key + "_us"] = {"min": min(values) / 1e3, "median": statistics.median(values) / 1e3, "max": max(values) / 1e3}
    mean = summary["mean_us"]["median"]
    summary["runs"] = len(runs)
    summary["exponential_fit"] = {
        "mean_us": round(mean, 1),
        "p50_over_mean": round(summary["p50_us"]["median"] / mean, 2),  # exponential: 0.69
        "p99_over_mean": round(summary["p99_us"]["median"] / mean, 2),  # exponential: 4.61
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
