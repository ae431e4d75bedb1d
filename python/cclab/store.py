"""The results store of a sweep folder: one table of flows, the time series, DuckDB queries.

Layout of an output folder `DIR`:

    DIR/runs/<run_key>/      one finished run: RunResult files + run.json (sweep, axis values)
    DIR/flows.parquet        the flows table of every finished run, written at the end of a
                             sweep (a cache: `load_flows` rebuilds what it lacks)
    DIR/failures.jsonl       one line per run that raised: run_key, axis values, error, host
    DIR/sweeps/<name>.json   each sweep's definition, planned runs and skipped combinations

`load_flows(DIR)` works on a finished or a partial sweep: it reads the cache and adds
any run folder the cache lacks.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from cclab.errors import CclabError
from cclab.executor import RUN_META
from cclab.results import EVENT_COLUMNS, FLOW_COLUMNS, FLOW_SERIES_COLUMNS, QUEUE_SERIES_COLUMNS
from cclab.units import bdp_bytes, frame_bytes_of

FLOWS_TABLE = "flows.parquet"
SERIES = {"flow_series": FLOW_SERIES_COLUMNS, "queue_series": QUEUE_SERIES_COLUMNS, "events": EVENT_COLUMNS}

# The run and spec columns every flows table starts with, and their types.
RUN_COLUMNS: dict[str, str] = {
    "run_key": "string",
    "sweep": "string",
    "repetition": "int64",
    "seed": "int64",
    "engine": "string",
    "valid": "bool",
    "duration_s": "float64",
    "rate_mbps": "float64",
    "rtt_ms": "float64",
    "buffer": "string",  # as written in the spec: "100KB", "1bdp", "250pkt"
    "buffer_bytes": "int64",  # packets count whole 1514-byte frames
    "buffer_bdp": "float64",
    "loss": "float64",
    "aqm": "string",  # the bottleneck's queue discipline: fifo, codel, fq_codel, pie, red, cake
    "n_flows": "int64",
    "host": "string",  # the machine that ran it (provenance.host; null for results older than it)
    "flow_sample_interval_ms": "float64",
    "queue_sample_interval_ms": "float64",
    "warmup_s": "float64",  # metrics cover [warmup_s, end]; whole_run_* the whole run
    # The run's steady-state verdict (cclab.analysis.steady): null when not judged.
    "steady_converged": "boolean",
    "steady_share_drift_pts": "float64",
    "steady_suggested_duration_s": "float64",
    # The flow's own spec entry (flows[flow_entry]), resolved.
    "flow_entry": "int64",
    "count": "int64",
    "probe_bw_gain": "float64",  # NaN for flows that are not BBR
    "size_bytes": "Int64",  # null for flows that run for duration_s
    "extra_rtt_ms": "float64",
    "rwnd_bytes": "Int64",
    # SO_SNDBUF / SO_RCVBUF as the spec set them (iperf3 -w); null where autotuned.
    "sndbuf_bytes": "Int64",
    "rcvbuf_bytes": "Int64",
}


def runs_dir(out_dir: str | os.PathLike[str]) -> Path:
    return Path(out_dir) / "runs"


def finished_runs(out_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """run_key -> folder of every finished run (hidden staging folders are not runs)."""
    root = runs_dir(out_dir)
    if not root.is_dir():
        return {}
    return {
        entry.name: entry
        for entry in sorted(root.iterdir())
        if not entry.name.startswith(".") and (entry / RUN_META).is_file()
    }


def flow_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The flows-table rows of one finished run."""
    meta = json.loads((run_dir / RUN_META).read_text(encoding="utf-8"))
    result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    config = json.loads((run_dir / "spec.json").read_text(encoding="utf-8"))
    scenario = meta["scenario"]
    link = config["bottleneck"]
    if link["queue_limit_bytes"] is not None:
        buffer_bytes = link["queue_limit_bytes"]
    else:
        buffer_bytes = link["queue_limit_packets"] * frame_bytes_of(config)
    validity = result.get("validity")
    steady = result.get("steady_state") or {}
    output = scenario.get("output") or {}
    run = {
        "run_key": meta["run_key"],
        "sweep": meta.get("sweep"),
        "repetition": meta["repetition"],
        "seed": config["seed"],
        "engine": meta["engine"],
        "valid": True if validity is None else bool(validity.get("valid")),
        "duration_s": config["duration_ns"] / 1e9,
        "rate_mbps": link["rate_bps"] / 1e6,
        "rtt_ms": link["rtt_ns"] / 1e6,
        "buffer": scenario["bottleneck"].get("buffer", "1bdp"),
        "buffer_bytes": buffer_bytes,
        "buffer_bdp": buffer_bytes / bdp_bytes(link["rate_bps"], link["rtt_ns"]),
        "loss": link["loss_probability"],
        "aqm": link.get("aqm", {"kind": "fifo"})["kind"],
        "n_flows": len(config["flows"]),
        "host": result["provenance"].get("host"),
        "flow_sample_interval_ms": config["flow_sample_interval_ns"] / 1e6,
        "queue_sample_interval_ms": config["queue_sample_interval_ns"] / 1e6,
        "warmup_s": config.get("warmup_ns", 0) / 1e9,
        "steady_converged": steady.get("converged"),
        "steady_share_drift_pts": steady.get("share_drift_pts"),
        "steady_suggested_duration_s": steady.get("suggested_duration_s"),
    }
    # Axes under flows.N name a spec entry; its value goes on every row of the run as
    # flows_N_<field>, since a flow's own entry may be another one.
    for path, axis_value in meta.get("axis_values", {}).items():
        parts = path.split(".")
        if parts[0] != "flows" or len(parts) < 2:
            continue
        entry = _entry(scenario, parts[1])
        if not isinstance(entry, dict):
            continue
        if len(parts) == 2 and isinstance(axis_value, dict):
            # A table-valued axis ("flows.0" = [{cc = "bbr", probe_bw_gain = 1.5}, ...]).
            for name in axis_value:
                run[f"flows_{parts[1]}_{name}"] = entry.get(name)
        elif len(parts) == 3:
            run["_".join(parts)] = entry.get(parts[2])
    entries = [index for index, entry in enumerate(scenario["flows"]) for _ in range(entry.get("count", 1))]
    resolved = {flow["flow_id"]: flow for flow in config["flows"]}
    bottleneck = {f"bottleneck_{name}": value for name, value in result["bottleneck"].items()}
    rows = []
    for flow in result["flows"]:
        spec_flow = resolved.get(flow["flow_id"], {})
        index = entries[flow["flow_id"]] if flow["flow_id"] < len(entries) else -1
        rows.append(
            {
                **run,
                "flow_entry": index,
                "count": scenario["flows"][index].get("count", 1) if index >= 0 else 1,
                "probe_bw_gain": spec_flow.get("probe_bw_gain"),
                "size_bytes": spec_flow.get("size_bytes"),
                "extra_rtt_ms": spec_flow.get("extra_rtt_ns", 0) / 1e6,
                "rwnd_bytes": spec_flow.get("rwnd_bytes"),
                "sndbuf_bytes": spec_flow.get("sndbuf_bytes"),
                "rcvbuf_bytes": spec_flow.get("rcvbuf_bytes"),
                **flow,
                **bottleneck,
            }
        )
    return rows


