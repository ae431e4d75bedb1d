"""The `sim` engine: the deterministic Rust simulator behind `cclab._sim.run_json`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cclab.errors import EngineError, EngineUnavailable
from cclab.results import RunResult

if TYPE_CHECKING:
    from cclab.engines.base import RunProgress
    from cclab.spec import Scenario


class SimEngine:
    name = "sim"

    @property
    def model_version(self) -> str:
        try:
            from cclab import _sim
        except ImportError as error:
            raise EngineUnavailable(f"sim engine: the Rust extension is not built ({error}); run `make install`") from None
        return f"sim-{_sim.model_version()}"

    def check(self, config: dict) -> None:
        """Refuses, in one line, what the simulator cannot run (before anything is printed)."""
        for flow in config["flows"]:
            if "bpf_source" in flow:
                # Issue 31's second half: the simulator's shim for BPF C sources is not built yet.
                raise EngineUnavailable(f"flows[{flow['flow_id']}].cc: a congestion control from C source ({flow['cc']}) "
                                        "runs on the kernel engine only; the simulator cannot load it yet")  # fmt: skip

    def run(self, scenario: Scenario, progress: RunProgress | None = None) -> RunResult:
        """Ctrl-C stops the simulation within a tenth of a second (KeyboardInterrupt)."""
        config = scenario.resolve()
        self.check(config)
        try:
            from cclab import _sim
        except ImportError as error:
            raise EngineUnavailable(f"sim engine: the Rust extension is not built ({error}); run `make install`") from None
        if not hasattr(_sim, "run_json"):
            raise EngineUnavailable("sim engine: cclab._sim has no run_json; rebuild it with `make install`")
        try:
            total_s = config["duration_ns"] / 1e9
            observer = None if progress is None else (lambda now_ns, _events: progress(now_ns / 1e9, total_s))
            output = _sim.run_json(json.dumps(config), observer)
        except (ValueError, RuntimeError) as error:
            raise EngineError(f"sim engine: {error}") from None
        try:
            result = json.loads(output)
        except json.JSONDecodeError as error:
            raise EngineError(f"sim engine: result is not JSON: {error}") from None
        jitter_ns, stall_per_packet = config.get("jitter_ns", 0), config.get("stall_per_packet", 0.0)
        kinds = [
            *(["seeded exponential lateness of each ACK and the handshake's SYN-ACK, in order, over the kernel path's fixed floor (crates/cclab-sim/src/jitter.rs KERNEL_PATH_FLOOR_NS)", "a seeded phase of the timestamp option's millisecond clock (crates/cclab-sim/src/tcp/rtt.rs TsClock)", "an idle machine's wake-up: 167 us for an ACK after 5 ms without a packet, and the reader's seeded wake after 5 ms without data (crates/cclab-sim/src/wake.rs)"] if jitter_ns else []),
            *(["seeded Pareto-tailed stalls of the bottleneck's dequeue (crates/cclab-sim/src/stall.rs)"] if stall_per_packet else []),
        ]
        model = "; ".join(kinds) or "none: the noiseless model"
        window = (
            "Linux 6.18 receive-buffer autotuning and window selection, 2288 B of memory per segment "
            "(crates/cclab-sim/src/tcp/receive_window.rs)"
            if config.get("receive_window_autotuning", True)
            else "none: the receiver never limits its sender"
        )
        result["provenance"] = {
            **result.get("provenance", {}),
            "jitter": {"ack_mean_ns": jitter_ns, "stall_per_packet": stall_per_packet, "model": model},
            "receive_window": window,
        }
        return RunResult.from_engine_output(result, spec=config, engine=self.name)
