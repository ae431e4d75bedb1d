"""The Python face of cclab: run a scenario, get DataFrames.

    >>> import cclab
    >>> result = cclab.run("examples/cubic_100mbit_20ms_1bdp.toml")
    >>> result.flows[["cc", "goodput_mbps"]]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cclab.analysis.steady import why_not_converged
from cclab.engines import budget, get_engine
from cclab.engines.base import RunProgress
from cclab.errors import CclabError
from cclab.results import RunResult
from cclab.spec import Scenario, load


def run(
    spec: Scenario | Mapping[str, Any] | str | os.PathLike[str],
    engine: str | None = None,
    *,
    force: bool = False,
    progress: RunProgress | None = None,
) -> RunResult:
    """Run a scenario on `engine` (default: the spec's `engine`, itself "sim" by default).

    The run's cost is estimated first (`cclab.engines.budget`): past the soft limits it is
    refused with `RunTooCostly` unless `force`. `progress(done_s, total_s)` is called as the
    run advances (simulated seconds on the simulator, real ones on the kernel).
    """
    scenario = load(spec)
    runner = get_engine(engine or scenario.engine)
    budget.check(budget.estimate(scenario.resolve(), runner.name), force=force)
    return runner.run(scenario, progress=progress)


#: --until-steady without a cap: at most this many times the scenario's duration.
UNTIL_STEADY_DEFAULT_CAP_FACTOR = 16


@dataclass
class SteadyRun:
    """What `run_until_steady` settled on: the last run, every duration tried and its verdict."""

    result: RunResult
    durations_s: list[float]
    converged: bool | None

    @property
    def settled_duration_s(self) -> float:
        return self.durations_s[-1]


def run_until_steady(
    spec: Scenario | Mapping[str, Any] | str | os.PathLike[str],
    *,
    max_duration_s: float | None = None,
    engine: str | None = None,
    force: bool = False,
    progress: RunProgress | None = None,
    notify: Callable[[str], None] | None = None,
) -> SteadyRun:
    """Run the scenario, doubling duration_s (same seed, same warm-up) until its steady-state
    verdict says converged or the next run would pass `max_duration_s` (default 16 times the
    scenario's duration; the last run is then exactly the cap). Simulator only: the kernel
    engine runs in real time, where doubling a minute-long run is a person's decision.
    Each run is sized first as `run` sizes it (`force` lifts the soft limits); `progress`
    follows each run, `notify` gets a line each time the duration doubles."""
    scenario = load(spec)
    name = engine or scenario.engine
    if name != "sim":
        raise CclabError(f"--until-steady: simulator only (engine {name!r} runs in real time; choose duration_s yourself)")
    cap_s = max_duration_s if max_duration_s is not None else UNTIL_STEADY_DEFAULT_CAP_FACTOR * scenario.duration_s
    if cap_s < scenario.duration_s:
        raise CclabError(f"max_duration_s: must be >= the scenario's duration_s ({scenario.duration_s:g}) (got {cap_s:g})")
    tried: list[float] = []
    while True:
        result = run(scenario, name, force=force, progress=progress)
        tried.append(scenario.duration_s)
        state = result.steady_state or {}
        converged = state.get("converged")
        # A run whose flows all finished early gains nothing from a longer duration.
        ended_early = float(result.stats.get("simulated_s", scenario.duration_s)) < scenario.duration_s
        if converged is True or ended_early or scenario.duration_s >= cap_s:
            break
        longer = min(2 * scenario.duration_s, cap_s)
        if notify is not None:
            notify(f"until steady: {scenario.duration_s:g} s has not converged ({why_not_converged(state)}); trying {longer:g} s")
        scenario = scenario.model_copy(update={"duration_s": longer})
    result.provenance["until_steady"] = {"durations_s": tried, "settled_duration_s": tried[-1], "converged": converged}
    return SteadyRun(result=result, durations_s=tried, converged=converged)
