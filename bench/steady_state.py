"""How long until BBR against CUBIC settles: the issue's scenario on the simulator.

    .venv/bin/python bench/steady_state.py [--engine sim|kernel]

One BBR and one CUBIC flow at 50 Mbit/s, 30 ms, a 16 BDP buffer: BBR's share of the
goodput and the steady-state verdict for growing durations, without and with a warm-up
of half the run. Prints one JSON line per run (a few seconds in all on the simulator;
the kernel engine runs in real time, about 35 minutes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import cclab  # noqa: E402

RUNS = [(60, 0), (120, 0), (120, 60), (600, 0), (600, 300), (1000, 600)]


def spec(duration_s: float, warmup_s: float) -> dict:
    return {
        "duration_s": duration_s,
        "bottleneck": {"rate_mbps": 50, "rtt_ms": 30, "buffer": "16bdp"},
        "flows": [{"cc": "bbr"}, {"cc": "cubic"}],
        "output": {"warmup_s": warmup_s},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="sim", choices=["sim", "kernel"])
    args = parser.parse_args()
    for duration_s, warmup_s in RUNS:
        start = time.monotonic()
        result = cclab.run(spec(duration_s, warmup_s), engine=args.engine)
        goodput = result.flows.set_index("cc")["goodput_mbps"]
        state = result.steady_state
        print(json.dumps({
            "duration_s": duration_s, "warmup_s": warmup_s, "bbr_share": round(goodput["bbr"] / goodput.sum(), 3),
            "converged": state["converged"], "share_drift_pts": state["share_drift_pts"],
            "startup_bias_pts": state["startup_bias_pts"], "wall_s": round(time.monotonic() - start, 2),
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
