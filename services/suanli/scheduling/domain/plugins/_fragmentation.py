"""Shared machinery for fragmentation-aware plugins: per-node fragmentation and per-shape placement deltas,
both cached on node stamps so a decision only recomputes the nodes that changed since it was last asked.

The delta of placing a task on a node is F(before) - F(after): positive when the placement *reduces* the
node's expected fragmentation. For a shared-GPU task every device it fits on is a separate option; the node's
value is the best of them.
"""

from __future__ import annotations

import numpy as np

from suanli.scheduling.domain.fragmentation import FragmentationModel, NodeStats
from suanli.scheduling.domain.framework.cache import StampedRows
from suanli.scheduling.domain.model import GPU_MILLI, TaskRequest
from suanli.scheduling.domain.snapshot import ClusterSnapshot

NOT_FEASIBLE = -np.inf
DEDUP_MIN_ROWS = 256


class FragmentationTracker:
    """Statistics and fragmentation of every node, refreshed incrementally per snapshot."""

    def __init__(self, model: FragmentationModel) -> None:
        self.model = model
        self._rows = StampedRows()
        self._stats: NodeStats | None = None
        self._frag = np.empty(0)

    def refresh(self, snapshot: ClusterSnapshot) -> tuple[NodeStats, np.ndarray]:
        stale = self._rows.stale(snapshot)
        if stale is None or self._stats is None:
            self._stats = self.model.stats(snapshot.gpu_free, snapshot.cpu_free, snapshot.model_code)
            self._frag = self.model.fragmentation(self._stats, snapshot.models)
        elif stale.size:
            part = self.model.stats(
                snapshot.gpu_free[stale], snapshot.cpu_free[stale], snapshot.model_code[stale]
            )
            s = self._stats
            s.count_at_least[stale] = part.count_at_least
            s.sum_below[stale] = part.sum_below
            s.idle[stale] = part.idle
            s.cpu_free[stale] = part.cpu_free
            self._frag[stale] = self.model.fragmentation(part, snapshot.models)
        self._rows.mark(snapshot, stale)
        return self._stats, self._frag

    def cluster_fragmentation(self, snapshot: ClusterSnapshot) -> float:
        return float(self.refresh(snapshot)[1].sum())


_MIX = np.array([(0x9E3779B97F4A7C15 * (i + 1)) & 0x7FFFFFFFFFFFFFFF for i in range(64)], dtype=np.int64)


