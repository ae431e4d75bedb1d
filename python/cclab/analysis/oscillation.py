"""The dominant period of an oscillation (e.g. BBR's and CUBIC's shares trading places).

Method: remove the mean and linear trend, take the autocorrelation, and find its first
significant peak after it has first gone negative. The lag of that peak is the period.
A series that never decorrelates (a trend, a constant) or whose later peaks are no
higher than noise has no oscillation: the answer is None.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

#: A peak must reach this autocorrelation to count as a repetition, not noise...
MIN_PEAK_CORRELATION = 0.2
#: ...and stand above the white-noise band: white noise of n samples has autocorrelations
#: with standard deviation about 1/sqrt(n); 3 sigma keeps false periods rare.
NOISE_SIGMAS = 3.0


def autocorrelation(values: Iterable[float]) -> np.ndarray:
    """The (biased) autocorrelation of a series at lags 0..n-1, with acf[0] = 1.

    Biased (divided by n at every lag) so that long lags, estimated from few pairs,
    are shrunk rather than amplified. Zero everywhere for a constant series.
    """
    x = np.asarray(list(values), dtype=float)
    n = x.size
    x = x - x.mean()
    size = 1 << (2 * n - 1).bit_length()  # zero-pad to avoid circular wrap-around
    spectrum = np.fft.rfft(x, size)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), size)[:n]
    if acov[0] <= 0:
        return np.zeros(n)
    return acov / acov[0]


def _detrend(x: np.ndarray) -> np.ndarray:
    t = np.arange(x.size, dtype=float)
    slope, intercept = np.polyfit(t, x, 1)
    return x - (slope * t + intercept)


def dominant_period_s(
    values: Iterable[float],
    sample_interval_s: float,
    *,
    min_peak: float = MIN_PEAK_CORRELATION,
    max_period_s: float | None = None,
) -> float | None:
    """The dominant period of `values` sampled every `sample_interval_s`, or None.

    Looks at lags up to half the series (a period must repeat at least twice to be seen)
    or `max_period_s`. The peak's lag is refined by a parabola through its neighbours.
    """
    x = np.asarray(list(values), dtype=float)
    if x.size < 8 or not np.all(np.isfinite(x)):
        return None
    x = _detrend(x)
    if np.allclose(x, 0.0, atol=1e-12 * max(1.0, float(np.max(np.abs(x))))):
        return None
    acf = autocorrelation(x)
    max_lag = x.size // 2
    if max_period_s is not None:
        max_lag = min(max_lag, int(max_period_s / sample_interval_s))
    threshold = max(min_peak, NOISE_SIGMAS / np.sqrt(x.size))
    negative = np.flatnonzero(acf[1 : max_lag + 1] < 0)
    if negative.size == 0:
        return None
    lag = int(negative[0]) + 1
    # Walk the lobes after the first zero crossing; the first lobe above the threshold wins.
    while lag <= max_lag:
        above = np.flatnonzero(acf[lag : max_lag + 1] > threshold)
        if above.size == 0:
            return None
        start = lag + int(above[0])
        below = np.flatnonzero(acf[start : max_lag + 1] < 0)
        end = start + int(below[0]) if below.size else max_lag + 1
        peak = start + int(np.argmax(acf[start:end]))
        if 0 < peak < acf.size - 1:
            return _refine(acf, peak) * sample_interval_s
        lag = end
    return None


def _refine(acf: np.ndarray, k: int) -> float:
    """Sub-sample peak position from a parabola through acf[k-1], acf[k], acf[k+1]."""
    left, mid, right = acf[k - 1], acf[k], acf[k + 1]
    denominator = left - 2 * mid + right
    if denominator >= 0:
        return float(k)
    return float(k + 0.5 * (left - right) / denominator)
