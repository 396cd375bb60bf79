"""Shared machinery for fragmentation-aware plugins: per-node fragmentation and per-shape placement deltas.

Both are functions of a node's *state* alone (free milli per device, free CPU, GPU model), and a cluster
has far fewer distinct states than nodes (replicated node groups, empty nodes of one kind). The tracker
interns states: every node maps to a state id, statistics and fragmentation are kept per state, and a
shape's deltas are computed once per state and read through the nodes' ids. A snapshot change re-interns
only the nodes whose stamp moved, so a decision evaluates the few states it has not seen; the first
decision on a large cluster evaluates each distinct state once.

The delta of placing a task on a node is F(before) - F(after): positive when the placement *reduces* the
node's expected fragmentation. For a shared-GPU task every device it fits on is a separate option; the node's
value is the best of them.
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
# The state table drops the states no node is in once it holds this many times more states than nodes
# (states of nodes that have moved on stay behind until then).
STATES_PER_NODE = 2
MIN_STATES = 1024
KEPT_COMPACTIONS = 64  # a per-shape cache older than this many compactions starts again
RECENT_OPTIONS = 64

_MIX = np.array([(0x9E3779B97F4A7C15 * (i + 1)) & 0x7FFFFFFFFFFFFFFF for i in range(64)], dtype=np.int64)


def _state_keys(gpu_free: np.ndarray, cpu_free: np.ndarray, model_code: np.ndarray) -> np.ndarray:
    """[rows, 2 + devices] int64: what a node's fragmentation and deltas depend on."""
    key: np.ndarray = np.column_stack((cpu_free, model_code, gpu_free)).astype(np.int64)
    return key


