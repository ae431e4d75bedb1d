"""The bottleneck queue and losses: occupancy in bytes and BDP, the standing queue, queueing
delay, drop rate per second, retransmission rates and flow completion times.

Pure functions over `RunResult.queue_series` (`time_s`, `queue_bytes`, `drops`,
`utilization`; one row per queue sample, each describing the interval that ends at
`time_s`) and `RunResult.flows`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from cclab.units import FRAME_BYTES

#: Warm-up excluded from steady-state statistics unless the caller says otherwise: BBR's
#: STARTUP and DRAIN and CUBIC's slow start are over within a few seconds on every link
#: the seeds use (the 001 write-up also "ignores startup").
DEFAULT_WARMUP_S = 5.0
#: The standing queue is the occupancy the queue rarely goes below: its 10th percentile.
STANDING_QUEUE_QUANTILE = 0.10


def bdp_bytes(rate_bps: float, rtt_s: float) -> float:
    """rate x base RTT, in bytes (docs/ARCHITECTURE.md's `bdp`)."""
    return rate_bps * rtt_s / 8


def occupancy(queue_series: pd.DataFrame, bdp: float) -> pd.DataFrame:
    """`time_s`, `queue_bytes` and `queue_bdp` (occupancy as a multiple of the BDP)."""
    out = queue_series[["time_s", "queue_bytes"]].copy()
    out["queue_bdp"] = out["queue_bytes"] / bdp
    return out


def steady(frame: pd.DataFrame, warmup_s: float = DEFAULT_WARMUP_S) -> pd.DataFrame:
    """The rows after the warm-up (time_s > warmup_s)."""
    return frame[frame["time_s"] > warmup_s]


def standing_queue_bytes(
    queue_series: pd.DataFrame, warmup_s: float = DEFAULT_WARMUP_S, quantile: float = STANDING_QUEUE_QUANTILE
) -> float:
    """The standing queue: the `quantile` (default 10th percentile) of occupancy after the warm-up.

    Raises ValueError when no sample lies after the warm-up (the run was too short to say).
    """
    rows = steady(queue_series, warmup_s)
    if rows.empty:
        raise ValueError(f"no queue samples after the {warmup_s:g} s warm-up")
    return float(np.quantile(rows["queue_bytes"].to_numpy(dtype=float), quantile))


def queueing_delay_ms(queue_series: pd.DataFrame, rate_bps: float) -> pd.DataFrame:
    """`time_s` and `delay_ms`: the time the backlog takes to drain at the line rate.

    Both the backlog and the rate count whole frames (as tbf does), so no header correction.
    """
    out = queue_series[["time_s"]].copy()
    out["delay_ms"] = queue_series["queue_bytes"].to_numpy(dtype=float) * 8 / rate_bps * 1e3
    return out


def _departed_pkts(queue_series: pd.DataFrame, rate_bps: float) -> np.ndarray:
    """Full-size frames the link sent in each sample interval, from its busy fraction."""
    t = queue_series["time_s"].to_numpy(dtype=float)
    dt = np.diff(t, prepend=0.0)
    busy = queue_series["utilization"].to_numpy(dtype=float).clip(0.0, 1.0)
    return busy * dt * rate_bps / (8 * FRAME_BYTES)


def drop_rate(queue_series: pd.DataFrame, rate_bps: float, bin_s: float = 1.0) -> pd.DataFrame:
    """Drops at the full queue per time bin.

    Columns: `time_s` (bin start), `drops`, `drops_per_s`, and `drop_percent`: drops as a
    percentage of the packets that reached the queue (dropped + sent; sent is estimated
    from the link's busy time in full-size frames, which all data packets are).
    """
    if bin_s <= 0:
        raise ValueError("bin_s must be > 0")
    frame = pd.DataFrame(
        {
            "time_s": np.floor((queue_series["time_s"].to_numpy(dtype=float) - 1e-9) / bin_s).clip(0) * bin_s,
            "drops": queue_series["drops"].to_numpy(dtype=float),
            "sent": _departed_pkts(queue_series, rate_bps),
        }
    )
    bins = frame.groupby("time_s", sort=True).sum().reset_index()
    bins["drops_per_s"] = bins["drops"] / bin_s
    arrived = bins["drops"] + bins["sent"]
    bins["drop_percent"] = np.where(arrived > 0, 100 * bins["drops"] / arrived.where(arrived > 0, 1), 0.0)
    return bins[["time_s", "drops", "drops_per_s", "drop_percent"]]


def steady_loss_percent(queue_series: pd.DataFrame, rate_bps: float, warmup_s: float = DEFAULT_WARMUP_S) -> float:
    """Queue drops after the warm-up as a percentage of the packets that reached the queue."""
    rows = steady(queue_series, warmup_s)
    if rows.empty:
        raise ValueError(f"no queue samples after the {warmup_s:g} s warm-up")
    drops = float(rows["drops"].sum())
    sent = float(_departed_pkts(queue_series, rate_bps)[queue_series["time_s"].to_numpy() > warmup_s].sum())
    return 100 * drops / (drops + sent) if drops + sent > 0 else 0.0


def retransmission_rate(flows: pd.DataFrame) -> pd.Series:
    """Per flow: retransmitted segments / data segments sent (NaN for a flow that sent nothing)."""
    sent = flows["data_segments_sent"].astype(float)
    return (flows["retrans_segments"].astype(float) / sent.where(sent > 0)).rename("retrans_rate")


def aggregate_retransmission_rate(flows: pd.DataFrame) -> float:
    """Retransmitted segments of all flows / their data segments sent."""
    sent = float(flows["data_segments_sent"].sum())
    return float(flows["retrans_segments"].sum()) / sent if sent > 0 else float("nan")


def flow_completion_times(flows: pd.DataFrame) -> pd.DataFrame:
    """`flow_id`, `cc`, `fct_s` of the flows that completed (finite flows only)."""
    done = flows[flows["completed"].astype(bool) & flows["fct_s"].notna()]
    return done[["flow_id", "cc", "fct_s"]].reset_index(drop=True)
