"""Shared machinery for fragmentation-aware plugins: per-node fragmentation and per-shape placement deltas,
both cached on node stamps so a decision only recomputes the nodes that changed since it was last asked.

The delta of placing a task on a node is F(before) - F(after): positive when the placement *reduces* the
node's expected fragmentation. For a shared-GPU task every device it fits on is a separate option; the node's
value is the best of them.

Which rows are computed together matters in the last bit: numpy's einsum sums a lone row differently from
the rows of a batch (any batch of two or more gives the same result for a row), and a delta of exactly 0
against one of -4.5e-13 is a different integer FGD score. The caches therefore compute exactly the batches
they always did: the nodes that changed since the tracker's (or the shape's) last refresh, and every node
on a first use. What changed is how those batches are found and how a full one is evaluated: the family's
transition log names the changed rows (no pass over every stamp), and a `StateTable` of interned node
states groups identical nodes without hashing the whole cluster again for every new shape.
"""

from __future__ import annotations

import weakref

import numpy as np

from suanli.scheduling.domain.fragmentation import FragmentationModel, NodeStats
from suanli.scheduling.domain.framework.cache import StampedRows
from suanli.scheduling.domain.model import GPU_MILLI, TaskRequest
from suanli.scheduling.domain.plugins._common import sigmoid_score
from suanli.scheduling.domain.snapshot import ClusterSnapshot

NOT_FEASIBLE = -np.inf
DEDUP_MIN_ROWS = 256
# The state table starts again from the current nodes once it holds this many times more states than
# nodes (states of nodes that have moved on stay behind until then).
STATES_PER_NODE = 2
MIN_STATES = 1024
# Past this many states to look up again, one pass over every node finds all their lowest nodes.
LOOKUPS_PER_PASS = 8

_MIX = np.array([(0x9E3779B97F4A7C15 * (i + 1)) & 0x7FFFFFFFFFFFFFFF for i in range(64)], dtype=np.int64)


def _state_keys(gpu_free: np.ndarray, cpu_free: np.ndarray, model_code: np.ndarray) -> np.ndarray:
    """[rows, 2 + devices] int64: what a node's fragmentation and deltas depend on."""
    # Filled column by column: stacking columns of mixed types costs several times more on a cluster.
    key = np.empty((gpu_free.shape[0], 2 + gpu_free.shape[1]), dtype=np.int64)
    key[:, 0] = cpu_free
    key[:, 1] = model_code
    key[:, 2:] = gpu_free
    return key


