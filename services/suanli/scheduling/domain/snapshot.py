"""Immutable, vectorised view of a cluster for placement decisions.

Filters and scores work on whole columns (one entry per node) so that a decision costs a handful of numpy
operations, not a Python loop over nodes. A snapshot is never changed: `assign` and `release` return a new
snapshot that shares the static columns and copies the mutable ones.

Every node carries a *stamp*: a number that changes whenever the node's free resources change. Stamps come
from a counter shared by every snapshot derived from the same root, so within that family a (node, stamp)
pair names exactly one node state. Plugins key their per-node caches on stamps and recompute only the nodes
whose stamp moved, which is what makes fragmentation-aware scoring affordable on thousands of nodes.

A transition does not copy the free columns. The snapshots of one family share one set of working arrays
(`_Store`) holding the state of the newest snapshot; each older snapshot keeps only the rows that differ
from the next one (Baker's "rerooting" persistent arrays). Reading an older snapshot swaps those rows back
along the chain, so a decision on the newest snapshot costs the rows it changed, not the cluster's size,
and an older snapshot read again (a discarded gang, an explanation) costs the rows changed since. The
public columns (`cpu_free`, `gpu_free`, ...) are immutable copies made on first read of each snapshot;
hot paths read `live()` instead, views of the working arrays valid until another snapshot of the family
is read or derived.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from suanli.scheduling.domain.model import GPU_MILLI, Node, TaskRequest

IntArray = np.ndarray


class StampAllocator:
    """Hands out node stamps, unique across one family of snapshots (a root and all derived from it)."""

    __slots__ = ("_next",)

    def __init__(self, start: int) -> None:
        self._next = start

    def take(self) -> int:
        stamp = self._next
        self._next += 1
        return stamp


def gpu_task_class(request: TaskRequest) -> int:
    """Class of a GPU task for affinity bookkeeping: 0 = shared fraction of one GPU, k = k whole GPUs,
    -1 = no GPU. Mirrors the FGD simulator's "share-gpu / k-gpu / no-gpu" tags."""
    if request.gpu_count == 0:
        return -1
    if request.is_shared_gpu:
        return 0
    return request.gpu_count


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where one task goes, by node position in the snapshot, and what it takes from each device."""

    node: int
    gpu_indices: tuple[int, ...] = ()
    gpu_milli: tuple[int, ...] = ()


FABRIC_LABEL = "fabric"


def _fabric_domain(node: Node) -> str | None:
    """The node's NVLink/InfiniBand/RoCE domain: nodes of one zone with the same `fabric` label value talk
    over one high-bandwidth fabric. Keyed by zone too, so two sites naming their fabrics alike stay apart."""
    fabric = node.label(FABRIC_LABEL)
    return None if not fabric else f"{node.region}/{node.zone}/{fabric}"


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class _FreeColumn:
    """A free column of a snapshot (`cpu_free`, `gpu_free`, ...): an immutable copy of the family's working
    array, made on the snapshot's first read of it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, snapshot: ClusterSnapshot, owner: type | None = None) -> IntArray:
        return snapshot._column(self.name)


