"""The scenario spec: TOML validated by pydantic and resolved into an engine config.

`scenario` holds the scenario (bottleneck, flows, output); `aqm` the bottleneck's queue
discipline and its parameters with tc's defaults.
"""

from cclab.spec.aqm import AQM_NAMES, AqmName, AqmParams
from cclab.spec.scenario import (
    BBR_DEFAULT_PROBE_BW_GAIN,
    Bottleneck,
    CongestionControl,
    EngineName,
    Flow,
    Output,
    Scenario,
    _one_line,
    _show,
    load,
    read_toml,
)

__all__ = [
    "AQM_NAMES",
    "AqmName",
    "AqmParams",
    "BBR_DEFAULT_PROBE_BW_GAIN",
    "Bottleneck",
    "CongestionControl",
    "EngineName",
    "Flow",
    "Output",
    "Scenario",
    "_one_line",
    "_show",
    "load",
    "read_toml",
]
