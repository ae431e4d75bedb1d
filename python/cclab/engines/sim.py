"""The `sim` engine: the deterministic Rust simulator behind `cclab._sim.run_json`."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from cclab.errors import EngineError, EngineUnavailable
from cclab.results import RunResult
from cclab.spec.host import effective
from cclab.spec.noise import NOISE_MODELS
from cclab.spec.noise import effective as effective_noise

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
        """Refuses, in one line, what the simulator cannot run (before anything is printed):
        a user's C source it cannot build names the flow, the file and the line."""
        self._native_libraries(config)

    @staticmethod
    def _native_libraries(config: dict) -> dict[int, str]:
        """The built library of each flow whose CC is a user's C source, by flow id."""
        from cclab.engines import native_cc

        libraries = {}
        for flow in config["flows"]:
            if "bpf_source" in flow:
                try:
                    libraries[flow["flow_id"]] = str(native_cc.build(flow["bpf_source"]))
                except native_cc.NativeBuildError as error:
                    raise native_cc.NativeBuildError(f"flows[{flow['flow_id']}].cc: {error.line}") from None
        return libraries

    def run(self, scenario: Scenario, progress: RunProgress | None = None) -> RunResult:
        """Ctrl-C stops the simulation within a tenth of a second (KeyboardInterrupt)."""
        config = scenario.resolve()
        libraries = self._native_libraries(config)
        try:
            from cclab import _sim
        except ImportError as error:
            raise EngineUnavailable(f"sim engine: the Rust extension is not built ({error}); run `make install`") from None
        if not hasattr(_sim, "run_json"):
            raise EngineUnavailable("sim engine: cclab._sim has no run_json; rebuild it with `make install`")
        if libraries:
            output = _run_with_native(config, libraries)
        else:
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
        noise = effective_noise(config.get("noise"), jitter_ns)
        kinds = [
            *(["seeded exponential lateness of each ACK and the handshake's SYN-ACK, in order, over the kernel path's fixed floor (crates/cclab-sim/src/jitter.rs KERNEL_PATH_FLOOR_NS)"] if jitter_ns else []),
            *(model for name, model in NOISE_MODELS.items() if noise[name]),
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
            **(_native_provenance(config, libraries) if libraries else {}),
            "jitter": {"ack_mean_ns": jitter_ns, "stall_per_packet": stall_per_packet, **noise, "model": model},
            "receive_window": window,
            "host_settings": effective(config.get("host")),
        }
        return RunResult.from_engine_output(result, spec=config, engine=self.name)


def _run_with_native(config: dict, libraries: dict[int, str]) -> str:
    """The simulation in a child process (engines/sim_child.py): a user's library that
    crashes ends that process, and this run fails in one line; the caller goes on."""
    from cclab.engines import sim_child

    flows = [{**{k: v for k, v in f.items() if k != "bpf_source"}, "native_cc": libraries[f["flow_id"]]} if f["flow_id"] in libraries else f
             for f in config["flows"]]  # fmt: skip
    sources = [f["cc"] for f in config["flows"] if f["flow_id"] in libraries]
    try:
        return sim_child.run_in_child([], json.dumps({**config, "flows": flows}), sources, "the simulator")
    except sim_child.ChildFailed as failed:
        raise EngineError(f"sim engine: {failed}{'; this run failed, nothing else' if failed.crashed else ''}") from None


def _native_provenance(config: dict, libraries: dict[int, str]) -> dict:
    """What ran for each user's source: built natively with the shim (its hash), as
    cc_implementation says on the kernel engine."""
    from cclab.engines import native_cc

    shim = native_cc.shim_digest()
    detail = {}
    for flow in config["flows"]:
        if flow["flow_id"] in libraries:
            source = flow["bpf_source"]
            detail[flow["cc"]] = {"source": source["path"], "sha256": source["sha256"], "struct_ops": source["struct_ops"],
                                  "library": libraries[flow["flow_id"]], "shim_sha256": shim}  # fmt: skip
    return {"cc_implementation": dict.fromkeys(detail, "bpf-source-native"), "cc_implementation_detail": detail}
