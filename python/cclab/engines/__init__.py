"""Engines run a resolved scenario: `sim` (the Rust simulator) and `kernel` (Linux)."""

from cclab.engines.base import ENGINE_NAMES, Engine, get_engine

__all__ = ["ENGINE_NAMES", "Engine", "get_engine"]
