"""Shared config builder and skip rule for the kernel-engine tests (real TCP in namespaces).

Each test calls the engine directly with a hand-built resolved config (docs/ARCHITECTURE.md),
at most 100 Mbit/s and a few seconds. Results of identical configs are shared within a module.
"""

from __future__ import annotations

import copy
import subprocess

import pytest

from cclab.engines.kernel import KernelEngineError, preflight

BASE_CONFIG = {
    "seed": 1,
    "duration_ns": 3_000_000_000,
    "bottleneck": {
        "rate_bps": 50_000_000,
        "rtt_ns": 20_000_000,
        "queue_limit_bytes": 125_000,
        "queue_limit_packets": None,
        "loss_probability": 0.0,
    },
    "flows": [
        {"flow_id": 0, "cc": "cubic", "probe_bw_gain": 1.25, "start_ns": 0, "size_bytes": None,
         "extra_rtt_ns": 0, "rwnd_bytes": None},
    ],
    "flow_sample_interval_ns": 100_000_000,
    "queue_sample_interval_ns": 2_000_000,
}  # fmt: skip


def make_config(flows: list[dict] | None = None, **bottleneck: object) -> dict:
    """BASE_CONFIG with bottleneck fields replaced; `duration_ns` may be passed here too."""
    config = copy.deepcopy(BASE_CONFIG)
    if "duration_ns" in bottleneck:
        config["duration_ns"] = bottleneck.pop("duration_ns")
    config["bottleneck"].update(bottleneck)
    if flows is not None:
        base = BASE_CONFIG["flows"][0]
        config["flows"] = [{**base, "flow_id": i, **f} for i, f in enumerate(flows)]
    return config


def _why_not_runnable() -> str | None:
    try:
        preflight(BASE_CONFIG)
    except KernelEngineError as error:
        return error.line
    return None


SKIP_REASON = _why_not_runnable()
requires_kernel_engine = pytest.mark.skipif(SKIP_REASON is not None, reason=f"kernel engine cannot run: {SKIP_REASON}")


# Reasons a kernel run can be invalid because of the host rather than the scenario: a
# one-off scheduling hiccup of this VM (delay-line lateness, CPU starvation, per-CPU
# backlog overflow). Accounting reasons (retransmits vs drops, vanished segments) are not.
HOST_TIMING_REASONS = ("lateness", "CPU idle", "softnet")


def run_valid(config: dict) -> dict:
    """Runs `config`; if the run is invalid only for host-timing reasons, runs it once more.
    Tests that need a valid run still assert validity on the result."""
    from cclab.engines.kernel import run

    result = run(config)
    if host_timing_only(result["validity"]["reasons"]):
        result = run(config)
    return result


def host_timing_only(reasons: list[str]) -> bool:
    return bool(reasons) and all(any(tag in reason for tag in HOST_TIMING_REASONS) for reason in reasons)


def run_spec_valid(spec: dict):
    """`cclab.run(spec, "kernel")`, once more if invalid only for host-timing reasons (as
    `run_valid`, for tests that go through the public API)."""
    import cclab

    result = cclab.run(spec, "kernel")
    if host_timing_only(result.validity["reasons"]):
        result = cclab.run(spec, "kernel")
    return result


#: 50 Mbit/s, 40 ms, 1 BDP (250 KB), 20 s: the BBRv2/v3 port tests' link, long enough for
#: PROBE_RTTs (every 5 s).
BBR_PORT_SCENARIO = {"rate_bps": 50_000_000, "rtt_ns": 40_000_000, "queue_limit_bytes": 250_000,
                     "duration_ns": 20_000_000_000}  # fmt: skip


def root_qdiscs() -> str:
    return subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True, check=True).stdout


def cclab_struct_ops() -> list[str]:
    """cclab's BPF congestion controls registered now (taken under the run lock: another run
    holds its own CCs only while it holds the lock)."""
    from cclab.engines.kernel import bpf_cc
    from cclab.engines.kernel.runlock import exclusive_run

    with exclusive_run():
        return [e["name"] for e in bpf_cc.list_registered() if bpf_cc.is_bpf_name(e.get("name", ""))]
