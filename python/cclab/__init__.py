"""cclab: a congestion-control lab. Describe a dumbbell and its flows, run them in the
Rust simulator or on the Linux kernel, and get per-flow metrics as DataFrames."""

from typing import TYPE_CHECKING, Any

from cclab.errors import CclabError, EngineError, EngineUnavailable, SpecError

if TYPE_CHECKING:
    from cclab.api import run, run_until_steady
    from cclab.results import RunResult
    from cclab.spec import Scenario

# The engines and results pull in pandas (about a second to import); the CLI's error paths
# and `cclab check` need none of it, so these load on first use (PEP 562).
_LAZY = {"run": "cclab.api", "run_until_steady": "cclab.api", "RunResult": "cclab.results", "Scenario": "cclab.spec"}


def _version() -> str:
    # importlib.metadata takes 70 ms to import: only results (their provenance) ask for it.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cclab")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = _version()
        return globals()[name]
    if name not in _LAZY:
        raise AttributeError(f"module 'cclab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


__all__ = ["CclabError", "EngineError", "EngineUnavailable", "RunResult", "Scenario", "SpecError", "run", "run_until_steady", "__version__"]
