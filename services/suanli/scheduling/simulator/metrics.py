"""Per-arrival metrics binned by arrived workload, as the FGD paper's analysis scripts do (METHOD.md §4).

x = round(arrived GPU milli / capacity * 100) in 0..max; the value at x is the mean over the arrival events
whose rounded x equals it, or, when there are none, over events within x +/- 1. Bins still empty after that
(only on tiny clusters, where one pod is several percent of capacity) carry the previous bin's value: the
cluster state does not change between arrivals.
"""

from __future__ import annotations

import numpy as np

MAX_ARRIVED_PCT = 130


def arrived_bins(arrived_milli: np.ndarray, capacity_milli: int) -> np.ndarray:
    # Round half up, like Python 2 / pandas' round on these positive values, not banker's rounding.
    return np.floor(arrived_milli / capacity_milli * 100 + 0.5).astype(np.int64)


def binned(values: np.ndarray, bins: np.ndarray, top: int = MAX_ARRIVED_PCT) -> np.ndarray:
    """[top + 1] mean of `values` per integer bin; NaN only before the first event."""
    out = np.full(top + 1, np.nan)
    if values.size == 0:
        return out
    sums = np.bincount(np.clip(bins, 0, top + 2), weights=values, minlength=top + 3)[: top + 1]
    counts = np.bincount(np.clip(bins, 0, top + 2), minlength=top + 3)[: top + 1]
    exact = counts > 0
    out[exact] = sums[exact] / counts[exact]
    for x in np.flatnonzero(~exact):
        near = np.abs(bins - x) <= 1
        if near.any():
            out[x] = float(values[near].mean())
        elif x > 0 and not np.isnan(out[x - 1]):
            out[x] = out[x - 1]
    return out


def value_at(curve: np.ndarray, x: int) -> float:
    return float(curve[x]) if x < curve.size else float("nan")
