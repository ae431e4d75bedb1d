"""Linux's own BPF congestion controls from its selftests, unmodified, in the simulator
beside the built-in CC they implement.

    .venv/bin/python bench/selftest_ccs.py LINUX/tools/testing/selftests/bpf/progs

The folder holds `bpf_cubic.c` and the `bpf_tracing_net.h` it includes (cclab supplies
`vmlinux.h` and libbpf's headers; the files are GPL-2.0 and stay out of this repository).
Prints one JSON line per scenario: goodput and retransmissions of the source and of the
built-in CC on the same seed (docs/FIDELITY.md, "Users' congestion controls").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import cclab

PAIRS = {"bpf_cubic.c": "cubic"}
SCENARIOS = {f"100mbit_20ms_1bdp_loss{loss}": {"duration_s": 30, "seed": 1, "bottleneck": {"rate_mbps": 100, "rtt_ms": 20, "buffer": "1bdp", "loss": loss}}
             for loss in (0.0, 0.001, 0.01)}  # fmt: skip


def main(folder: Path) -> None:
    for source, builtin in PAIRS.items():
        for name, base in SCENARIOS.items():
            ours, theirs = (cclab.run({**base, "flows": [{"cc": cc}]}).flows.iloc[0] for cc in (str(folder / source), builtin))
            print(json.dumps({"source": source, "against": builtin, "scenario": name,
                              "goodput_mbps": [round(ours.goodput_mbps, 2), round(theirs.goodput_mbps, 2)],
                              "retrans_segments": [int(ours.retrans_segments), int(theirs.retrans_segments)]}))  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