def _identical_rows(snapshot: ClusterSnapshot, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(representative rows, index of each row's representative) grouping nodes with identical state, or
    None if the hash grouping would merge different states (then the caller simply does not deduplicate).
    Hashing the rows to one integer keeps this a 1-D sort, far cheaper than numpy's row-wise unique."""
    key = np.column_stack((snapshot.cpu_free[rows], snapshot.model_code[rows], snapshot.gpu_free[rows]))
    key = key.astype(np.int64)
    with np.errstate(over="ignore"):
        digest = key @ _MIX[: key.shape[1]]
    _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(key[first][inverse], key):
        return None
    return first, inverse


def _take(s: NodeStats, rows: np.ndarray) -> NodeStats:
    return NodeStats(
        s.count_at_least[rows], s.sum_below[rows], s.idle[rows], s.cpu_free[rows], s.model_code[rows]
    )


class PlacementDeltas:
    """Fragmentation delta of placing a task, per node (best device option) and per device on one node."""

    def __init__(self, tracker: FragmentationTracker) -> None:
        self.tracker = tracker
        self._by_shape: dict[tuple[int, int, int], tuple[StampedRows, np.ndarray]] = {}

    @property
    def model(self) -> FragmentationModel:
        return self.tracker.model

    def per_node(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        """[nodes] best delta over device options; -inf where the task cannot fit on CPU or devices."""
        stats, frag = self.tracker.refresh(snapshot)
        key = (request.cpu_milli, request.gpu_milli, request.gpu_count)
        rows_memo, values = self._by_shape.get(key, (StampedRows(), np.empty(0)))
        stale = rows_memo.stale(snapshot)
        if stale is None or values.shape[0] != snapshot.size:
            values = np.empty(snapshot.size)
            target = np.arange(snapshot.size)
        else:
            target = stale
        if target.size:
            grid = self._grid(snapshot, stats, frag, request, target)
            values[target] = grid.max(axis=1)
        rows_memo.mark(snapshot, stale if target is stale else None)
        self._by_shape[key] = (rows_memo, values)
        return values

    def per_device(self, snapshot: ClusterSnapshot, request: TaskRequest, node: int) -> np.ndarray:
        """[devices] delta of putting a shared-GPU task on each device of `node`; -inf where it does not fit.
        For other tasks a single option (index 0) stands for the whole-node placement."""
        stats, frag = self.tracker.refresh(snapshot)
        options: np.ndarray = self._grid(snapshot, stats, frag, request, np.array([node]))[0]
        return options

    def _grid(
        self,
        snapshot: ClusterSnapshot,
        stats: NodeStats,
        frag: np.ndarray,
        request: TaskRequest,
        rows: np.ndarray,
    ) -> np.ndarray:
        """[rows, options] delta; options are devices for shared tasks, a single column otherwise."""
        if rows.size > DEDUP_MIN_ROWS:
            # Full recomputes (a shape's first use, a new snapshot family) see many identical nodes: evaluate
            # each distinct node state once and fan the result out.
            groups = _identical_rows(snapshot, rows)
            if groups is not None and groups[0].size <= rows.size // 2:
                first, inverse = groups
                fanned: np.ndarray = self._grid(snapshot, stats, frag, request, rows[first])[inverse]
                return fanned
        model = self.model
        base = _take(stats, rows)
        cpu_after = base.cpu_free - request.cpu_milli
        cpu_ok = cpu_after >= 0
        if request.gpu_count == 0:
            after = NodeStats(base.count_at_least, base.sum_below, base.idle, cpu_after, base.model_code)
            delta = frag[rows] - model.fragmentation(after, snapshot.models)
            return np.where(cpu_ok, delta, NOT_FEASIBLE)[:, None]
        if not request.is_shared_gpu:
            # Whole devices go from fully free to empty: they leave every "at least t" count and, being at
            # 0 afterwards, add nothing below any threshold.
            k = request.gpu_count
            after = NodeStats(
                base.count_at_least - k, base.sum_below, base.idle - k * GPU_MILLI, cpu_after, base.model_code
            )
            delta = frag[rows] - model.fragmentation(after, snapshot.models)
            ok = cpu_ok & (snapshot.gpu_full[rows] >= k)
            return np.where(ok, delta, NOT_FEASIBLE)[:, None]
        milli = request.gpu_milli
        free = snapshot.gpu_free[rows].astype(np.int64)  # [R, G]
        left = free - milli
        thr = model.thresholds.astype(np.int64)[None, None, :]
        was, now = free[:, :, None], left[:, :, None]
        count = base.count_at_least[:, None, :] - (was >= thr) + (now >= thr)
        below = base.sum_below[:, None, :] - was * (was < thr) + np.maximum(now, 0) * (now < thr)
        n_rows, n_dev = free.shape
        flat = NodeStats(
            count.reshape(n_rows * n_dev, -1),
            below.reshape(n_rows * n_dev, -1),
            np.repeat(base.idle - milli, n_dev),
            np.repeat(cpu_after, n_dev),
            np.repeat(base.model_code, n_dev),
        )
        frag_after = model.fragmentation(flat, snapshot.models).reshape(n_rows, n_dev)
        delta = frag[rows][:, None] - frag_after
        ok = (left >= 0) & cpu_ok[:, None]
        return np.where(ok, delta, NOT_FEASIBLE)
