"""What the bench tools that trace kernel runs share: a scenario file run several times, and
the folder the runs go to (router_capture, kernel_bbr_trace, kernel_receiver_trace)."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any


def parser(doc: str, *, duration_s: float | None = None) -> argparse.ArgumentParser:
    """SCENARIO.toml --out DIR [--runs 3] [--duration S]; without a default duration the
    scenario's own is kept."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--runs", type=int, default=3)
    default = "the scenario's own" if duration_s is None else f"{duration_s:g}"
    p.add_argument("--duration", type=float, default=duration_s, help=f"seconds (default: {default}; iperf3 runs whole seconds)")
    return p


def spec_of(args: argparse.Namespace) -> dict[str, Any]:
    """The scenario file's spec, with --duration applied."""
    spec = tomllib.loads(args.scenario.read_text(encoding="utf-8"))
    if args.duration is not None:
        spec["duration_s"] = args.duration
    return spec
