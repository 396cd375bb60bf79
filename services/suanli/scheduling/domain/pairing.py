"""Which shared-GPU tasks complete which device gaps: prices from the cutting-stock LP of the workload.

The question a shared task's device choice answers is how a device's free milli will end up being used. Its
best answer, for a distribution of task sizes, is the fractional cutting-stock LP (Gilmore and Gomory): how
to fill devices with the typical sizes, in their proportions, so that as much GPU as possible is used. Its
dual gives every size a *profit* (its milli less the price of its scarcity), and a gap of `h` milli is worth
`gap_value[h]`, the most profit any multiset of sizes fitting in `h` makes (an unbounded knapsack). Putting a
task of profit p into a gap of `h` then has a *regret* gap_value[h] - gap_value[h - size] - p >= 0: zero
when the task is part of some best filling of the gap (a 320 into the 350 a 650 leaves), positive when it
spoils one (a 230 there leaves 120 that only 110s and 50s fill, while the 320s it could have taken go
elsewhere).

The LP is solved by column generation: a restricted master over the patterns found so far (a dense tableau
simplex, Bland's rule, since the LP is degenerate), priced by an unbounded knapsack over the device's milli
in units of the sizes' greatest common divisor. Pure numpy and Python; it runs once per distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from math import gcd

import numpy as np

from suanli.scheduling.domain.fragmentation import TypicalTask
from suanli.scheduling.domain.model import GPU_MILLI

EPS = 1e-9
MAX_UNITS = 200  # knapsack resolution: sizes are rounded up to multiples of GPU_MILLI / MAX_UNITS (5 milli)
MAX_ROUNDS = 500


@dataclass(frozen=True)
class GapPrices:
    """Per-size profit and per-gap value (index: free milli, 0..GPU_MILLI), in milli."""

    profit: dict[int, float]
    gap_value: np.ndarray

    def regret(self, was: np.ndarray, now: np.ndarray, milli: int) -> np.ndarray:
        """Profit lost by putting a task of `milli` into gaps of `was` milli (leaving `now`); >= 0."""
        own = self.profit.get(milli, float(self.gap_value[milli]))
        # Clipped at 0: the LP's duals are exact only to rounding, and a regret never pays.
        lost: np.ndarray = np.maximum(self.gap_value[was] - self.gap_value[now] - own, 0.0)
        return lost


def device_demand(tasks: Sequence[TypicalTask]) -> dict[int, float]:
    """Items per device by size: each typical GPU task's devices (whole devices count as GPU_MILLI-milli
    items), scaled so that they add up to exactly one device's milli."""
    rate: dict[int, float] = {}
    for t in tasks:
        if t.gpu_count > 0 and t.gpu_milli > 0:
            rate[t.gpu_milli] = rate.get(t.gpu_milli, 0.0) + t.weight * t.gpu_count
    volume = sum(size * r for size, r in rate.items())
    return {size: r * GPU_MILLI / volume for size, r in rate.items()} if volume > 0 else {}


def _knapsack(units: np.ndarray, profit: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Unbounded knapsack: best profit per capacity 0..capacity and the last item taken (-1: none)."""
    best = np.zeros(capacity + 1)
    last = np.full(capacity + 1, -1, dtype=np.int64)
    for c in range(1, capacity + 1):
        value, item = best[c - 1], -1
        for i in range(units.size):
            if units[i] <= c and best[c - units[i]] + profit[i] > value + EPS:
                value, item = best[c - units[i]] + profit[i], i
        best[c], last[c] = value, item
    return best, last


def _pattern(units: np.ndarray, last: np.ndarray, capacity: int) -> np.ndarray:
    counts = np.zeros(units.size)
    c = capacity
    while c > 0:
        if last[c] < 0:
            c -= 1
        else:
            counts[last[c]] += 1
            c -= int(units[last[c]])
    return counts


def _simplex_duals(columns: np.ndarray, values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Duals of max values.x s.t. columns x <= bounds, x >= 0 (bounds >= 0): a tableau simplex from the slack
    basis with Bland's rule (no cycling on this degenerate LP)."""
    rows, cols = columns.shape
    tableau = np.zeros((rows + 1, cols + rows + 1))
    tableau[:rows, :cols] = columns
    tableau[:rows, cols : cols + rows] = np.eye(rows)
    tableau[:rows, -1] = bounds
    tableau[rows, :cols] = -values
    basis = list(range(cols, cols + rows))
    for _ in range(50 * (rows + cols)):
        entering = np.flatnonzero(tableau[rows, :-1] < -EPS)
        if entering.size == 0:
            break
        e = int(entering[0])
        column = tableau[:rows, e]
        positive = column > EPS
        ratio = np.full(rows, np.inf)
        ratio[positive] = tableau[:rows, -1][positive] / column[positive]
        tied = np.flatnonzero(ratio <= ratio.min() + EPS)
        leave = int(min(tied, key=lambda r: basis[r]))
        tableau[leave] /= tableau[leave, e]
        for r in range(rows + 1):
            if r != leave and tableau[r, e] != 0:
                tableau[r] -= tableau[r, e] * tableau[leave]
        basis[leave] = e
    duals: np.ndarray = tableau[rows, cols : cols + rows].copy()
    return duals


def solve_prices(demand: dict[int, float]) -> GapPrices:
    """Cutting-stock duals for `demand` (items per device by size) and the gap values they give."""
    sizes = np.array(sorted(demand), dtype=np.int64)
    if sizes.size == 0:
        return GapPrices({}, np.zeros(GPU_MILLI + 1))
    unit = reduce(gcd, [int(s) for s in sizes], GPU_MILLI)
    unit = max(unit, GPU_MILLI // MAX_UNITS)
    capacity = GPU_MILLI // unit
    units = -(-sizes // unit)  # rounded up: a size never fits where it would not
    need = np.array([demand[int(s)] for s in sizes])
    # Restricted master: one device row, one row per size; start from single-size patterns.
    patterns = [np.eye(sizes.size)[i] * (capacity // units[i]) for i in range(sizes.size)]
    y = np.zeros(sizes.size)
    for _ in range(MAX_ROUNDS):
        columns = np.vstack([np.ones(len(patterns)), np.array(patterns).T])
        values = sizes.astype(np.float64) @ np.array(patterns).T
        duals = _simplex_duals(columns, values, np.concatenate([[1.0], need]))
        z, y = duals[0], duals[1:]
        best, last = _knapsack(units, sizes - y, capacity)
        if best[capacity] <= z + 1e-6:
            break
        patterns.append(_pattern(units, last, capacity))
    profit = sizes - y
    best, _ = _knapsack(units, profit, capacity)
    gap_value = best[np.arange(GPU_MILLI + 1) // unit]
    return GapPrices({int(s): float(p) for s, p in zip(sizes, profit, strict=True)}, gap_value)


@lru_cache(maxsize=16)
def gap_prices(tasks: tuple[TypicalTask, ...]) -> GapPrices:
    """`solve_prices` of the tasks' device demand, once per distribution (profiles build one per plugin)."""
    return solve_prices(device_demand(tasks))