class StateTable:
    """Node states (free CPU, GPU model, free milli per device) of the snapshot last refreshed, interned:
    nodes in one state share an id. It groups identical nodes for the full evaluations (a first use of a
    shape, a new snapshot family) and is kept up to date on the changed nodes only."""

    def __init__(self) -> None:
        self._rows = StampedRows()
        self._ids: dict[bytes, int] = {}
        self.of_node = np.empty(0, dtype=np.int64)
        self.restarts = 0  # times the table started again (a new family, or too many states left behind)
        self._last: weakref.ref[ClusterSnapshot] | None = None
        # Per state id: how many nodes are in it and its lowest node (the node count when it has none, -1 when
        # that node left and the next one is looked up on demand), so that grouping the whole cluster
        # (a first use) reads these instead of scattering every node.
        self._count = np.zeros(0, dtype=np.int64)
        self._first = np.zeros(0, dtype=np.int64)

    def refresh(self, snapshot: ClusterSnapshot) -> np.ndarray:
        """[nodes] state id of every node of `snapshot`."""
        if self._last is not None and self._last() is snapshot:
            return self.of_node
        stale = self._rows.stale(snapshot)
        live = snapshot.live()
        if stale is None or len(self._ids) > max(MIN_STATES, STATES_PER_NODE * snapshot.size):
            self._ids = {}
            self.restarts += 1
            self.of_node = self._intern_all(_state_keys(live.gpu_free, live.cpu_free, snapshot.model_code))
            self._recount()
            stale = None
        elif stale.size:
            keys = _state_keys(live.gpu_free[stale], live.cpu_free[stale], snapshot.model_code[stale])
            self._move(stale, self._intern(keys))
        self._rows.mark(snapshot, stale)
        self._last = weakref.ref(snapshot)
        return self.of_node

    @property
    def size(self) -> int:
        """How many state ids are in use (every id is below it)."""
        return len(self._ids)

    def groups(self, snapshot: ClusterSnapshot) -> tuple[np.ndarray, np.ndarray]:
        """`_groups` over every node of `snapshot`: (the lowest node of each state that has one, in state
        id order; each node's index into that list)."""
        first, present = self.distinct(snapshot)
        rank = np.cumsum(present) - 1
        inverse: np.ndarray = rank[self.of_node]
        return first, inverse

    def distinct(self, snapshot: ClusterSnapshot) -> tuple[np.ndarray, np.ndarray]:
        """(the lowest node of each state some node of `snapshot` is in, in state id order; a mask over
        state ids of those states), for `spread`."""
        ids = self.refresh(snapshot)
        first = self._first[: self.size]
        left = np.flatnonzero(first < 0)  # states whose lowest node left: find the next one
        if left.size > LOOKUPS_PER_PASS:
            first[:] = ids.size
            first[ids[::-1]] = np.arange(ids.size - 1, -1, -1)  # the last write wins: the lowest
        else:
            for state in left.tolist():
                first[state] = int(np.argmax(ids == state))
        present = self._count[: self.size] > 0
        return first[present], present

    def spread(self, values: np.ndarray, present: np.ndarray) -> np.ndarray:
        """[nodes] the value of each node's state, from `values` of the states `distinct` named."""
        by_state = np.empty(self.size, dtype=values.dtype)
        by_state[present] = values
        spread: np.ndarray = by_state[self.of_node]
        return spread

    def _recount(self) -> None:
        ids, nodes = self.of_node, self.of_node.size
        self._count = np.bincount(ids, minlength=self.size).astype(np.int64)
        self._first = np.full(self.size, nodes, dtype=np.int64)
        self._first[ids[::-1]] = np.arange(nodes - 1, -1, -1)  # repeated indices keep the last: the lowest

    def _move(self, rows: np.ndarray, ids: np.ndarray) -> None:
        """Nodes `rows` (sorted, unique) are now in states `ids`."""
        old = self.of_node[rows]
        self.of_node[rows] = ids
        if self._count.size < self.size:
            grow = max(self.size, 2 * self._count.size) - self._count.size
            self._count = np.concatenate((self._count, np.zeros(grow, dtype=np.int64)))
            self._first = np.concatenate((self._first, np.full(grow, self.of_node.size, dtype=np.int64)))
        count, first = self._count, self._first
        for row, was, now in zip(rows.tolist(), old.tolist(), ids.tolist(), strict=True):
            if was == now:
                continue
            count[was] -= 1
            if count[was] == 0:
                first[was] = self.of_node.size
            elif first[was] == row:
                first[was] = -1
            count[now] += 1
            if count[now] == 1 or 0 <= row < first[now]:
                first[now] = row

    def _intern(self, keys: np.ndarray) -> np.ndarray:
        ids = self._ids
        return np.fromiter((ids.setdefault(row.tobytes(), len(ids)) for row in keys), np.int64, len(keys))

    def _intern_all(self, keys: np.ndarray) -> np.ndarray:
        """`_intern` for a whole cluster: identical rows are grouped first (one sort of a hash), so only
        the distinct states are hashed one by one."""
        with np.errstate(over="ignore"):
            digest = keys @ _MIX[: keys.shape[1]]
        # Each distinct digest's first row, by a scatter: `return_index` would sort stably, several times
        # slower on a cluster of many identical nodes.
        distinct, inverse = np.unique(digest, return_inverse=True)
        inverse = inverse.ravel()
        first = np.empty(distinct.size, dtype=np.int64)
        first[inverse[::-1]] = np.arange(inverse.size - 1, -1, -1)  # the last write wins: the first row
        if not np.array_equal(np.take(keys[first], inverse, axis=0), keys):  # a hash collision: one by one
            return self._intern(keys)
        found: np.ndarray = self._intern(keys[first])[inverse]
        return found