def _identical_rows(key: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(representative rows, index of each row's representative) grouping identical rows of `key`, or None
    if the hash grouping would merge different rows (then the caller groups them one by one). Hashing the
    rows to one integer keeps this a 1-D sort, far cheaper than numpy's row-wise unique."""
    with np.errstate(over="ignore"):
        digest = key @ _MIX[: key.shape[1]]
    _, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    if not np.array_equal(key[first][inverse], key):
        return None
    return first, inverse


def _unique(a: np.ndarray) -> np.ndarray:
    """`np.unique`, by Python for the few ids of one decision (cheaper than numpy's sort there)."""
    if a.size <= 16:
        return np.array(sorted(set(a.tolist())), dtype=a.dtype)
    return np.unique(a)


def _take(s: NodeStats, rows: np.ndarray) -> NodeStats:
    return NodeStats(
        s.count_at_least[rows], s.sum_below[rows], s.idle[rows], s.cpu_free[rows], s.model_code[rows]
    )


class _States:
    """Interned node states: per state its statistics, fragmentation, free milli per device and count of
    fully free devices; `of_node` maps each node of the tracked snapshot to its state."""

    def __init__(self, model: FragmentationModel, models: tuple[str, ...], width: int) -> None:
        self.model = model
        self.models = models
        self.ids: dict[bytes, int] = {}
        self.count = 0
        capacity = 64
        thresholds = model.thresholds.size
        self.stats = NodeStats(
            np.zeros((capacity, thresholds), dtype=np.int32),
            np.zeros((capacity, thresholds), dtype=np.int64),
            np.zeros(capacity, dtype=np.int64),
            np.zeros(capacity, dtype=np.int64),
            np.zeros(capacity, dtype=np.int32),
        )
        self.frag = np.zeros(capacity)
        self.free = np.zeros((capacity, width), dtype=np.int64)
        self.full = np.zeros(capacity, dtype=np.int64)
        self.of_node = np.empty(0, dtype=np.int64)

    def add(self, keys: np.ndarray) -> np.ndarray:
        """Ids of the states `keys` ([rows, 2 + devices], distinct and not yet interned), computed."""
        n = keys.shape[0]
        start = self.count
        self._reserve(start + n)
        cpu, code, free = keys[:, 0], keys[:, 1].astype(np.int32), keys[:, 2:]
        part = self.model.stats(free, cpu, code)
        new = np.arange(start, start + n)
        s = self.stats
        s.count_at_least[new] = part.count_at_least
        s.sum_below[new] = part.sum_below
        s.idle[new] = part.idle
        s.cpu_free[new] = part.cpu_free
        s.model_code[new] = code
        self.frag[new] = self.model.fragmentation(part, self.models)
        self.free[new] = free
        self.full[new] = (free == GPU_MILLI).sum(axis=1)
        for i, row in enumerate(keys):
            self.ids[row.tobytes()] = start + i
        self.count = start + n
        return new

    def intern(self, keys: np.ndarray) -> np.ndarray:
        """[rows] state id of each key row, interning the new ones."""
        ids = np.empty(keys.shape[0], dtype=np.int64)
        fresh: dict[bytes, list[int]] = {}
        for i, row in enumerate(keys):
            b = row.tobytes()
            found = self.ids.get(b)
            if found is None:
                fresh.setdefault(b, []).append(i)
            else:
                ids[i] = found
        if fresh:
            positions = list(fresh.values())
            new = self.add(keys[[p[0] for p in positions]])
            for state, p in zip(new, positions, strict=True):
                ids[p] = state
        return ids

    def intern_all(self, keys: np.ndarray) -> np.ndarray:
        """Like `intern` for a whole cluster: groups identical rows first (one sort), so only the distinct
        states are hashed and computed one by one."""
        groups = _identical_rows(keys)
        if groups is None:
            return self.intern(keys)
        first, inverse = groups
        ids: np.ndarray = self.intern(keys[first])[inverse]
        return ids

    def keep(self, used: np.ndarray) -> None:
        """Keep only the states `used` (sorted ids), renumbered 0.. in that order, values unchanged."""
        remap = np.full(self.count, -1, dtype=np.int64)
        remap[used] = np.arange(used.size)
        s = self.stats
        self.stats = NodeStats(
            *(a[used] for a in (s.count_at_least, s.sum_below, s.idle, s.cpu_free, s.model_code))
        )
        self.frag = self.frag[used]
        self.free = self.free[used]
        self.full = self.full[used]
        self.ids = {k: int(remap[v]) for k, v in self.ids.items() if remap[v] >= 0}
        self.of_node = remap[self.of_node]
        self.count = int(used.size)

    def _reserve(self, size: int) -> None:
        capacity = self.frag.shape[0]
        if size <= capacity:
            return
        while capacity < size:
            capacity *= 2

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((capacity, *a.shape[1:]), dtype=a.dtype)
            out[: a.shape[0]] = a
            return out

        s = self.stats
        self.stats = NodeStats(
            *(grow(a) for a in (s.count_at_least, s.sum_below, s.idle, s.cpu_free, s.model_code))
        )
        self.frag = grow(self.frag)
        self.free = grow(self.free)
        self.full = grow(self.full)


def _grown(values: np.ndarray, size: int) -> np.ndarray:
    grown = np.full(size, np.nan)
    grown[: values.shape[0]] = values
    return grown


class FragmentationTracker:
    """The state of every node of a snapshot, interned, with statistics and fragmentation per state."""

    def __init__(self, model: FragmentationModel) -> None:
        self.model = model
        self._rows = StampedRows()
        self._states: _States | None = None
        # Bumped whenever state ids change: when the table starts again (per-state caches start again
        # too) and when it is compacted (`_kept` says how per-state arrays follow, so a state's values
        # are never computed twice: the same state always scores the same).
        self.generation = 0
        self._kept: dict[int, tuple[np.ndarray, int]] = {}  # generation -> (ids kept, count before)
        # The snapshot `of_node` was last brought up to date for (a score and the device choice of one
        # decision ask about the same one); weak, so that the tracker keeps no snapshot chain alive.
        self._last: weakref.ref[ClusterSnapshot] | None = None

    def refresh(self, snapshot: ClusterSnapshot) -> _States:
        """The state table with `of_node` up to date for `snapshot` (only changed nodes re-interned)."""
        states = self._states
        if states is not None and self._last is not None and self._last() is snapshot:
            return states
        stale = self._rows.stale(snapshot)
        live = snapshot.live()
        if stale is None or states is None or states.models is not snapshot.models:
            states = self._states = _States(self.model, snapshot.models, snapshot.max_gpus)
            self.generation += 1
            keys = _state_keys(live.gpu_free, live.cpu_free, snapshot.model_code)
            states.of_node = states.intern_all(keys)
            stale = None
        elif stale.size:
            keys = _state_keys(live.gpu_free[stale], live.cpu_free[stale], snapshot.model_code[stale])
            states.of_node[stale] = states.intern(keys)
            if states.count > max(MIN_STATES, STATES_PER_NODE * snapshot.size):
                used = np.unique(states.of_node)
                self.generation += 1
                self._kept[self.generation] = (used, states.count)
                self._kept.pop(self.generation - KEPT_COMPACTIONS, None)
                states.keep(used)
        self._rows.mark(snapshot, stale)
        self._last = weakref.ref(snapshot)
        return states

    def carried(self, generation: int, arrays: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Per-state arrays of `generation` renumbered for the current one (NaN-padded states that came
        later stay unknown); empty arrays when the table started again since."""
        for step in range(generation + 1, self.generation + 1):
            kept = self._kept.get(step)
            if kept is None:
                return tuple(np.empty(0) for _ in arrays)
            used, count = kept
            arrays = tuple(_grown(a, count)[used] if a.shape[0] < count else a[used] for a in arrays)
        return arrays

    def node_fragmentation(self, snapshot: ClusterSnapshot) -> np.ndarray:
        """[nodes] fragmentation of every node of `snapshot`."""
        states = self.refresh(snapshot)
        frag: np.ndarray = states.frag[states.of_node]
        return frag

    def cluster_fragmentation(self, snapshot: ClusterSnapshot) -> float:
        return float(self.node_fragmentation(snapshot).sum())


class PlacementDeltas:
    """Fragmentation delta of placing a task, per node (best device option) and per device on one node."""

    def __init__(self, tracker: FragmentationTracker) -> None:
        self.tracker = tracker
        # Per request shape: the tracker generation, the best delta per state (NaN: not computed yet) and
        # FGD's integer score of it.
        self._by_shape: dict[tuple[int, int, int], tuple[int, np.ndarray, np.ndarray]] = {}
        # Device options of the states evaluated lately, per (shape, generation, state): the node a decision
        # takes is often one whose state the same decision's scores had to evaluate.
        self._options: dict[tuple[tuple[int, int, int], int, int], np.ndarray] = {}

    @property
    def model(self) -> FragmentationModel:
        return self.tracker.model

    def per_node(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        """[nodes] best delta over device options; -inf where the task cannot fit on CPU or devices."""
        return self.for_rows(snapshot, request, np.arange(snapshot.size))

    def for_rows(
        self, snapshot: ClusterSnapshot, request: TaskRequest, rows: np.ndarray, scored: bool = False
    ) -> np.ndarray:
        """`per_node(...)[rows]`, computing only the states of `rows` not seen before for this shape;
        `scored`: FGD's integer score of it instead, `sigmoid_score(per_node(...)[rows])`."""
        states = self.tracker.refresh(snapshot)
        key = (request.cpu_milli, request.gpu_milli, request.gpu_count)
        generation, values, scores = self._by_shape.get(key, (-1, np.empty(0), np.empty(0)))
        if generation != self.tracker.generation:
            values, scores = self.tracker.carried(generation, (values, scores))
            self._by_shape[key] = (self.tracker.generation, values, scores)
        if values.shape[0] < states.count:
            values = _grown(values, states.frag.shape[0])
            scores = _grown(scores, states.frag.shape[0])
            self._by_shape[key] = (self.tracker.generation, values, scores)
        ids = states.of_node[rows]
        if rows.size * 2 > states.count:
            missing = np.flatnonzero(np.isnan(values[: states.count]))
        else:
            missing = _unique(ids[np.isnan(values[ids])])
        if missing.size:
            grid = self._grid(states, request, missing)
            best = grid.max(axis=1)
            values[missing] = best
            scores[missing] = sigmoid_score(best)
            if missing.size <= RECENT_OPTIONS:
                generation = self.tracker.generation
                for state, options in zip(missing.tolist(), grid, strict=True):
                    self._remember((key, generation, state), options)
        found: np.ndarray = (scores if scored else values)[ids]
        return found

    def per_device(self, snapshot: ClusterSnapshot, request: TaskRequest, node: int) -> np.ndarray:
        """[devices] delta of putting a shared-GPU task on each device of `node`; -inf where it does not fit.
        For other tasks a single option (index 0) stands for the whole-node placement."""
        states = self.tracker.refresh(snapshot)
        state = int(states.of_node[node])
        key = ((request.cpu_milli, request.gpu_milli, request.gpu_count), self.tracker.generation, state)
        options = self._options.get(key)
        if options is None:
            options = self._grid(states, request, np.array([state]))[0]
            self._remember(key, options)
        return options

    def _remember(self, key: tuple[tuple[int, int, int], int, int], options: np.ndarray) -> None:
        self._options[key] = options
        if len(self._options) > RECENT_OPTIONS:
            del self._options[next(iter(self._options))]

    def _grid(self, states: _States, request: TaskRequest, ids: np.ndarray) -> np.ndarray:
        """[ids, options] delta for states `ids`: a column per device for shared tasks, else one."""
        model = self.model
        base = _take(states.stats, ids)
        frag = states.frag[ids]
        cpu_after = base.cpu_free - request.cpu_milli
        cpu_ok = cpu_after >= 0
        if request.gpu_count == 0:
            after = NodeStats(base.count_at_least, base.sum_below, base.idle, cpu_after, base.model_code)
            delta = frag - model.fragmentation(after, states.models)
            return np.where(cpu_ok, delta, NOT_FEASIBLE)[:, None]
        if not request.is_shared_gpu:
            # Whole devices go from fully free to empty: they leave every "at least t" count and, being at
            # 0 afterwards, add nothing below any threshold.
            k = request.gpu_count
            after = NodeStats(
                base.count_at_least - k, base.sum_below, base.idle - k * GPU_MILLI, cpu_after, base.model_code
            )
            delta = frag - model.fragmentation(after, states.models)
            ok = cpu_ok & (states.full[ids] >= k)
            return np.where(ok, delta, NOT_FEASIBLE)[:, None]
        milli = request.gpu_milli
        free = states.free[ids]  # [R, G]
        ok = (free >= milli) & cpu_ok[:, None]
        out = np.full(free.shape, NOT_FEASIBLE)
        r, d = np.nonzero(ok)  # only the devices it fits on (padded slots and full devices never do)
        if r.size == 0:
            return out
        if r.size == 1 and free.size > 1:
            # numpy's einsum sums a lone row unlike the rows of a batch (in the last bit): measure it in a
            # batch of two, as it would be among the other devices, so its value does not depend on them.
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
        out[r, d] = frag[r] - model.fragmentation(after, states.models)
        return out
