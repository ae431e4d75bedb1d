"""Typed stub of the Rust simulator binding (crates/cclab-py).

The contract is docs/ARCHITECTURE.md: a resolved config in, a result out, both JSON.
"""

from collections.abc import Callable

def run_json(
    config_json: str,
    progress: Callable[[int, int], object] | None = None,
    progress_interval_s: float = 0.2,
) -> str:
    """Run one resolved scenario and return the result object as JSON text.

    `progress(sim_now_ns, events_processed)` is called every `progress_interval_s` of wall
    time; an exception it raises, or a pending Ctrl-C (KeyboardInterrupt, checked every
    0.1 s), stops the run and propagates. Raises ValueError when the config does not match
    the contract.
    """
    ...

def model_version() -> int:
    """Version of the simulated behaviour; sweeps key runs on it."""

def compare_json(
    config_json: str,
    candidate_json: str,
    progress: Callable[[int, int], object] | None = None,
    progress_interval_s: float = 0.2,
) -> str:
    """Run the config with its first flow's CC driving, make each of its state-changing hook
    calls also on a fresh copy of that CC and on `candidate_json`'s flow's CC, and return where
    their answers parted (crates/cclab-sim/src/differential.rs) as JSON. Progress, Ctrl-C and
    errors as in `run_json`.
    """
    ...
