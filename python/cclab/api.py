"""The Python face of cclab: run a scenario, get DataFrames.

    >>> import cclab
    >>> result = cclab.run("examples/cubic_100mbit_20ms_1bdp.toml")
    >>> result.flows[["cc", "goodput_mbps"]]
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from cclab.engines import budget, get_engine
from cclab.engines.base import RunProgress
from cclab.results import RunResult
from cclab.spec import Scenario


def load(spec: Scenario | Mapping[str, Any] | str | os.PathLike[str]) -> Scenario:
    """A validated scenario from a Scenario, a dict shaped like the TOML, or a TOML path."""
    if isinstance(spec, Scenario):
        return spec
    if isinstance(spec, Mapping):
        return Scenario.from_dict(dict(spec))
    return Scenario.from_toml(spec)


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
