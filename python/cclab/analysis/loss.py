"""Goodput under random loss: the loss percentage of a flow, the ideal goodput line, and
the "cliff point" of Cao et al. (IMC 2019, section 4.2) detected from measured data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from cclab.units import FRAME_BYTES, MSS_BYTES

# Where we call a goodput curve "fallen off the cliff": below this fraction of its
# loss-free goodput. Half is far outside run-to-run noise and well above the
# near-zero floor both BBR and the loss-based CCs end on at 50% loss.
CLIFF_FRACTION = 0.5


def loss_pct(retrans_segments: Any, data_segments_sent: Any) -> Any:
    """Retransmissions per data segment sent, in percent: the paper's "loss percentage".
    NaN where nothing was sent."""
    retrans = np.asarray(retrans_segments, dtype=float)
    sent = np.asarray(data_segments_sent, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = np.where(sent > 0, retrans / sent * 100.0, np.nan)
    if isinstance(retrans_segments, pd.Series):
        return pd.Series(result, index=retrans_segments.index)
    return float(result) if np.ndim(result) == 0 else result


def ideal_goodput_mbps(rate_mbps: float, loss: Any) -> Any:
    """The goodput ceiling of one flow at line rate `rate_mbps` (counted on 1514-byte
    frames, ARCHITECTURE.md) when a fraction `loss` of the packets is dropped at random:
    rate x 1448/1514 x (1 - loss), the line of the BBR paper's Figure 8 with our framing."""
    return rate_mbps * MSS_BYTES / FRAME_BYTES * (1.0 - np.asarray(loss, dtype=float))


def predicted_cliff(probe_bw_gain: float) -> float:
    """Cao et al. eq. 3: BBR stops seeing the full bandwidth once gain x (1 - p) < 1,
    i.e. at p = 1 - 1/gain (9.1% for 1.1, 20% for 1.25, 33.3% for 1.5)."""
    return 1.0 - 1.0 / probe_bw_gain


def cliff_point(loss: Sequence[float], goodput: Sequence[float], fraction: float = CLIFF_FRACTION) -> float:
    """The loss rate at which goodput first falls below `fraction` of its loss-free value.

    The loss-free value is the goodput at the smallest loss measured (0 if it was run).
    Between the last point above the threshold and the first below it the crossing is
    interpolated linearly in log(loss) (the axis loss sweeps are spaced on), or linearly
    in loss when the point above is loss 0. Returns NaN if goodput never falls below
    the threshold, and the first loss measured if it is already below there.
    """
    frame = pd.DataFrame({"loss": np.asarray(loss, dtype=float), "goodput": np.asarray(goodput, dtype=float)})
    frame = frame.dropna().groupby("loss", as_index=False)["goodput"].mean().sort_values("loss")
    if frame.empty:
        return math.nan
    losses = frame["loss"].to_numpy()
    goodputs = frame["goodput"].to_numpy()
    threshold = fraction * goodputs[0]
    below = np.flatnonzero(goodputs < threshold)
    if below.size == 0:
        return math.nan
    index = int(below[0])
    if index == 0:
        return float(losses[0])
    x0, x1 = losses[index - 1], losses[index]
    y0, y1 = goodputs[index - 1], goodputs[index]
    t = (y0 - threshold) / (y0 - y1)  # fraction of the way from point 0 to point 1
    if x0 <= 0:
        return float(x0 + t * (x1 - x0))
    return float(math.exp(math.log(x0) + t * (math.log(x1) - math.log(x0))))


def cliff_table(flows: pd.DataFrame, by: str = "variant", fraction: float = CLIFF_FRACTION) -> pd.DataFrame:
    """`cliff_point` of each group of a flows table with `loss` and `goodput_mbps`:
    columns `by`, `loss_free_goodput_mbps`, `cliff_loss`."""
    rows = []
    for name, group in flows.groupby(by, sort=False):
        ordered = group.groupby("loss")["goodput_mbps"].mean().sort_index()
        rows.append(
            {
                by: name,
                "loss_free_goodput_mbps": float(ordered.iloc[0]),
                "cliff_loss": cliff_point(ordered.index, ordered.to_numpy(), fraction),
            }
        )
    return pd.DataFrame(rows)
