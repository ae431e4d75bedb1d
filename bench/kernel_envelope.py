"""Kernel engine: what this machine emulates faithfully, and the Cao et al. headline scenario.

    sudo python bench/kernel_envelope.py headline [--duration-s 60]
    sudo python bench/kernel_envelope.py envelope [--duration-s 10] [--flows 1 10]

`headline`: 500 Mbit/s, 200 ms, 100 KB buffer, CUBIC then BBR (paper: 179.6 / 386.0 Mbit/s).
`envelope`: rate x RTT points with a 1 BDP buffer, BBR; a point is faithful when the run's
validity checks pass (no delay-line drops, lateness p99 < 1% of RTT, no softnet drops,
retransmits match drops, CPU idle >= 10%). Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from cclab.engines.kernel import KernelEngineError, run  # noqa: E402


def config(rate_bps: int, rtt_ns: int, buffer_bytes: int, ccs: list[str], duration_s: float) -> dict:
    return {
        "seed": 1,
        "duration_ns": int(duration_s * 1e9),
        "bottleneck": {"rate_bps": rate_bps, "rtt_ns": rtt_ns, "queue_limit_bytes": buffer_bytes,
                       "queue_limit_packets": None, "loss_probability": 0.0},
        "flows": [{"flow_id": i, "cc": cc, "probe_bw_gain": 1.25, "start_ns": 0, "size_bytes": None,
                   "extra_rtt_ns": 0, "rwnd_bytes": None} for i, cc in enumerate(ccs)],
        "flow_sample_interval_ns": 100_000_000,
        "queue_sample_interval_ns": 5_000_000,
    }  # fmt: skip


def summarize(label: str, cfg: dict, wall_s: float, result: dict) -> dict:
    d = result["provenance"]["delay"]["report"] or {}
    return {
        "label": label,
        "rate_mbps": cfg["bottleneck"]["rate_bps"] / 1e6,
        "rtt_ms": cfg["bottleneck"]["rtt_ns"] / 1e6,
        "buffer_bytes": cfg["bottleneck"]["queue_limit_bytes"],
        "flows": len(cfg["flows"]),
        "goodput_mbps": [round(f["goodput_mbps"], 1) for f in result["flows"]],
        "total_goodput_mbps": round(sum(f["goodput_mbps"] for f in result["flows"]), 1),
        "retrans": sum(f["retrans_segments"] for f in result["flows"]),
        "tbf_drops": result["bottleneck"]["drops"],
        "utilization": round(result["bottleneck"]["utilization"], 3),
        "lateness_p99_us": round(d.get("lateness_ns", {}).get("p99", 0) / 1e3, 1),
        "max_held_acks": max((q["max_held"] for q in d.get("queues", [])), default=0),
        "cpu_idle": round(result["provenance"]["cpu_idle_fraction"] or 0, 3),
        "valid": result["validity"]["valid"],
        "reasons": result["validity"]["reasons"],
        "wall_s": round(wall_s, 1),
    }


def one(label: str, cfg: dict) -> dict:
    t0 = time.monotonic()
    try:
        result = run(cfg)
    except KernelEngineError as error:
        return {"label": label, "refused": error.line}
    return summarize(label, cfg, time.monotonic() - t0, result)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["headline", "envelope"])
    parser.add_argument("--duration-s", type=float, default=None)
    parser.add_argument("--flows", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--rates-mbps", type=int, nargs="+", default=[100, 500, 1000, 1500])
    parser.add_argument("--rtts-ms", type=int, nargs="+", default=[25, 200])
    args = parser.parse_args()
    if args.what == "headline":
        duration = args.duration_s or 60
        for cc in ("cubic", "bbr"):
            cfg = config(500_000_000, 200_000_000, 100_000, [cc], duration)
            print(json.dumps(one(f"headline-{cc}", cfg)), flush=True)
        return
    duration = args.duration_s or 10
    for n in args.flows:
        for rtt in args.rtts_ms:
            for rate in args.rates_mbps:
                bdp = int(rate * 1e6 * rtt / 1e3 / 8)
                cfg = config(rate * 1_000_000, rtt * 1_000_000, bdp, ["bbr"] * n, duration)
                print(json.dumps(one(f"envelope-{n}x-{rate}M-{rtt}ms", cfg)), flush=True)


if __name__ == "__main__":
    main()
