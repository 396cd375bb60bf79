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
    __slots__ = ("_family", "_stamps")

    def __init__(self) -> None:
        self._family: StampAllocator | None = None
        self._stamps = np.empty(0, dtype=np.int64)

    def stale(self, snapshot: ClusterSnapshot) -> np.ndarray | None:
        """Rows to recompute, or None when everything must be recomputed (first use, other family)."""
        if self._family is not snapshot.stamps or self._stamps.shape[0] != snapshot.size:
            return None
        return np.flatnonzero(self._stamps != snapshot.node_stamp)

    def mark(self, snapshot: ClusterSnapshot, rows: np.ndarray | None) -> None:
        if rows is None:
            self._family = snapshot.stamps
            self._stamps = snapshot.node_stamp.copy()
        else:
            self._stamps[rows] = snapshot.node_stamp[rows]
