"""The project's BBR ports (crates/cclab-bpf-bbr, what the kernel engine runs where the kernel
lacks a version) in the simulator beside the simulator's own BBR of the same version: goodput
per flow and retransmissions on the same seeds.

    .venv/bin/python bench/bbr_ports_in_sim.py [SEEDS]

Three scenarios (issue 31): one flow at 100 Mbit/s, 20 ms, 1 BDP; four flows in 0.25 BDP; one
flow against CUBIC in 4 BDP, 20 s each. The port is built natively with the simulator's shim
(engines/native_cc.py) and the build parameters the kernel engine gives it; each run goes
through `cclab._sim.run_json` with the port's library as the flow's `native_cc`. Prints a JSON
line per scenario, version and seed, and a summary line per version: the largest difference in
the BBR flows' goodput, together and per flow, in percent of the built-in's (per flow, four flows
sharing a link split it differently once their trajectories part). Figures: docs/FIDELITY.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cclab import _sim
from cclab.engines import native_cc
from cclab.spec import load

REPO = Path(__file__).resolve().parents[1]
PORTS = REPO / "crates" / "cclab-bpf-bbr"
COMMON = {"CCLAB_HZ": "250", "CCLAB_MAX_TCP_HEADER": "320"}
#: version -> (source, its map, build parameters)
VERSIONS = {
    "bbr": ("bbr.bpf.c", {"CCLAB_CA_NAME": "cclab_bbr", "CCLAB_PROBE_BW_GAIN_PERMILLE": "1250"}),
    "bbr2": ("bbr3.bpf.c", {"CCLAB_CA_NAME": "cclab_bbr2", "CCLAB_BBR_V2ALPHA": "1"}),
    "bbr3": ("bbr3.bpf.c", {"CCLAB_CA_NAME": "cclab_bbr3"}),
}
LINK = {"rate_mbps": 100, "rtt_ms": 20}
SCENARIOS = {
    "single_1bdp": ({**LINK, "buffer": "1bdp"}, [{"cc": "BBR"}]),
    "four_flows_0.25bdp": ({**LINK, "buffer": "0.25bdp"}, [{"cc": "BBR", "count": 4}]),
    "against_cubic_4bdp": ({**LINK, "buffer": "4bdp"}, [{"cc": "BBR"}, {"cc": "cubic"}]),
}


def library(version: str) -> str:
    source, defines = VERSIONS[version]
    return str(native_cc.build_port(PORTS / source, defines["CCLAB_CA_NAME"], {**COMMON, **defines}))


def run(version: str, scenario: str, seed: int, port: str | None) -> tuple[list[float], list[int]]:
    link, flows = SCENARIOS[scenario]
    spec = {"duration_s": 20, "seed": seed, "bottleneck": link, "flows": [{**f, "cc": version if f["cc"] == "BBR" else f["cc"]} for f in flows]}
    config = load(spec).resolve()
    if port is not None:
        config["flows"] = [{**f, "native_cc": port} if f["cc"] == version else f for f in config["flows"]]
    result = json.loads(_sim.run_json(json.dumps(config)))
    return [round(f["goodput_mbps"], 2) for f in result["flows"]], [f["retrans_segments"] for f in result["flows"]]


def main(seeds: int) -> None:
    for version in VERSIONS:
        port = library(version)
        worst = worst_total = 0.0
        for scenario in SCENARIOS:
            for seed in range(1, seeds + 1):
                (ours, ours_re), (built_in, built_in_re) = run(version, scenario, seed, port), run(version, scenario, seed, None)
                flows = SCENARIOS[scenario][1]
                bbr_flows = sum(f.get("count", 1) for f in flows if f["cc"] == "BBR")
                for a, b in zip(ours[:bbr_flows], built_in[:bbr_flows], strict=True):
                    worst = max(worst, abs(a - b) / b * 100)
                worst_total = max(worst_total, abs(sum(ours[:bbr_flows]) - sum(built_in[:bbr_flows])) / sum(built_in[:bbr_flows]) * 100)
                print(json.dumps({"version": version, "scenario": scenario, "seed": seed, "goodput_mbps_port": ours, "goodput_mbps_built_in": built_in,
                                  "retrans_port": ours_re, "retrans_built_in": built_in_re}))  # fmt: skip
        print(json.dumps({"version": version, "largest_bbr_goodput_difference_percent": round(worst_total, 2),
                          "largest_per_flow_difference_percent": round(worst, 2)}))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