def _groups(states: StateTable, snapshot: ClusterSnapshot, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in `rows` of the first row of each state, index of each row's group), as a row-wise
    unique of the nodes' states would give them."""
    if rows.size == snapshot.size:  # every node (rows are sorted and unique): kept by the table
        return states.groups(snapshot)
    ids = states.refresh(snapshot)[rows]
    first_at = np.full(states.size, rows.size, dtype=np.int64)
    positions = np.arange(rows.size)
    first_at[ids[::-1]] = positions[::-1]  # repeated indices keep the last value assigned: the first row
    present = first_at < rows.size
    rank = np.cumsum(present) - 1
    inverse: np.ndarray = rank[ids]
    return first_at[present], inverse


class FragmentationTracker:
    """Statistics and fragmentation of every node, refreshed incrementally per snapshot."""

    def __init__(self, model: FragmentationModel, states: StateTable | None = None) -> None:
        self.model = model
        self.states = states or StateTable()
        self._rows = StampedRows()
        self._stats: NodeStats | None = None
        self._frag = np.empty(0)
        self._last: weakref.ref[ClusterSnapshot] | None = None

    def refresh(self, snapshot: ClusterSnapshot) -> tuple[NodeStats, np.ndarray]:
        if self._stats is not None and self._last is not None and self._last() is snapshot:
            return self._stats, self._frag
        stale = self._rows.stale(snapshot)
        live = snapshot.live()
        if stale is None or self._stats is None:
            self._stats, self._frag = self._full(snapshot)
        elif stale.size:
            part = self.model.stats(live.gpu_free[stale], live.cpu_free[stale], snapshot.model_code[stale])
            s = self._stats
            s.count_at_least[stale] = part.count_at_least
            s.sum_below[stale] = part.sum_below
            s.idle[stale] = part.idle
            s.cpu_free[stale] = part.cpu_free
            self._frag[stale] = self.model.fragmentation(part, snapshot.models)
        self._rows.mark(snapshot, stale)
        self._last = weakref.ref(snapshot)
        return self._stats, self._frag

    def _full(self, snapshot: ClusterSnapshot) -> tuple[NodeStats, np.ndarray]:
        """Every node's statistics and fragmentation, as one batch of every node would give them: each
        distinct state is measured once (in a batch of two or more: a batch's sums are the same for a row
        whichever rows come with it) and fanned out."""
        live = snapshot.live()
        everything = np.arange(snapshot.size)
        first, inverse = _groups(self.states, snapshot, everything)
        if first.size == 1 and snapshot.size > 1:
            first = np.repeat(first, 2)
        reps = self.model.stats(live.gpu_free[first], live.cpu_free[first], snapshot.model_code[first])
        frag = self.model.fragmentation(reps, snapshot.models)[inverse]
        # `np.take` gathers whole rows several times faster than indexing with an array.
        stats = NodeStats(
            np.take(reps.count_at_least, inverse, axis=0),
            np.take(reps.sum_below, inverse, axis=0),
            reps.idle[inverse],
            reps.cpu_free[inverse],
            np.asarray(snapshot.model_code),
        )
        return stats, frag

    def cluster_fragmentation(self, snapshot: ClusterSnapshot) -> float:
        return float(self.refresh(snapshot)[1].sum())


class _ShapeValues:
    """One request shape's best delta per node and FGD's integer score of it (NaN: marked, not computed
    yet), whether a marked node changed alone, and the node stamps they stand for."""

    __slots__ = ("lone", "rows", "scores", "values")

    def __init__(self) -> None:
        self.rows = StampedRows()
        self.reset(0)

    def reset(self, nodes: int) -> None:
        self.values = np.full(nodes, np.nan)
        self.scores = np.full(nodes, np.nan)
        self.lone = np.zeros(nodes, dtype=bool)

    def put(self, rows: np.ndarray | slice, values: np.ndarray) -> None:
        self.values[rows] = values
        self.scores[rows] = sigmoid_score(values)


def _take(s: NodeStats, rows: np.ndarray) -> NodeStats:
    return NodeStats(
        s.count_at_least[rows], s.sum_below[rows], s.idle[rows], s.cpu_free[rows], s.model_code[rows]
    )


class PlacementDeltas:
    """Fragmentation delta of placing a task, per node (best device option) and per device on one node."""

    def __init__(self, tracker: FragmentationTracker) -> None:
        self.tracker = tracker
        self._by_shape: dict[tuple[int, int, int], _ShapeValues] = {}

    @property
    def model(self) -> FragmentationModel:
        return self.tracker.model

    def per_node(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        """[nodes] best delta over device options; -inf where the task cannot fit on CPU or devices."""
        return self.for_rows(snapshot, request, np.arange(snapshot.size))

    def for_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray) -> np.ndarray:
        """`per_node(...)[rows]`. The nodes that changed since the shape was last asked about form one
        batch, as always; a small batch is only marked (with whether it was a lone node) and each node is
        computed when first asked for, in a batch of the same kind, so its value is the one the batch
        would have given it."""
        found: np.ndarray = self._shape(snapshot, request, rows).values[rows]
        return found

    def scores_for_rows(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray
    ) -> np.ndarray:
        """FGD's integer score of `for_rows(...)` (`sigmoid_score`), kept with the deltas: a full batch
        scores each distinct node state once."""
        found: np.ndarray = self._shape(snapshot, request, rows).scores[rows]
        return found

    def _shape(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray) -> _ShapeValues:
        """The shape's values, computed on `rows` at least."""
        stats, frag = self.tracker.refresh(snapshot)
        key = (request.cpu_milli, request.gpu_milli, request.gpu_count)
        shape = self._by_shape.get(key)
        if shape is None:
            shape = self._by_shape[key] = _ShapeValues()
        stale = shape.rows.stale(snapshot)
        if stale is None or shape.values.shape[0] != snapshot.size:
            if snapshot.size > DEDUP_MIN_ROWS:
                self._all(snapshot, (stats, frag), request, shape)
                shape.rows.mark(snapshot, None)
                return shape  # every node computed
            shape.reset(snapshot.size)
            stale = None
            target = np.arange(snapshot.size)
        else:
            target = stale
        if target.size > DEDUP_MIN_ROWS:
            shape.put(target, self._grid(snapshot, stats, frag, request, target, best=True))
        elif target.size:
            shape.values[target] = np.nan
            shape.lone[target] = target.size == 1
        shape.rows.mark(snapshot, stale)
        values = shape.values
        need = rows[np.isnan(values[rows])]
        if need.size:
            lone = shape.lone[need]
            for row in need[lone].tolist():
                one = np.array([row])
                shape.put(one, self._grid(snapshot, stats, frag, request, one, best=True))
            batch = need[~lone]
            if batch.size:
                padded = batch if batch.size > 1 else np.repeat(batch, 2)
                shape.put(batch, self._grid(snapshot, stats, frag, request, padded, best=True)[: batch.size])
        return shape

    def _all(
        self,
        snapshot: ClusterSnapshot,
        measured: tuple[NodeStats, np.ndarray],
        request: TaskRequest,
        shape: _ShapeValues,
    ) -> None:
        """Every node's value (more than `DEDUP_MIN_ROWS` nodes), as `_grid` over every node gives it,
        with the scores taken per distinct node state before they are spread over the nodes."""
        stats, frag = measured
        states = self.tracker.states
        first, present = states.distinct(snapshot)
        if first.size <= snapshot.size // 2:
            value = self._grid(snapshot, stats, frag, request, first, best=True)
            shape.values = states.spread(value, present)
            shape.scores = states.spread(sigmoid_score(value), present)
        else:  # as many states as nodes, or nearly: `_grid` would not group them either
            value = self._options(snapshot, measured, request, np.arange(snapshot.size)).max(axis=1)
            shape.values, shape.scores = value, sigmoid_score(value)
        shape.lone = np.zeros(snapshot.size, dtype=bool)

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
        best: bool = False,
    ) -> np.ndarray:
        """[rows, options] delta; options are devices for shared tasks, a single column otherwise. `best`:
        [rows], the best option of each."""
        if rows.size > DEDUP_MIN_ROWS:
            # Full recomputes (a shape's first use, a new snapshot family) see many identical nodes: evaluate
            # each distinct node state once (at its first node) and fan the result out.
            first, inverse = _groups(self.tracker.states, snapshot, rows)
            if first.size <= rows.size // 2:
                fanned: np.ndarray = self._grid(snapshot, stats, frag, request, rows[first], best)[inverse]
                return fanned
        grid = self._options(snapshot, (stats, frag), request, rows)
        return grid.max(axis=1) if best else grid

    def _options(
        self,
        snapshot: ClusterSnapshot,
        measured: tuple[NodeStats, np.ndarray],
        request: TaskRequest,
        rows: np.ndarray,
    ) -> np.ndarray:
        """[rows, options] delta, each row computed as given (no grouping)."""
        stats, frag = measured
        model = self.model
        live = snapshot.live()
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
            ok = cpu_ok & (live.gpu_full[rows] >= k)
            return np.where(ok, delta, NOT_FEASIBLE)[:, None]
        milli = request.gpu_milli
        free = live.gpu_free[rows].astype(np.int64)  # [R, G]
        ok = (free >= milli) & cpu_ok[:, None]
        out = np.full(free.shape, NOT_FEASIBLE)
        r, d = np.nonzero(ok)  # only the devices it fits on (padded slots and full devices never do)
        if r.size == 0:
            return out
        if r.size == 1 and free.size > 1:
            # Measured among the other devices, as a batch of two: a lone row would sum differently.
            r, d = np.repeat(r, 2), np.repeat(d, 2)
        was = free[r, d][:, None]
        now = was - milli
        thr = model.thresholds.astype(np.int64)[None, :]
        after = NodeStats(
            base.count_at_least[r] - (was >= thr) + (now >= thr),
            base.sum_below[r] - was * (was < thr) + np.maximum(now, 0) * (now < thr),
            (base.idle - milli)[r],
            cpu_after[r],
            base.model_code[r],
        )
        out[r, d] = frag[rows][r] - model.fragmentation(after, snapshot.models)
        # A model may also price the device gap itself (fgdb's pairing); it depends only on the device's
        # free milli before and after, so the per-state caches above still hold.
        device_delta = getattr(model, "device_delta", None)
        if device_delta is not None:
            out[r, d] += device_delta(was[:, 0], now[:, 0], milli)
        return out
