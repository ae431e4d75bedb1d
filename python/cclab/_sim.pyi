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
