"""The engine registry and the Python API's choice of engine (cclab.engines, cclab.api)."""

from __future__ import annotations

import sys

import pytest

import cclab
from cclab.engines import ENGINE_NAMES, Engine, get_engine
from cclab.errors import EngineUnavailable
from conftest import VALID_SPEC


def test_the_registry_knows_sim_and_kernel() -> None:
    assert ENGINE_NAMES == ("sim", "kernel")


def test_the_sim_engine_satisfies_the_engine_protocol() -> None:
    engine = get_engine("sim")
    assert isinstance(engine, Engine)
    assert engine.name == "sim"


def test_an_unknown_engine_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(EngineUnavailable) as caught:
        get_engine("ns3")
    assert caught.value.line == 'engine: must be one of "sim" or "kernel" (got "ns3")'


def test_a_kernel_engine_that_cannot_be_imported_is_one_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cclab.engines.kernel", None)  # makes the import fail
    with pytest.raises(EngineUnavailable, match='^engine "kernel" is not available: ') as caught:
        get_engine("kernel")
    assert "\n" not in caught.value.line


def test_the_api_uses_the_engine_named_in_the_spec_unless_overridden(monkeypatch, write_spec) -> None:
    monkeypatch.setitem(sys.modules, "cclab.engines.kernel", None)
    kernel_spec = write_spec(VALID_SPEC.replace("seed = 7", 'seed = 7\nengine = "kernel"'))
    with pytest.raises(EngineUnavailable, match="kernel"):
        cclab.run(kernel_spec)
    with pytest.raises(EngineUnavailable, match="kernel"):
        cclab.run(write_spec(VALID_SPEC, "sim.toml"), engine="kernel")
