"""What a simulator run costs end to end (Python API: simulate, parse, build DataFrames):
wall time and peak memory, each scenario in a fresh process.

    .venv/bin/python bench/run_cost.py [NAME ...]

Prints one JSON line per scenario: wall_s, peak RSS above the imported library
(`extra_rss_mib`), data packets, series rows, and what `cclab.engines.budget` estimated for
it. The per-row and per-packet memory figures in cclab/engines/budget.py come from the
`rows_*` and `queue_*` scenarios here (docs/BENCHMARKS.md, "What a run costs").
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

SCENARIOS: dict[str, dict] = {
    # Series memory: a slow link for a long time at fine sampling.
    "rows_queue_1M": {"duration_s": 1000, "bottleneck": {"rate_mbps": 1, "rtt_ms": 20},
                      "flows": [{"cc": "cubic"}], "output": {"queue_sample_interval_ms": 1}},
    "rows_flow_1M": {"duration_s": 100, "bottleneck": {"rate_mbps": 1, "rtt_ms": 20},
                     "flows": [{"cc": "cubic", "count": 10}],
                     "output": {"flow_sample_interval_ms": 1, "queue_sample_interval_ms": 1000}},
    # Packets held at once: a full 10 BDP buffer of CUBIC at 10 Gbit/s, 100 ms (~830k frames).
    "queue_10g_100ms_10bdp": {"duration_s": 20, "bottleneck": {"rate_mbps": 10000, "rtt_ms": 100, "buffer": "10bdp"},
                              "flows": [{"cc": "cubic"}], "output": {"queue_sample_interval_ms": 10}},
    # The memory case: 100 flows, 10 Gbit/s, 200 ms.
    "100_flows_10g_200ms_1bdp_30s": {"duration_s": 30, "bottleneck": {"rate_mbps": 10000, "rtt_ms": 200},
                                     "flows": [{"cc": "cubic", "count": 50}, {"cc": "bbr", "count": 50}]},
    "cubic_1g_25ms_60s": {"duration_s": 60, "bottleneck": {"rate_mbps": 1000, "rtt_ms": 25},
                          "flows": [{"cc": "cubic"}]},
}  # fmt: skip

CHILD = r"""
import json, resource, sys, time
import cclab
from cclab.engines.budget import estimate
spec = cclab.spec.load(json.loads(sys.argv[1]))
base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.monotonic()
result = cclab.run(spec, force=True)
wall_s = time.monotonic() - t0
peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
est = estimate(spec.resolve(), "sim")
print(json.dumps({
    "wall_s": round(wall_s, 2), "peak_rss_mib": round(peak_kib / 1024, 1), "extra_rss_mib": round((peak_kib - base_kib) / 1024, 1),
    "data_packets": result.stats.get("data_packets"),
    "flow_rows": len(result.flow_series), "queue_rows": len(result.queue_series),
    "estimate": {"wall_s": round(est.wall_s, 2), "memory_mib": round(est.memory_bytes / 2**20, 1),
                 "packets": est.data_packets},
}))
"""


def main(names: list[str]) -> None:
    for name in names or list(SCENARIOS):
        t0 = time.monotonic()
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(SCENARIOS[name])], capture_output=True, text=True, check=True)
        row = json.loads(out.stdout)
        row["process_wall_s"] = round(time.monotonic() - t0, 2)
        print(json.dumps({"scenario": name, **row}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
