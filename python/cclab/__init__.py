"""cclab: a congestion-control lab. Describe a dumbbell and its flows, run them in the
Rust simulator or on the Linux kernel, and get per-flow metrics as DataFrames."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("cclab")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

from cclab.api import run, run_until_steady
from cclab.errors import CclabError, EngineError, EngineUnavailable, SpecError
from cclab.results import RunResult
from cclab.spec import Scenario

__all__ = ["CclabError", "EngineError", "EngineUnavailable", "RunResult", "Scenario", "SpecError", "run", "run_until_steady", "__version__"]
