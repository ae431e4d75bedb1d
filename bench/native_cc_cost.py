"""What a congestion control from C source costs in the simulator against the same algorithm
built in: Linux's Reno from tests/data/cc/reno.bpf.c (built natively with the shim, run in a
child process) and the simulator's own Reno, which make the same run segment for segment.

    .venv/bin/python bench/native_cc_cost.py [REPETITIONS]

Alternates the two, each `cclab.run` timed from the caller (the library comes from the cache
after the first build; the child's start is included), and prints one JSON line per CC:
the median wall time, data segments and segments per second (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import cclab

REPO = Path(__file__).resolve().parent.parent
SPEC = {"duration_s": 60, "seed": 1, "bottleneck": {"rate_mbps": 1000, "rtt_ms": 25, "buffer": "1bdp"}, "flows": [{"cc": "reno"}]}
CCS = {"builtin reno": "reno", "reno.bpf.c (native)": str(REPO / "tests" / "data" / "cc" / "reno.bpf.c")}


def main(repetitions: int) -> None:
    cclab.run({**SPEC, "duration_s": 1, "flows": [{"cc": CCS["reno.bpf.c (native)"]}]})  # builds the library once
    walls: dict[str, list[float]] = {name: [] for name in CCS}
    segments: dict[str, int] = {}
    for _ in range(repetitions):
        for name, cc in CCS.items():
            started = time.perf_counter()
            result = cclab.run({**SPEC, "flows": [{"cc": cc}]})
            walls[name].append(time.perf_counter() - started)
            segments[name] = int(result.flows.data_segments_sent.sum())
    for name in CCS:
        wall = statistics.median(walls[name])
        print(json.dumps({"cc": name, "median_wall_s": round(wall, 3), "data_segments": segments[name],
                          "segments_per_s": round(segments[name] / wall)}))  # fmt: skip


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
