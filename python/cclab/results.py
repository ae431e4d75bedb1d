"""One run's result: per-flow metrics, the bottleneck, time series and provenance.

Engines return the result object of docs/ARCHITECTURE.md; `RunResult.from_engine_output`
turns it into DataFrames with fixed column types, and `write`/`read` store it as Parquet
plus two JSON files, atomically.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cclab.analysis.steady import verdict_of
from cclab.errors import CclabError, EngineError

# Bumped whenever a stored column or key changes meaning.
FORMAT_VERSION = 1

# Column types of the tables. "Int64" is pandas' nullable integer, "string" its string type
# with a proper missing value; floats use NaN for "this CC has no such value".
FLOW_COLUMNS: dict[str, str] = {
    "flow_id": "int64",
    "cc": "string",
    "start_s": "float64",
    "end_s": "float64",
    "goodput_mbps": "float64",
    "bytes_delivered": "int64",
    "bytes_sent": "int64",
    "data_segments_sent": "int64",
    "retrans_segments": "int64",
    "lost_segments": "int64",
    "queue_drop_segments": "int64",
    "random_loss_segments": "int64",
    "rto_count": "int64",
    "rtt_min_ms": "float64",
    "rtt_mean_ms": "float64",
    "rtt_p50_ms": "float64",
    "rtt_p95_ms": "float64",
    "rtt_max_ms": "float64",
    "fct_s": "float64",
    "completed": "bool",
    # ECN and AQM: null from an engine or a result that predates them.
    "ecn": "boolean",  # ECN negotiated
    "ce_marks_received": "Int64",  # CE-marked data segments that reached the receiver
    "aqm_drop_segments": "Int64",  # this flow's packets the AQM dropped (within queue_drop_segments)
    # Time new data waited for the receiver's window (tcpi_rwnd_limited); NaN before model 9.
    "rwnd_limited_ms": "float64",
    # Time the sender had sent all it had while its writer waited for buffer memory (tcpi_sndbuf_limited).
    "sndbuf_limited_ms": "float64",
}
FLOW_SERIES_COLUMNS: dict[str, str] = {
    "time_s": "float64",
    "flow_id": "int64",
    "throughput_mbps": "float64",
    "cwnd_pkts": "float64",
    "pacing_rate_mbps": "float64",
    "srtt_ms": "float64",
    "inflight_pkts": "float64",
    "bbr_bw_mbps": "float64",
    "bbr_min_rtt_ms": "float64",
    "cc_mode": "string",
    "retrans_segments": "Int64",
    "ecn_alpha": "float64",  # DCTCP's alpha (BBRv3's where it uses ECN); null for other CCs
}
QUEUE_SERIES_COLUMNS: dict[str, str] = {
    "time_s": "float64",
    "queue_bytes": "int64",
    "drops": "int64",
    "utilization": "float64",
    "ce_marks": "Int64",
    "l4s_queue_bytes": "Int64",  # the L4S queue's part of queue_bytes (dualpi2); null otherwise
}
EVENT_COLUMNS: dict[str, str] = {
    "time_s": "float64",
    "flow_id": "Int64",  # null for events of the bottleneck itself
    "kind": "string",
    "detail": "string",
}
_TABLES: dict[str, dict[str, str]] = {
    "flow_series": FLOW_SERIES_COLUMNS,
    "queue_series": QUEUE_SERIES_COLUMNS,
    "events": EVENT_COLUMNS,
}


@dataclass
class RunResult:
    flows: pd.DataFrame
    bottleneck: dict[str, Any]
    flow_series: pd.DataFrame
    queue_series: pd.DataFrame
    events: pd.DataFrame
    stats: dict[str, Any]
    spec: dict[str, Any]
    provenance: dict[str, Any]
    # Kernel engine only: {"valid": bool, "reasons": [...]} from its run checks; None for sim.
    validity: dict[str, Any] | None = None
    # Did the run settle? cclab.analysis.steady's verdict over the measured window.
    steady_state: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # Every result carries its verdict, results stored before it existed included.
        if self.steady_state is None:
            self.steady_state = verdict_of(self).to_dict()

    @classmethod
    def from_engine_output(cls, output: Mapping[str, Any], *, spec: dict[str, Any], engine: str) -> RunResult:
        """Build from an engine's result object (ARCHITECTURE.md) and the config it ran.

        An engine may add a `provenance` object (the kernel engine records the kernel
        version, qdiscs, sysctls and offloads there), merged into ours, and a `validity`
        object saying whether the run can be trusted.
        """
        for key in ("flows", "bottleneck", "flow_series", "queue_series", "events"):
            if key not in output:
                raise EngineError(f"{engine} engine: result has no {key!r}")
        try:
            tables = {name: _table(output[name], columns) for name, columns in _TABLES.items()}
            flows = _table(_rows_to_columns(output["flows"]), FLOW_COLUMNS)
        except (ValueError, TypeError) as error:
            raise EngineError(f"{engine} engine: malformed result: {error}") from None
        provenance = {
            "format_version": FORMAT_VERSION,
            "engine": engine,
            "seed": spec["seed"],
            "cclab_version": _cclab_version(),
            "git_revision": _git_revision(),
            "host": socket.gethostname(),  # the machine the engine ran on (a sweep's node on a cluster)
            **dict(output.get("provenance", {})),
        }
        return cls(
            flows=flows,
            bottleneck=dict(output["bottleneck"]),
            stats=dict(output.get("stats", {})),
            spec=spec,
            provenance=provenance,
            validity=output.get("validity"),
            **tables,
        )

    def to_json_dict(self) -> dict[str, Any]:
        """Everything, under the names of ARCHITECTURE.md's result, plus spec and provenance."""
        return {
            "flows": _records(self.flows),
            "bottleneck": self.bottleneck,
            "flow_series": _columns(self.flow_series),
            "queue_series": _columns(self.queue_series),
            "events": _columns(self.events),
            "stats": self.stats,
            "spec": self.spec,
            "provenance": self.provenance,
            "validity": self.validity,
            "steady_state": self.steady_state,
        }

    def write(self, out_dir: str | os.PathLike[str], *, also: Callable[[Path], object] | None = None) -> Path:
        """Store the result in `out_dir`, replacing an earlier result there.

        Files are written into a hidden sibling directory that is renamed into place at
        the end, so an error or Ctrl-C leaves either the old directory or the new one,
        never a half-written one. `also(staging)` may add files (a report) before the rename.
        """
        out_dir = Path(out_dir)
        if out_dir.exists() and not out_dir.is_dir():
            raise CclabError(f"--out {out_dir}: exists and is not a directory")
        created = _make_parents(out_dir.parent)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent))
        try:
            for name in ("flows", *_TABLES):
                getattr(self, name).to_parquet(staging / f"{name}.parquet", index=False)
            _write_json(staging / "spec.json", self.spec)
            summary = {"flows": _records(self.flows), "bottleneck": self.bottleneck, "stats": self.stats}
            _write_json(
                staging / "result.json",
                {**summary, "provenance": self.provenance, "validity": self.validity, "steady_state": self.steady_state},
            )
            if also is not None:
                also(staging)
            _replace_dir(staging, out_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            for directory in reversed(created):
                _rmdir_if_empty(directory)
            raise
        return out_dir

    @classmethod
    def read(cls, out_dir: str | os.PathLike[str]) -> RunResult:
        out_dir = Path(out_dir)
        try:
            summary = json.loads((out_dir / "result.json").read_text(encoding="utf-8"))
            spec = json.loads((out_dir / "spec.json").read_text(encoding="utf-8"))
            tables = {
                name: _typed(pd.read_parquet(out_dir / f"{name}.parquet"), columns)
                for name, columns in {"flows": FLOW_COLUMNS, **_TABLES}.items()
            }
        except FileNotFoundError as error:
            raise CclabError(f"{out_dir}: not a cclab result directory ({Path(error.filename).name} missing)") from None
        return cls(
            bottleneck=summary["bottleneck"],
            stats=summary.get("stats", {}),
            provenance=summary["provenance"],
            validity=summary.get("validity"),
            steady_state=summary.get("steady_state"),
            spec=spec,
            **tables,
        )


# ---- tables ---------------------------------------------------------------------------------


def _table(columns: Mapping[str, list[Any]], schema: dict[str, str]) -> pd.DataFrame:
    """A DataFrame from column lists, with the schema's types; extra columns are kept.

    Each column is built at its type in one step (numpy for the plain types, `pd.array` for
    the nullable ones) rather than typed column by column in a frame, which cost 65 ms a run,
    more than a short simulation. Same values and types as `_typed` gives (tested)."""
    rows = max((len(values) for values in columns.values()), default=0)
    typed: dict[str, Any] = {}
    for name, dtype in schema.items():
        values = columns.get(name, [None] * rows)  # a column the engine lacks is null
        if len(values) != rows:
            raise ValueError(f"column {name!r} has {len(values)} values, others {rows}")
        if dtype in ("float64", "int64", "bool"):
            if dtype == "int64" and any(value is None for value in values):
                raise TypeError(f"column {name!r} has a missing value but type {dtype}")
            typed[name] = np.asarray(values, dtype=dtype)
        else:
            typed[name] = pd.array(values, dtype=dtype)
    for name, values in columns.items():
        if name not in schema:
            typed[name] = list(values)
    return pd.DataFrame(typed, copy=False)


def _typed(frame: pd.DataFrame, schema: dict[str, str]) -> pd.DataFrame:
    """The schema's columns first, typed; a column the engine or an older stored result
    lacks (one added later, as `rwnd_limited_ms`) is null."""
    for name in schema:
        if name not in frame.columns:
            frame[name] = pd.Series([None] * len(frame), dtype="object")
    ordered = [*schema, *(name for name in frame.columns if name not in schema)]
    frame = frame[ordered].copy()
    for name, dtype in schema.items():
        column = frame[name]
        if dtype == "float64":
            frame[name] = pd.to_numeric(column, errors="raise").astype("float64")
        else:
            frame[name] = column.astype(dtype)
    return frame.reset_index(drop=True)


def _rows_to_columns(rows: list[Mapping[str, Any]]) -> dict[str, list[Any]]:
    names = list(dict.fromkeys(name for row in rows for name in row))
    return {name: [row.get(name) for row in rows] for name in names}


def _plain(value: Any) -> Any:
    """A JSON-ready Python value: NaN/NA become None, numpy scalars become Python ones."""
    if value is None or value is pd.NA:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _columns(frame: pd.DataFrame) -> dict[str, list[Any]]:
    return {name: [_plain(v) for v in frame[name].tolist()] for name in frame.columns}


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    columns = _columns(frame)
    return [{name: columns[name][row] for name in columns} for row in range(len(frame))]


# ---- files ----------------------------------------------------------------------------------


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def _make_parents(directory: Path) -> list[Path]:
    """mkdir -p that returns the directories it created, outermost first."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    created = []
    for path in reversed(missing):
        path.mkdir()
        created.append(path)
    return created


def _rmdir_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass


def _replace_dir(staging: Path, target: Path) -> None:
    if not target.exists():
        staging.rename(target)
        return
    # rename() cannot replace a non-empty directory: move the old one aside first.
    old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
    old.rmdir()
    target.rename(old)
    try:
        staging.rename(target)
    except BaseException:
        old.rename(target)
        raise
    shutil.rmtree(old, ignore_errors=True)


# ---- provenance -----------------------------------------------------------------------------


@functools.cache
def _cclab_version() -> str:
    from cclab import __version__

    return __version__


@functools.cache
def _git_revision() -> str | None:
    """The commit cclab runs from, with "-dirty" if its work tree has changes; None outside git."""
    try:
        done = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=40"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None
