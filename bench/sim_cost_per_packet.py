"""What a simulated packet costs, in figures that do not drift with the machine's speed, and
against an earlier commit measured side by side.

    .venv/bin/python bench/sim_cost_per_packet.py                    # events per packet, wall
    .venv/bin/python bench/sim_cost_per_packet.py --instructions     # + instructions per packet
    .venv/bin/python bench/sim_cost_per_packet.py --against d0632ad  # + that commit, pairs alternated

Events per packet come from the simulator's own counters and instructions per packet from
callgrind (valgrind; perf cannot count instructions on this VM): both are the same on any day.
Wall time drifts by up to half over hours here, so `--against REV` builds REV's extension in a
git worktree (cached in target/bench-worktrees) and alternates runs of the two builds, five
pairs per scenario, reporting each build's median and their ratio. Scenarios are configs the
engine takes as resolved (the format of docs/ARCHITECTURE.md), kept to keys every commit since
the receive-window model reads. Figures: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def scenario(rate_bps: int, rtt_ms: int, queue_bytes: int, duration_s: float, ccs: list[str], loss: float = 0.0) -> dict:
    flows = [{"flow_id": i, "cc": cc, "probe_bw_gain": 1.25 if cc == "bbr" else None, "start_ns": 0, "size_bytes": None,
              "extra_rtt_ns": 0, "rwnd_bytes": None, "ecn": False} for i, cc in enumerate(ccs)]  # fmt: skip
    return {
        "seed": 1, "duration_ns": int(duration_s * 1e9), "flows": flows,
        "bottleneck": {"rate_bps": rate_bps, "rtt_ns": rtt_ms * 1_000_000, "queue_limit_bytes": queue_bytes,
                       "queue_limit_packets": None, "loss_probability": loss, "aqm": {"kind": "fifo"}},
        "flow_sample_interval_ns": 100_000_000, "queue_sample_interval_ns": 1_000_000,
        "jitter_ns": 30_700, "stall_per_packet": 1.44e-4,
    }  # fmt: skip


SCENARIOS = {
    # cargo bench's headline (crates/cclab-sim/benches): one CUBIC flow filling 1 Gbit/s.
    "cubic_1g_25ms_1bdp_60s": scenario(1_000_000_000, 25, 3_125_000, 60, ["cubic"]),
    "bbr_1g_25ms_1bdp_60s": scenario(1_000_000_000, 25, 3_125_000, 60, ["bbr"]),
    # Loss recovery under load: BBR in a 100 KB buffer at 200 ms (tens of thousands in flight).
    "bbr_1g_200ms_100KB_20s": scenario(1_000_000_000, 200, 100_000, 20, ["bbr"]),
    "cubic_bbr_100m_20ms_1bdp_60s": scenario(100_000_000, 20, 250_000, 60, ["cubic", "bbr"]),
    # Many flows (the Kfoury and many-flow studies): 100 CUBIC flows sharing 1 Gbit/s, a heap of
    # hundreds of timers and pipe heads.
    "cubic_x100_1g_20ms_1bdp_20s": scenario(1_000_000_000, 20, 2_500_000, 20, ["cubic"] * 100),
}
#: Short versions for callgrind, which runs about 50 times slower.
SHORT_S = 2.0


def load_extension(path: Path) -> ModuleType:
    """A build's `cclab._sim` from its shared library, under a name of its own."""
    spec = importlib.util.spec_from_file_location("_sim", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def current_extension() -> Path:
    from cclab import _sim

    return Path(_sim.__file__)


def build_at(revision: str) -> Path:
    """REV's cclab-py built in a worktree of its own (reused when already built)."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", revision], capture_output=True, text=True, check=True).stdout.strip()
    tree = REPO / "target" / "bench-worktrees" / sha[:12]
    library = tree / "target" / "release" / "lib_sim.so"
    if not library.exists():
        if not tree.exists():
            subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), sha], check=True, capture_output=True)
        print(f"building {sha[:12]}'s extension (once)", file=sys.stderr)
        subprocess.run(["cargo", "build", "--quiet", "--release", "-p", "cclab-py"], cwd=tree, check=True)
    return library


def without_key(config: dict, key: str) -> dict:
    """`config` without `key` at the top, in the bottleneck or in any flow."""
    trimmed = {k: v for k, v in config.items() if k != key}
    trimmed["bottleneck"] = {k: v for k, v in config["bottleneck"].items() if k != key}
    trimmed["flows"] = [{k: v for k, v in flow.items() if k != key} for flow in config["flows"]]
    return trimmed


def run_once(extension: ModuleType, config: dict) -> tuple[float, dict]:
    """The simulation's own wall time (its `sim_wall_s` where the build reports it, else the
    call's, which adds the JSON of the result) and its stats. Keys an older build does not
    know (it refuses unknown fields) are left out for it: it runs without that mechanism."""
    for _ in range(10):
        started = time.perf_counter()
        try:
            try:
                text = extension.run_json(json.dumps(config), None)
            except TypeError:  # builds before progress reporting take the config alone
                text = extension.run_json(json.dumps(config))
            output = json.loads(text)
        except ValueError as error:
            unknown = str(error).split("unknown field `", 1)
            if len(unknown) < 2:
                raise
            config = without_key(config, unknown[1].split("`", 1)[0])
            continue
        return output["stats"].get("sim_wall_s", time.perf_counter() - started), output["stats"]
    raise RuntimeError("too many fields unknown to this build")


CALLGRIND_CHILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from sim_cost_per_packet import load_extension, run_once
module = load_extension(Path(sys.argv[1]))
config = json.loads(sys.argv[2])
if config["duration_ns"]:
    run_once(module, config)
"""


def instructions(library: Path, config: dict) -> int:
    """Instructions callgrind counts for one simulation (the process with it, minus without)."""

    def counted(cfg: dict) -> int:
        with tempfile.TemporaryDirectory() as folder:
            out = Path(folder) / "callgrind.out"
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-c", CALLGRIND_CHILD,
                            str(library), json.dumps(cfg), str(Path(__file__).parent)], check=True, capture_output=True)  # fmt: skip
            for line in out.read_text().splitlines():
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
        raise RuntimeError("callgrind wrote no total")

    return counted(config) - counted({**config, "duration_ns": 0})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="scenarios (default: all)")
    parser.add_argument("--instructions", action="store_true", help="instructions per packet by callgrind (short runs)")
    parser.add_argument("--against", metavar="REV", help="an earlier commit, built and run side by side")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--noiseless", action="store_true", help="jitter_ns and stall_per_packet 0 (builds without them run so)")
    args = parser.parse_args()
    builds = {"HEAD": current_extension()}
    if args.against:
        builds[args.against] = build_at(args.against)
    extensions = {name: load_extension(path) for name, path in builds.items()}
    for name in args.names or list(SCENARIOS):
        config = {**SCENARIOS[name], "jitter_ns": 0, "stall_per_packet": 0.0} if args.noiseless else SCENARIOS[name]
        row: dict = {"scenario": name}
        walls: dict[str, list[float]] = {build: [] for build in extensions}
        packets: dict[str, int] = {}
        for _ in range(args.pairs if args.against else 1):
            for build, extension in extensions.items():  # alternated: the machine drifts
                wall_s, stats = run_once(extension, config)
                walls[build].append(wall_s)
                packets[build] = stats["data_packets"]
                if build == "HEAD":
                    row.update(packets=stats["data_packets"], events_per_packet=round(stats["events_processed"] / stats["data_packets"], 3))
                else:
                    row[f"events_per_packet_{build}"] = round(stats["events_processed"] / stats["data_packets"], 3)
        for build, values in walls.items():
            row[f"wall_s_{build}"] = round(statistics.median(values), 3)
            row[f"packets_per_s_{build}"] = round(packets[build] / statistics.median(values))
        if args.against:
            row["ratio_head_to_" + args.against] = round(row["wall_s_HEAD"] / row[f"wall_s_{args.against}"], 3)
        if args.instructions:
            short = {**config, "duration_ns": int(SHORT_S * 1e9)}
            for build, path in builds.items():
                _, stats = run_once(extensions[build], short)
                row[f"instructions_per_packet_{build}"] = round(instructions(path, short) / stats["data_packets"])
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
