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