class ClusterSnapshot:
    """Columns of free and total resources, one row per node.

    `gpu_free` is 2-D (node, device) and padded with zeros past each node's device count: a padded slot
    never fits a request (every GPU request is >= 1 milli) and adds nothing to idle or fragmented milli,
    so no mask is needed in the hot paths. `gpu_full` (fully free devices) and `gpu_max` (largest free
    slice) are kept alongside so the common feasibility tests are one comparison per node.
    """

    __slots__ = (
        "__weakref__",
        "_diff",
        "_frozen",
        "_index",
        "_model_masks",
        "_position",
        "_store",
        "cpu_capacity",
        "fabric_code",
        "fabrics",
        "gpu_count",
        "labels",
        "mem_capacity",
        "model_code",
        "models",
        "node_ids",
        "region_code",
        "regions",
        "stamps",
        "zone_code",
        "zones",
    )

    node_ids: tuple[str, ...]
    models: tuple[str, ...]
    regions: tuple[str, ...]
    zones: tuple[str, ...]  # "region/zone": zone names repeat across regions
    fabrics: tuple[str, ...]  # "region/zone/fabric": a fabric domain never spans zones
    labels: tuple[frozenset[tuple[str, str]], ...]
    cpu_capacity: IntArray
    mem_capacity: IntArray
    gpu_count: IntArray
    model_code: IntArray
    region_code: IntArray
    zone_code: IntArray
    fabric_code: IntArray  # -1: the node is in no fabric domain (no `fabric` label)
    stamps: StampAllocator
    _index: dict[str, int]
    _model_masks: dict[tuple[str, ...], np.ndarray]
    _store: _Store
    _diff: _Diff | None  # None: this snapshot is the store's head
    _frozen: dict[str, np.ndarray]  # public columns already copied out
    _position: int  # this snapshot's transition in the family's log (0: the root)

    # -- construction -------------------------------------------------------------------------------------

    @classmethod
    def from_nodes(cls, nodes: Sequence[Node]) -> ClusterSnapshot:
        if not nodes:
            raise ValueError("a snapshot needs at least one node")
        ids = tuple(n.id for n in nodes)
        if len(set(ids)) != len(ids):
            raise ValueError("node ids must be unique")
        models = tuple(sorted({g.model for n in nodes for g in n.gpus}))
        regions = tuple(sorted({n.region for n in nodes}))
        zones = tuple(sorted({f"{n.region}/{n.zone}" for n in nodes}))
        width = max(1, max(len(n.gpus) for n in nodes))
        count = len(nodes)
        gpu_free = np.zeros((count, width), dtype=np.int32)
        model_code = np.full(count, -1, dtype=np.int32)
        for row, node in enumerate(nodes):
            for slot, device in enumerate(sorted(node.gpus, key=lambda d: d.index)):
                gpu_free[row, slot] = device.free_milli
            if node.gpus:
                if len({g.model for g in node.gpus}) != 1:
                    raise ValueError(f"node {node.id}: mixed GPU models are not supported")
                model_code[row] = models.index(node.gpus[0].model)
        cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        cpu_free = np.array(
            [n.cpu_milli if n.free_cpu_milli is None else n.free_cpu_milli for n in nodes], dtype=np.int64
        )
        mem_free = np.array(
            [n.memory_mib if n.free_memory_mib is None else n.free_memory_mib for n in nodes], dtype=np.int64
        )
        snap = cls.__new__(cls)
        snap.node_ids = ids
        snap.models = models
        snap.regions = regions
        snap.labels = tuple(frozenset(n.labels) for n in nodes)
        snap.cpu_capacity = _readonly(cpu_cap)
        snap.mem_capacity = _readonly(mem_cap)
        snap.gpu_count = _readonly(np.array([len(n.gpus) for n in nodes], dtype=np.int32))
        snap.model_code = _readonly(model_code)
        region_index = {r: i for i, r in enumerate(regions)}
        zone_index = {z: i for i, z in enumerate(zones)}
        snap.zones = zones
        snap.region_code = _readonly(np.array([region_index[n.region] for n in nodes], dtype=np.int32))
        snap.zone_code = _readonly(
            np.array([zone_index[f"{n.region}/{n.zone}"] for n in nodes], dtype=np.int32)
        )
        fabric_names = [_fabric_domain(n) for n in nodes]
        snap.fabrics = tuple(sorted({f for f in fabric_names if f is not None}))
        fabric_index = {f: i for i, f in enumerate(snap.fabrics)}
        snap.fabric_code = _readonly(
            np.array([-1 if f is None else fabric_index[f] for f in fabric_names], dtype=np.int32)
        )
        snap._store = _Store(
            FreeColumns(
                cpu_free=cpu_free,
                mem_free=mem_free,
                gpu_free=gpu_free,
                gpu_full=(gpu_free == GPU_MILLI).sum(axis=1).astype(np.int32),
                gpu_max=gpu_free.max(axis=1).astype(np.int32),
                class_counts=np.zeros((count, width + 1), dtype=np.int32),
                node_stamp=np.arange(count, dtype=np.int64),
            ),
            snap,
        )
        snap._diff = None
        snap._frozen = {}
        snap._position = 0
        snap.stamps = StampAllocator(count)
        snap._index = {node_id: i for i, node_id in enumerate(ids)}
        snap._model_masks = {}  # model_code never changes: shared by every snapshot derived from this one
        return snap

    # -- free columns -------------------------------------------------------------------------------------

    cpu_free = _FreeColumn()
    mem_free = _FreeColumn()
    gpu_free = _FreeColumn()
    gpu_full = _FreeColumn()
    gpu_max = _FreeColumn()
    class_counts = _FreeColumn()
    node_stamp = _FreeColumn()

    def live(self) -> FreeColumns:
        """This snapshot's free columns without a copy: read-only views of the family's working arrays.

        They stay this snapshot's values only until another snapshot of the family is read or derived, so
        callers use them at once and keep copies of what they need (hot paths: filters over changed rows,
        the fragmentation caches, device choice). Everything else reads the attributes below."""
        store = self._store
        if store.head is not self:
            self._reroot()
        return store.views

    def _column(self, name: str) -> IntArray:
        column = self._frozen.get(name)
        if column is None:
            column = self._frozen[name] = _readonly(getattr(self.live(), name).copy())
        return column

    def _reroot(self) -> None:
        """Make the working arrays hold this snapshot: walk the chain of diffs to the head, then swap each
        diff's rows back, turning every snapshot passed into a diff towards this one."""
        chain: list[ClusterSnapshot] = []
        step: ClusterSnapshot = self
        while step._diff is not None:
            chain.append(step)
            step = step._diff.newer
        arrays = self._store.arrays
        for older in reversed(chain):
            diff = older._diff
            assert diff is not None
            back = {name: getattr(arrays, name)[diff.rows].copy() for name in diff.saved}
            for name, values in diff.saved.items():
                getattr(arrays, name)[diff.rows] = values
            diff.newer._diff = _Diff(diff.rows, back, older)
            older._diff = None
        self._store.head = self

    # -- queries ------------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.node_ids)

    @property
    def max_gpus(self) -> int:
        return int(self._store.arrays.gpu_free.shape[1])

    def index_of(self, node_id: str) -> int:
        try:
            return self._index[node_id]
        except KeyError:
            raise KeyError(f"unknown node {node_id!r}") from None

    @property
    def total_gpu_milli(self) -> int:
        return int(self.gpu_count.sum()) * GPU_MILLI

    @property
    def free_gpu_milli(self) -> int:
        return int(self.live().gpu_free.sum())

    def model_mask(self, allowed: Iterable[str]) -> np.ndarray:
        """Nodes whose GPU model is in `allowed` (nodes without GPUs never match)."""
        key = tuple(allowed)
        mask = self._model_masks.get(key)
        if mask is None:
            codes = [self.models.index(m) for m in key if m in self.models]
            mask = self._model_masks[key] = _readonly(np.isin(self.model_code, codes))
        return mask

    # -- transitions --------------------------------------------------------------------------------------

    def assign(self, request: TaskRequest, where: Assignment) -> ClusterSnapshot:
        """The snapshot after `request` takes `where`; raises if it does not fit there."""
        self._check_fits(request, where)
        return self._changed(where.node, request, where, sign=-1)

    def release(self, request: TaskRequest, where: Assignment) -> ClusterSnapshot:
        """The snapshot after a task placed by `assign(request, where)` has left."""
        row = where.node
        live = self.live()
        for idx, milli in zip(where.gpu_indices, where.gpu_milli, strict=True):
            if live.gpu_free[row, idx] + milli > GPU_MILLI:
                raise ValueError(f"release of device {idx} on {self.node_ids[row]} exceeds its capacity")
        if live.cpu_free[row] + request.cpu_milli > self.cpu_capacity[row]:
            raise ValueError(f"release on {self.node_ids[row]} exceeds its CPU capacity")
        return self._changed(row, request, where, sign=+1)

    def with_free(self, rows: Mapping[int, tuple[int, int, Sequence[int]]]) -> ClusterSnapshot:
        """The same nodes with other free room on some rows (row -> free CPU, free memory, free milli per
        device slot), in the same family: only those rows get new stamps, so plugins' per-node caches
        recompute just them. What `from_nodes` would build from the updated nodes, short of the stamps."""
        if not rows:
            return self
        live = self.live()
        changed = np.fromiter(rows, dtype=np.int64, count=len(rows))
        cpu_free = live.cpu_free[changed].copy()
        mem_free = live.mem_free[changed].copy()
        gpu_free = live.gpu_free[changed].copy()
        stamps = np.empty(changed.size, dtype=np.int64)
        for i, (row, (cpu, memory, devices)) in enumerate(rows.items()):
            name = self.node_ids[row]
            if not (0 <= cpu <= self.cpu_capacity[row] and 0 <= memory <= self.mem_capacity[row]):
                raise ValueError(f"{name}: free CPU {cpu} or memory {memory} outside its capacity")
            if len(devices) != self.gpu_count[row] or any(not 0 <= m <= GPU_MILLI for m in devices):
                raise ValueError(f"{name}: free milli {tuple(devices)} do not fit its devices")
            cpu_free[i] = cpu
            mem_free[i] = memory
            gpu_free[i, : len(devices)] = devices
            stamps[i] = self.stamps.take()
        return self._derive(changed, cpu_free, mem_free, gpu_free, stamps)

    def _check_fits(self, request: TaskRequest, where: Assignment) -> None:
        row = where.node
        name = self.node_ids[row]
        live = self.live()
        if len(where.gpu_indices) != request.gpu_count or len(where.gpu_milli) != request.gpu_count:
            raise ValueError(
                f"{name}: assignment names {len(where.gpu_indices)} devices, task needs {request.gpu_count}"
            )
        if len(set(where.gpu_indices)) != len(where.gpu_indices):
            raise ValueError(f"{name}: a device is named twice")
        if live.cpu_free[row] < request.cpu_milli or live.mem_free[row] < request.memory_mib:
            raise ValueError(f"{name}: not enough CPU or memory")
        for idx, milli in zip(where.gpu_indices, where.gpu_milli, strict=True):
            if not 0 <= idx < self.gpu_count[row]:
                raise ValueError(f"{name}: no device {idx}")
            if live.gpu_free[row, idx] < milli:
                raise ValueError(
                    f"{name}: device {idx} has {live.gpu_free[row, idx]} milli free, needs {milli}"
                )

    def _changed(self, row: int, request: TaskRequest, where: Assignment, sign: int) -> ClusterSnapshot:
        """One node's room changed by a task: `_derive` for one row, by plain indexing (the hot path)."""
        self.live()
        a = self._store.arrays
        old_gpu = a.gpu_free[row].copy()
        gpu = old_gpu.copy()
        for idx, milli in zip(where.gpu_indices, where.gpu_milli, strict=True):
            gpu[idx] += sign * milli
        saved = {
            "cpu_free": a.cpu_free[row],
            "mem_free": a.mem_free[row],
            "gpu_free": old_gpu,
            "gpu_full": a.gpu_full[row],
            "gpu_max": a.gpu_max[row],
            "node_stamp": a.node_stamp[row],
        }
        klass = gpu_task_class(request)
        if klass >= 0:
            saved["class_counts"] = a.class_counts[row].copy()
        new = self._successor(np.array([row]))
        a.cpu_free[row] += sign * request.cpu_milli
        a.mem_free[row] += sign * request.memory_mib
        a.gpu_free[row] = gpu
        a.gpu_full[row] = np.count_nonzero(gpu == GPU_MILLI)
        a.gpu_max[row] = gpu.max()
        a.node_stamp[row] = self.stamps.take()
        if klass >= 0:
            a.class_counts[row, min(klass, a.class_counts.shape[1] - 1)] -= sign
        self._diff = _Diff(row, saved, new)
        self._store.head = new
        return new

    def _successor(self, rows: IntArray) -> ClusterSnapshot:
        """A new snapshot of this family, logged as changing `rows` of this one (its columns are set by
        the caller, which then makes it the head)."""
        new = ClusterSnapshot.__new__(ClusterSnapshot)
        for name in _STATIC:
            object.__setattr__(new, name, getattr(self, name))
        new._diff = None
        new._frozen = {}
        new._position = self._store.log.record(self._position, rows)
        return new

    def _derive(
        self,
        rows: IntArray,
        cpu_free: IntArray,
        mem_free: IntArray,
        gpu_free: IntArray,
        stamps: IntArray,
        class_counts: IntArray | None = None,
    ) -> ClusterSnapshot:
        """A snapshot of this family with new free values on `rows` (the derived columns follow). The
        working arrays move to it; this snapshot keeps the rows' old values as its diff."""
        updates = {
            "cpu_free": cpu_free,
            "mem_free": mem_free,
            "gpu_free": gpu_free,
            "gpu_full": (gpu_free == GPU_MILLI).sum(axis=1),
            "gpu_max": gpu_free.max(axis=1),
            "node_stamp": stamps,
        }
        if class_counts is not None:
            updates["class_counts"] = class_counts
        self.live()
        arrays = self._store.arrays
        saved = {name: getattr(arrays, name)[rows].copy() for name in updates}
        new = self._successor(rows)
        for name, values in updates.items():
            getattr(arrays, name)[rows] = values
        self._diff = _Diff(rows, saved, new)
        self._store.head = new
        return new

    @property
    def position(self) -> int:
        """This snapshot's place in its family's transition log (`changed_since`)."""
        return self._position

    def changed_since(self, position: int) -> IntArray | None:
        """Rows that may differ between the family's snapshot at `position` and this one: those changed
        by the transitions from their last common ancestor to either (sorted, unique); None when the log
        no longer reaches that far back (then compare stamps)."""
        return self._store.log.rows_between(position, self._position)


