"""The `kernel` engine: real Linux TCP in network namespaces.

    run(resolved_config, *, progress=None) -> result dict (docs/ARCHITECTURE.md) with
        extra keys `provenance` and `validity` = {"valid": bool, "reasons": [...]}
    preflight(resolved_config) -> None, or KernelEngineError with one line

Topology: one sender namespace per flow, a router with tbf on its egress towards one
receiver namespace; the RTT is added to the ACK direction, per flow, by sch_netem on the
router's interface towards each sender where the kernel has netem, else by the native
NFQUEUE delay line (crates/cclab-delayline). Choose with the resolved config's
`delay_mechanism` or $CCLAB_DELAY = auto | netem | delayline (default auto; netem.py).
Random loss is an iptables statistic rule on the data direction with either mechanism.
See docs/KERNEL_TESTBED.md for the why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cclab.engines.kernel.engine import run
from cclab.engines.kernel.errors import KernelEngineError
from cclab.engines.kernel.preflight import preflight

if TYPE_CHECKING:
    from cclab.engines.base import RunProgress
    from cclab.results import RunResult
    from cclab.spec import Scenario

__all__ = ["KernelEngine", "KernelEngineError", "preflight", "run"]


class KernelEngine:
    """Adapter for cclab.engines.base's registry: a Scenario in, a RunResult out."""

    name = "kernel"
    #: 2: sender sockets start under reno, so CUBIC no longer inherits BBR's pacing.
    #: 3: finite flows complete: a receiver reads every byte, FCT from the data SYN to the
    #: last byte's arrival, flows still going at the end of the run are stopped there.
    #: 4: each data SYN leaves at its flow's start time (iperf3 launched its control
    #: phase early); the SACK-aware in-flight count.
    #: 5: a bulk flow's first data byte leaves one path RTT after its start (its SYN one
    #: RTT before), as in the simulator.
    #: 6: no cc_mode for samples taken before iperf3 switched the socket to the flow's CC.
    model_version = "kernel-6"

    def check(self, config: dict) -> None:
        """The refusals that need no run: host settings this host cannot give (preflight.check_host)."""
        from cclab.engines.kernel.preflight import check_host

        check_host(config)

    def run(self, scenario: Scenario, progress: RunProgress | None = None) -> RunResult:
        from cclab.results import RunResult

        config = scenario.resolve()

        def report(phase: dict) -> None:
            # The engine reports phases; the bar counts the real seconds of the "running" one.
            if progress is not None and phase.get("phase") == "running":
                progress(phase.get("elapsed_s", 0.0), phase["total_s"])

        result = run(config, progress=report)
        return RunResult.from_engine_output(result, spec=config, engine=self.name)
