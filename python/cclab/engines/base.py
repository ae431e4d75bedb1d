"""The engine protocol and the registry of engines by name.

An engine takes a validated `Scenario`, runs `scenario.resolve()` (the config of
docs/ARCHITECTURE.md) and returns a `RunResult`, usually built with
`RunResult.from_engine_output(result_object, spec=config, engine=name)`.

Engines are imported only when asked for, so that a machine without the kernel engine's
tools (or without the built simulator) can still validate specs. The kernel engine lives
in `cclab.engines.kernel` and is registered as its class `KernelEngine`.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from cclab.errors import EngineUnavailable

if TYPE_CHECKING:
    from cclab.results import RunResult
    from cclab.spec import Scenario


#: `progress(done_s, total_s)`: how far a run is, in its own seconds (simulated or real).
RunProgress = Callable[[float, float], None]


@runtime_checkable
class Engine(Protocol):
    name: str
    #: Changes whenever the engine's behaviour changes, so sweeps never reuse a run
    #: produced by another version of the model.
    model_version: str

    def run(self, scenario: Scenario, progress: RunProgress | None = None) -> RunResult: ...


# name -> (module, class); the class is constructed without arguments.
_REGISTRY: dict[str, tuple[str, str]] = {
    "sim": ("cclab.engines.sim", "SimEngine"),
    "kernel": ("cclab.engines.kernel", "KernelEngine"),
}
ENGINE_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def get_engine(name: str) -> Engine:
    if name not in _REGISTRY:
        choices = " or ".join(json.dumps(known) for known in ENGINE_NAMES)
        raise EngineUnavailable(f"engine: must be one of {choices} (got {json.dumps(name)})")
    module_name, class_name = _REGISTRY[name]
    try:
        module = importlib.import_module(module_name)
        engine_class = getattr(module, class_name)
    except (ImportError, AttributeError) as error:
        raise EngineUnavailable(f"engine {json.dumps(name)} is not available: {error}") from None
    engine: Engine = engine_class()
    return engine


def cache_root() -> Path:
    """Where engines keep what they build once and reuse (BPF objects, users' native CCs)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "cclab"