def _entry(scenario: dict[str, Any], index: str) -> Any:
    flows = scenario.get("flows", [])
    return flows[int(index)] if index.isdigit() and int(index) < len(flows) else None


def flows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Typed flows table: run columns first, then axis columns, per-flow metrics, bottleneck."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in {**RUN_COLUMNS, **FLOW_COLUMNS}.items()})
    for name in (*RUN_COLUMNS, *FLOW_COLUMNS):
        if name not in frame.columns:  # an engine that does not report a metric: null
            frame[name] = None
    axes = sorted(name for name in frame.columns if name.startswith("flows_"))
    bottleneck = [name for name in frame.columns if name.startswith("bottleneck_")]
    known = set(RUN_COLUMNS) | set(FLOW_COLUMNS) | set(axes) | set(bottleneck)
    extra = [name for name in frame.columns if name not in known]
    frame = frame[[*RUN_COLUMNS, *axes, *FLOW_COLUMNS, *extra, *bottleneck]]
    for name in axes:
        # An axis of mixed kinds (`ecn` = false, true, "accecn") is one column of text, as TOML spells it.
        kinds = {type(value) for value in frame[name].dropna()}
        if str in kinds and len(kinds) > 1:
            frame[name] = frame[name].map(lambda v: v if v is None or isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v))
    for name in ("bottleneck_queue_limit_bytes", "bottleneck_queue_limit_packets"):
        if name in frame.columns:
            frame[name] = frame[name].astype("Int64")  # one of the two is null
    for name, dtype in {**RUN_COLUMNS, **FLOW_COLUMNS}.items():
        column = frame[name]
        if dtype == "float64":
            frame[name] = pd.to_numeric(column).astype(dtype)
        elif column.isna().any():
            frame[name] = column.astype(_NULLABLE.get(dtype, dtype))
        else:
            frame[name] = column.astype(dtype)
    return frame.reset_index(drop=True)


# Where a column that is always set has a gap (a metric an engine does not report).
_NULLABLE = {"int64": "Int64", "bool": "boolean"}


