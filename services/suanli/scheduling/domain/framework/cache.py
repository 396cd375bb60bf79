"""Per-node memo keyed on snapshot stamps.

A plugin that derives expensive per-node values (fragmentation, per-shape scores) keeps them here and asks,
for each new snapshot, which rows are stale: those whose stamp differs from the stamp they were computed at.
A snapshot from another family (a different root) makes every row stale. This is a cache, not state: the
values are a pure function of each node's contents, so results never depend on what was cached before.
"""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.snapshot import ClusterSnapshot, StampAllocator


class StampedRows:
    """After `mark(snapshot, ...)` the memo holds every row at `snapshot`'s stamps. The next `stale` asks
    the family's transition log which rows may have moved since (a few, whatever the cluster's size) and
    keeps those whose stamp differs; when the log cannot say, it compares every stamp."""

    __slots__ = ("_at", "_family", "_stamps")

    def __init__(self) -> None:
        self._family: StampAllocator | None = None
        self._stamps = np.empty(0, dtype=np.int64)
        self._at = 0  # log position of the snapshot last marked

    def stale(self, snapshot: ClusterSnapshot) -> np.ndarray | None:
        """Rows to recompute, or None when everything must be recomputed (first use, other family)."""
        if self._family is not snapshot.stamps or self._stamps.shape[0] != snapshot.size:
            return None
        stamps = snapshot.live().node_stamp
        changed = snapshot.changed_since(self._at)
        if changed is None:
            return np.flatnonzero(self._stamps != stamps)
        rows: np.ndarray = changed[self._stamps[changed] != stamps[changed]]
        return rows

    def mark(self, snapshot: ClusterSnapshot, rows: np.ndarray | None) -> None:
        stamps = snapshot.live().node_stamp
        if rows is None:
            self._family = snapshot.stamps
            self._stamps = stamps.copy()
        else:
            self._stamps[rows] = stamps[rows]
        self._at = snapshot.position


class FreeGpuByModel:
    """Free GPU milli per GPU model of a snapshot, kept up to date on the nodes that changed since the
    snapshot it was last asked about (a sum over every node per decision costs ~1 ms at 50,000 nodes).
    Whole numbers throughout, so the totals are exactly what summing every node gives."""

    __slots__ = ("_idle", "_rows", "_totals")

    def __init__(self) -> None:
        self._rows = StampedRows()
        self._idle = np.empty(0, dtype=np.int64)  # [nodes] free milli on all devices
        self._totals = np.empty(0, dtype=np.int64)  # [model code]

    def totals(self, snapshot: ClusterSnapshot) -> np.ndarray:
        """[model code] free GPU milli of the nodes of each model, as floats."""
        stale = self._rows.stale(snapshot)
        live = snapshot.live()
        codes = snapshot.model_code
        if stale is None or self._totals.size != len(snapshot.models):
            stale = None
            self._idle = live.gpu_free.sum(axis=1, dtype=np.int64)
            self._totals = np.zeros(len(snapshot.models), dtype=np.int64)
            has = codes >= 0
            np.add.at(self._totals, codes[has], self._idle[has])
        elif stale.size:
            idle = live.gpu_free[stale].sum(axis=1, dtype=np.int64)
            has = codes[stale] >= 0
            np.add.at(self._totals, codes[stale][has], (idle - self._idle[stale])[has])
            self._idle[stale] = idle
        self._rows.mark(snapshot, stale)
        totals: np.ndarray = self._totals.astype(np.float64)
        return totals
