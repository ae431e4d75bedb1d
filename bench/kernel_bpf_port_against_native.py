"""The BPF port of tcp_bbr.c at Linux's gain against the kernel's own `bbr`, on the kernel engine.

    sudo .venv/bin/python bench/kernel_bpf_port_against_native.py [--runs 3] [--duration-s 15]

Two scenarios (50 Mbit/s, 40 ms, 1 BDP; without loss and at 2% random loss), each run
natively and with the port forced (CCLAB_KERNEL_BBR_PORT=1), `--runs` times. Prints each
run's goodput, retransmissions and mean RTT, and the port's median goodput error against the
native median. This is the port's fidelity proof; it takes real time (about 4 x runs x
(duration + 3) s), so it lives here rather than in the test suite. Figures: docs/FIDELITY.md
("The BPF port of BBRv1 against the kernel's").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

import cclab  # noqa: E402
from cclab.engines.kernel.bpf_cc import FORCE_PORT_ENV  # noqa: E402


def scenario(loss: float, duration_s: float) -> dict:
    return {
        "duration_s": duration_s,
        "bottleneck": {"rate_mbps": 50, "rtt_ms": 40, "buffer": "1bdp", "loss": loss},
        "flows": [{"cc": "bbr"}],
    }


def one_run(loss: float, duration_s: float, port: bool) -> dict:
    if port:
        os.environ[FORCE_PORT_ENV] = "1"
    else:
        os.environ.pop(FORCE_PORT_ENV, None)
    result = cclab.run(scenario(loss, duration_s), engine="kernel")
    flow = result.flows.iloc[0]
    return {
        "valid": bool((result.validity or {}).get("valid")),
        "goodput_mbps": float(flow["goodput_mbps"]),
        "retrans": int(flow["retrans_segments"]),
        "rtt_mean_ms": float(flow["rtt_mean_ms"]),
        "bpf": list(result.provenance.get("bpf_congestion_controls") or []),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration-s", type=float, default=15.0)
    args = parser.parse_args()
    print("| loss | implementation | run | valid | goodput Mbit/s | retrans | RTT mean ms |")
    print("|---|---|---|---|---|---|---|")
    for loss in (0.0, 0.02):
        medians = {}
        for port in (False, True):
            name = "port (cclab_bbr1250)" if port else "native bbr"
            goodputs = []
            for i in range(args.runs):
                r = one_run(loss, args.duration_s, port)
                goodputs.append(r["goodput_mbps"])
                print(f"| {loss:.0%} | {name} | {i} | {r['valid']} | {r['goodput_mbps']:.2f} | {r['retrans']} | {r['rtt_mean_ms']:.1f} |")
            medians[port] = statistics.median(goodputs)
        error = (medians[True] - medians[False]) / medians[False]
        print(f"\nloss {loss:.0%}: median goodput native {medians[False]:.2f}, port {medians[True]:.2f} Mbit/s ({error:+.1%})\n")


if __name__ == "__main__":
    main()
