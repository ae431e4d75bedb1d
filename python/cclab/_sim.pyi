"""Typed stub of the Rust simulator binding (crates/cclab-py).

The contract is docs/ARCHITECTURE.md: a resolved config in, a result out, both JSON.
"""

def run_json(config_json: str) -> str:
    """Run one resolved scenario and return the result object as JSON text.

    Raises ValueError when the config does not match the contract.
    """
    ...

def model_version() -> int:
    """Version of the simulated behaviour; sweeps key runs on it."""