def load_flows(out_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per flow per finished run, every spec field and metric a column."""
    runs = finished_runs(out_dir)
    cached = _read_cache(out_dir)
    have: set[str] = set()
    parts = []
    if cached is not None:
        cached = cached[cached["run_key"].isin(runs)]
        have = set(cached["run_key"])
        if not cached.empty:
            parts.append(cached)
    missing = [key for key in runs if key not in have]
    if missing:
        parts.append(flows_frame([row for key in missing for row in flow_rows(runs[key])]))
    if not parts:
        return flows_frame([])
    if len(parts) == 1:
        return parts[0].reset_index(drop=True)
    frame = pd.concat(parts, ignore_index=True)
    return frame.sort_values(["run_key", "flow_id"], kind="stable").reset_index(drop=True)


def write_flows_table(out_dir: str | os.PathLike[str]) -> Path:
    """Write DIR/flows.parquet from the finished runs, atomically."""
    frame = load_flows(out_dir)
    target = Path(out_dir) / FLOWS_TABLE
    handle, staging = tempfile.mkstemp(prefix=".flows.", suffix=".parquet.partial", dir=target.parent)
    os.close(handle)
    try:
        frame.to_parquet(staging, index=False)
        os.replace(staging, target)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
    return target


def _read_cache(out_dir: str | os.PathLike[str]) -> pd.DataFrame | None:
    path = Path(out_dir) / FLOWS_TABLE
    if not path.is_file():
        return None
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError):
        return None  # unreadable: rebuilt from the run folders
    # A table written by another version of cclab, with other columns, is not used.
    return frame if set(RUN_COLUMNS) <= set(frame.columns) else None


def load_failures(out_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """The runs that failed and have not finished since: the latest failures.jsonl entry of each."""
    path = Path(out_dir) / "failures.jsonl"
    columns = ["run_key", "axis_values", "repetition", "error", "engine", "host", "time"]
    if not path.is_file():
        return pd.DataFrame(columns=columns)
    latest: dict[str, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            latest[entry["run_key"]] = entry
    finished = finished_runs(out_dir)
    rows = [entry for key, entry in latest.items() if key not in finished]
    return pd.DataFrame(rows, columns=columns)


def series_files(out_dir: str | os.PathLike[str], name: str, run_keys: Iterable[str] | None = None) -> list[Path]:
    if name not in SERIES:
        raise CclabError(f"series: must be one of {', '.join(SERIES)} (got {name!r})")
    runs = finished_runs(out_dir)
    keys = runs if run_keys is None else [key for key in run_keys if key in runs]
    return [runs[key] / f"{name}.parquet" for key in keys]


def load_series(
    out_dir: str | os.PathLike[str], name: str, run_keys: Iterable[str] | None = None
) -> pd.DataFrame:
    """A time-series table ("flow_series", "queue_series", "events") of every run, with run_key."""
    files = series_files(out_dir, name, run_keys)
    with duckdb.connect() as con:
        return con.sql(_series_sql(files, name)).df()


def _series_sql(files: list[Path], name: str) -> str:
    if not files:
        columns = ", ".join(f"CAST(NULL AS {_DUCK_TYPES[dtype]}) AS {col}" for col, dtype in SERIES[name].items())
        return f"SELECT CAST(NULL AS VARCHAR) AS run_key, {columns} LIMIT 0"
    listing = ", ".join(_quote(str(path)) for path in files)
    # The run key is the name of the folder holding each file.
    return (
        "SELECT regexp_extract(filename, '([^/]+)/[^/]+$', 1) AS run_key, * EXCLUDE (filename) "
        f"FROM read_parquet([{listing}], filename = true, union_by_name = true)"
    )


_DUCK_TYPES = {"float64": "DOUBLE", "int64": "BIGINT", "Int64": "BIGINT", "string": "VARCHAR", "bool": "BOOLEAN"}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def connect(out_dir: str | os.PathLike[str]) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with views flows, flow_series, queue_series and events."""
    if not Path(out_dir).is_dir():
        raise CclabError(f"{out_dir}: no such folder")
    con = duckdb.connect()
    flows = load_flows(out_dir)
    con.register("flows", flows)
    for name in SERIES:
        con.execute(f"CREATE VIEW {name} AS {_series_sql(series_files(out_dir, name), name)}")
    return con


def query(out_dir: str | os.PathLike[str], sql: str) -> pd.DataFrame:
    """Run SQL over the views flows, flow_series, queue_series and events of a sweep folder."""
    con = connect(out_dir)
    try:
        relation = con.sql(sql)
        return relation.df() if relation is not None else pd.DataFrame()
    except duckdb.Error as error:
        raise CclabError(f"query: {' '.join(str(error).split())}") from None
    finally:
        con.close()


def render_table(frame: pd.DataFrame, max_rows: int = 200):  # -> rich.table.Table
    """A rich table of a query result: numbers right-aligned, floats to 4 significant digits."""
    from rich.table import Table

    table = Table(show_edge=False, pad_edge=False, caption=f"{len(frame)} rows" if len(frame) > max_rows else None)
    for name in frame.columns:
        numeric = pd.api.types.is_numeric_dtype(frame[name]) and not pd.api.types.is_bool_dtype(frame[name])
        table.add_column(str(name), justify="right" if numeric else "left")
    for row in frame.head(max_rows).itertuples(index=False):
        table.add_row(*(_cell(value) for value in row))
    return table


def _cell(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"
    return str(value)
