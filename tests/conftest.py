"""Shared helpers: running the real `cclab` command, and a constructed engine result.

The constructed result stands in for an engine only in tests of storage and rendering;
the simulator's behaviour is tested end to end in test_sim_e2e.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

#: The files that keep a worker busiest, longest first (CPU seconds each file took alone,
#: 2026-12-02: Ray 55 s of wall, the cao/rebbr/cliff studies 50, the many-flow studies 33,
#: sweeps 19, steady state 16, the AQM studies 13, budgets 12, the CLI 11, the settings study
#: 11): with a file to a worker, one of them started last would leave the other core idle at
#: the end. `make test` passes --no-loadscope-reorder, or xdist would order files by their
#: number of tests instead.
LONGEST_FILES = ("test_sweep_ray.py", "test_studies_cao_rebbr_cliff.py", "test_studies_many_flows.py", "test_sweep_run.py",
                 "test_steady_state.py", "test_studies_aqm.py", "test_run_budget.py", "test_cli.py", "test_studies_settings.py")  # fmt: skip

def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, the rest in their usual order (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FILES)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A kernel test whose behaviour assertion fails on a run late for host timing is skipped,
    naming both (kernelcase.assert_sound says why); on a run on time it fails."""
    if item.path.parent.name != "kernel":
        return (yield)
    import kernelcase

    kernelcase.LATE_RUNS.clear()
    try:
        return (yield)
    except AssertionError as failure:
        if not kernelcase.LATE_RUNS:
            raise
        late = "; ".join(dict.fromkeys(kernelcase.LATE_RUNS))
        pytest.skip(f"host timing cannot judge this run ({late}): {str(failure).splitlines()[0]}")


VALID_SPEC = """\
duration_s = 5
seed = 7

[bottleneck]
rate_mbps = 50
rtt_ms = 25
buffer = "1bdp"
loss = 0.0

[[flows]]
cc = "cubic"
count = 1
start_s = 0.0
"""


def with_default_sigint() -> None:
    """`preexec_fn` for a child a test interrupts: SIGINT back to its default. A shell that
    starts the test run in the background (`make test &`) leaves SIGINT ignored in every
    child, and Python then never raises KeyboardInterrupt; Ctrl-C at a terminal always
    reaches a foreground job with the default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `cclab` as a user would: a separate process, stdout and stderr kept apart."""
    return subprocess.run(
        [sys.executable, "-m", "cclab", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
        check=False,
    )


@pytest.fixture
def write_spec(tmp_path: Path):
    def write(text: str, name: str = "spec.toml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


def constructed_engine_output(n_flows: int = 2) -> dict[str, Any]:
    """A small result object shaped like ARCHITECTURE.md's, with nulls where CCs lack values."""
    flows = [
        {
            "flow_id": i, "cc": "cubic" if i == 0 else "bbr", "start_s": 0.0, "end_s": 10.0,
            "goodput_mbps": 40.5 + i, "bytes_delivered": 50_625_000 + i, "bytes_sent": 51_000_000,
            "data_segments_sent": 35_220, "retrans_segments": 12 + i, "lost_segments": 12,
            "queue_drop_segments": 12, "random_loss_segments": 0, "rto_count": 0,
            "rtt_min_ms": 25.1, "rtt_mean_ms": 40.2, "rtt_p50_ms": 39.0, "rtt_p95_ms": 49.9, "rtt_max_ms": 50.3,
            "fct_s": None if i == 0 else 3.25, "completed": i != 0,
            "ecn": i == 1, "ce_marks_received": 0 if i == 0 else 7, "aqm_drop_segments": 0,
            "rwnd_limited_ms": 0.0 if i == 0 else 152.0, "sndbuf_limited_ms": 0.0 if i == 0 else 37.5,
        }
        for i in range(n_flows)
    ]
    times = [0.1, 0.1, 0.2, 0.2]
    return {
        "flows": flows,
        "bottleneck": {
            "utilization": 0.97, "drops": 12, "random_losses": 0,
            "queue_limit_bytes": 156250, "queue_limit_packets": None,
            "queue_mean_bytes": 80000.5, "queue_p10_bytes": 1514, "queue_p50_bytes": 78000,
            "queue_p95_bytes": 150000, "queue_max_bytes": 156000,
        },
        "flow_series": {
            "time_s": times, "flow_id": [0, 1, 0, 1], "throughput_mbps": [20.0, 21.0, 22.5, 23.0],
            "cwnd_pkts": [10, 20, 30, 40], "pacing_rate_mbps": [None, 50.0, None, 48.0],
            "srtt_ms": [26.0, 27.0, 30.0, 31.0], "inflight_pkts": [10, 18, 29, 35],
            "bbr_bw_mbps": [None, 45.0, None, 46.0], "bbr_min_rtt_ms": [None, 25.0, None, 25.0],
            "cc_mode": [None, "STARTUP", None, "DRAIN"], "retrans_segments": [0, 0, 1, 2],
        },
        "queue_series": {"time_s": [0.001, 0.002], "queue_bytes": [0, 3028], "drops": [0, 1], "utilization": [0.5, 1.0], "ce_marks": [0, 2]},
        "events": {"time_s": [0.002, 0.3], "flow_id": [None, 1], "kind": ["queue_drop", "bbr_state"], "detail": ["full", "DRAIN"]},
        "stats": {"events_processed": 1234, "data_packets": 70440, "sim_wall_s": 0.01},
    }
