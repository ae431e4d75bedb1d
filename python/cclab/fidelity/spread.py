"""Is the simulator's run-to-run spread distinguishable from the kernel's, given how few
runs each engine has?

"IQR within 2x of the kernel's" is a noisy verdict at five runs an engine: two samples of
five from one normal distribution land within 2x of each other's IQR only about 56% of the
time (bimodal outcomes, like the 4-BBR STARTUP race, less). So each case also gets a
permutation test: each engine's runs are centred on their own per-group median (spread,
not location, is in question), pooled, and split into every possible pair of samples of
the two engines' sizes (a seeded subset of them when there are too many). Over those
splits:
- `p_value`: the share whose spread ratio is at least as far from 1 as the observed one.
  The spread here is the mean absolute deviation from the median (Brown-Forsythe's),
  which uses every run; the IQR of five runs is too coarse to reject anything (measured
  on normal samples: never below p = 0.09, even at an 8x difference).
- `min_p_value`: the smallest p these run counts can give; above the test's level the
  test cannot reject, and says so.
- `null_within_share`: the share whose IQRs land within the factor, the score a simulator
  whose spread is the kernel's would expect on the 2x-IQR criterion at these run counts.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

# Beyond this many splits, a seeded random subset of this size: exact enumeration covers
# up to 7 + 7 runs (3432 splits).
MAX_SPLITS = 4096
# IQRs this close to 0 (Mbit/s) count as none: a noiseless engine against a noiseless one.
ZERO_SPREAD_MBPS = 1e-9


@dataclass(frozen=True)
class SpreadTest:
    p_value: float
    min_p_value: float
    null_within_share: float
    splits: int


def mean_iqr(runs_by_group: pd.DataFrame) -> float:
    """Interquartile range across runs (columns) of each group's goodput, averaged over groups."""
    return float(_mean_iqr(runs_by_group.to_numpy(dtype=float)[None])[0])


def _mean_iqr(values: np.ndarray) -> np.ndarray:
    """IQR over the last axis (linear interpolation, as pandas' quantile), averaged over groups (axis -2)."""
    q75, q25 = np.quantile(values, [0.75, 0.25], axis=-1)
    return (q75 - q25).mean(axis=-1)


def _mean_abs_deviation(centred: np.ndarray) -> np.ndarray:
    """Mean |deviation| from the median over the last axis (runs already centred), averaged over groups."""
    return np.abs(centred).mean(axis=-1).mean(axis=-1)


def _within(a: np.ndarray, b: np.ndarray, factor: float) -> np.ndarray:
    both_zero = (a <= ZERO_SPREAD_MBPS) & (b <= ZERO_SPREAD_MBPS)
    return both_zero | ((a <= factor * b) & (b <= factor * a))


def _distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|log(a / b)|, 0 when both are none."""
    return np.abs(np.log((a + ZERO_SPREAD_MBPS) / (b + ZERO_SPREAD_MBPS)))


def spread_test(sim_runs: pd.DataFrame, kernel_runs: pd.DataFrame, factor: float, *, seed: int = 0) -> SpreadTest:
    """`sim_runs` and `kernel_runs`: goodput per flow group (rows) and run (columns)."""
    groups = sim_runs.index.union(kernel_runs.index)
    sim = sim_runs.reindex(groups, fill_value=0.0).to_numpy(dtype=float)
    kernel = kernel_runs.reindex(groups, fill_value=0.0).to_numpy(dtype=float)
    pooled = np.concatenate([sim - np.median(sim, axis=1, keepdims=True), kernel - np.median(kernel, axis=1, keepdims=True)], axis=1)
    n_sim, n_total = sim.shape[1], pooled.shape[1]
    if math.comb(n_total, n_sim) <= MAX_SPLITS:
        sim_sides = np.array(list(itertools.combinations(range(n_total), n_sim)))
    else:
        rng = np.random.default_rng(seed)
        sim_sides = np.sort(np.array([rng.choice(n_total, n_sim, replace=False) for _ in range(MAX_SPLITS)]), axis=1)
    in_sim = np.zeros((len(sim_sides), n_total), dtype=bool)
    in_sim[np.arange(len(sim_sides))[:, None], sim_sides] = True
    order = np.argsort(~in_sim, axis=1, kind="stable")  # each split's sim runs first, then the kernel's
    arranged = pooled[:, order]  # groups x splits x runs
    sim_side, kernel_side = np.moveaxis(arranged[:, :, :n_sim], 0, 1), np.moveaxis(arranged[:, :, n_sim:], 0, 1)
    null_within = _within(_mean_iqr(sim_side), _mean_iqr(kernel_side), factor)
    distances = _distance(_mean_abs_deviation(sim_side), _mean_abs_deviation(kernel_side))
    centred_sim, centred_kernel = pooled[:, :n_sim], pooled[:, n_sim:]
    observed = _distance(_mean_abs_deviation(centred_sim[None]), _mean_abs_deviation(centred_kernel[None]))[0]
    # A relative tolerance: the observed split recurs among the splits, bit for bit or nearly.
    p_value = float(np.mean(distances >= observed * (1 - 1e-9)))
    min_p_value = float(np.mean(distances >= distances.max() * (1 - 1e-9)))
    return SpreadTest(p_value=p_value, min_p_value=min_p_value, null_within_share=float(np.mean(null_within)), splits=len(sim_sides))