_STATIC = tuple(
    n for n in ClusterSnapshot.__slots__ if n not in ("__weakref__", "_diff", "_frozen", "_position")
)


@dataclass(frozen=True, slots=True)
class FreeColumns:
    """The columns that change with placements: free CPU, memory and milli per device, the fully-free and
    largest-free device counts, GPU task classes per node, and the node stamps."""

    cpu_free: IntArray
    mem_free: IntArray
    gpu_free: IntArray
    gpu_full: IntArray
    gpu_max: IntArray
    class_counts: IntArray
    node_stamp: IntArray


class _Store:
    """The working free columns of one snapshot family, holding the state of `head`, and the family's log
    of transitions."""

    __slots__ = ("arrays", "head", "log", "views")

    def __init__(self, arrays: FreeColumns, head: ClusterSnapshot) -> None:
        self.arrays = arrays
        self.views = FreeColumns(
            *(_readonly(getattr(arrays, f).view()) for f in FreeColumns.__dataclass_fields__)
        )
        self.head = head
        self.log = TransitionLog()


class TransitionLog:
    """Which rows each transition of a family changed and which snapshot it started from, for the last
    `keep` transitions: enough to tell a cache which rows moved between the snapshot it was computed on
    and the one it is asked about, without comparing every node's stamp.

    Most histories are a line (each snapshot derived from the newest): for those the rows between two
    positions are read from a ring of one row per transition in one numpy gather; other paths (a
    discarded gang, two schedulers deciding on one snapshot) are walked transition by transition."""

    __slots__ = ("_entries", "_floor", "_next", "_one", "_run", "keep", "walk")

    def __init__(self, keep: int = 4096, walk: int = 64) -> None:
        self._entries: dict[int, tuple[int, IntArray]] = {}  # position -> (parent position, rows)
        self._next = 1
        self._floor = 1  # oldest position still kept
        self.keep = keep
        self.walk = walk  # longest path walked; past it a stamp comparison is as cheap
        self._one = np.full(keep, -1, dtype=np.int64)  # [position % keep] its one row, -1: several
        self._run = np.zeros(keep, dtype=np.int64)  # [position % keep] where its line of children starts

    def record(self, parent: int, rows: IntArray) -> int:
        position = self._next
        self._next += 1
        rows = rows if rows.size == 1 else sorted_unique(rows)
        self._entries[position] = (parent, rows)
        slot = position % self.keep
        self._one[slot] = int(rows[0]) if rows.size == 1 else -1
        line = parent == position - 1 and parent >= self._floor
        self._run[slot] = self._run[parent % self.keep] if line else position
        while position - self._floor >= self.keep:
            self._entries.pop(self._floor, None)
            self._floor += 1
        return position

    def rows_between(self, a: int, b: int) -> IntArray | None:
        """Rows changed on the path between positions `a` and `b` (through their common ancestor)."""
        if self._floor <= a < b and b in self._entries and self._run[b % self.keep] <= a:
            # b descends from a along a line: one row per transition, read from the ring
            if b - a == 1:
                return self._entries[b][1]
            if b - a <= 16:  # a few transitions: cheaper than the array operations
                one, keep = self._one, self.keep
                few = [int(one[p % keep]) for p in range(a + 1, b + 1)]
                if min(few) >= 0:
                    return np.array(sorted(set(few)), dtype=np.int64)
            else:
                rows = self._one[np.arange(a + 1, b + 1) % self.keep]
                if rows.min() >= 0:
                    return sorted_unique(rows)
        parts: list[IntArray] = []
        entries = self._entries
        while a != b:
            if len(parts) >= self.walk:
                return None
            step = entries.get(max(a, b))
            if step is None:
                return None
            parts.append(step[1])
            if a > b:
                a = step[0]
            else:
                b = step[0]
        if not parts:
            return np.empty(0, dtype=np.int64)
        if len(parts) == 1:
            return parts[0]
        return sorted_unique(np.concatenate(parts))


def sorted_unique(rows: IntArray) -> IntArray:
    """`np.unique(rows)` for the small arrays of the hot paths, without its fixed cost."""
    if rows.size <= 16:  # a few transitions of one row each: cheaper than numpy's sort
        return np.array(sorted(set(rows.tolist())), dtype=np.int64)
    ordered = np.sort(rows)
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    unique: IntArray = ordered[keep]
    return unique


@dataclass(frozen=True, slots=True)
class _Diff:
    """A snapshot that is not the head: `newer`'s columns with `rows` set back to `saved`."""

    rows: IntArray | int
    saved: dict[str, Any]  # column -> values at `rows` (an array, or a scalar for one row of a 1-D column)
    newer: ClusterSnapshot
