"""Immutable, vectorised view of a cluster for placement decisions.

Filters and scores work on whole columns (one entry per node) so that a decision costs a handful of numpy
operations, not a Python loop over nodes. A snapshot is never changed: `assign` and `release` return a new
snapshot that shares the static columns and copies the mutable ones.

Every node carries a *stamp*: a number that changes whenever the node's free resources change. Stamps come
from a counter shared by every snapshot derived from the same root, so within that family a (node, stamp)
pair names exactly one node state. Plugins key their per-node caches on stamps and recompute only the nodes
whose stamp moved, which is what makes fragmentation-aware scoring affordable on thousands of nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

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


class ClusterSnapshot:
    """Columns of free and total resources, one row per node.

    `gpu_free` is 2-D (node, device) and padded with zeros past each node's device count: a padded slot
    never fits a request (every GPU request is >= 1 milli) and adds nothing to idle or fragmented milli,
    so no mask is needed in the hot paths. `gpu_full` (fully free devices) and `gpu_max` (largest free
    slice) are kept alongside so the common feasibility tests are one comparison per node.
    """

    __slots__ = (
        "_index",
        "_model_masks",
        "class_counts",
        "cpu_capacity",
        "cpu_free",
        "fabric_code",
        "fabrics",
        "gpu_count",
        "gpu_free",
        "gpu_full",
        "gpu_max",
        "labels",
        "mem_capacity",
        "mem_free",
        "model_code",
        "models",
        "node_ids",
        "node_stamp",
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
    cpu_free: IntArray
    mem_free: IntArray
    gpu_free: IntArray
    gpu_full: IntArray
    gpu_max: IntArray
    class_counts: IntArray
    node_stamp: IntArray
    stamps: StampAllocator
    _index: dict[str, int]
    _model_masks: dict[tuple[str, ...], np.ndarray]

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
        snap.cpu_free = _readonly(cpu_free)
        snap.mem_free = _readonly(mem_free)
        snap.gpu_free = _readonly(gpu_free)
        snap.gpu_full = _readonly((gpu_free == GPU_MILLI).sum(axis=1).astype(np.int32))
        snap.gpu_max = _readonly(gpu_free.max(axis=1).astype(np.int32))
        snap.class_counts = _readonly(np.zeros((count, width + 1), dtype=np.int32))
        snap.node_stamp = _readonly(np.arange(count, dtype=np.int64))
        snap.stamps = StampAllocator(count)
        snap._index = {node_id: i for i, node_id in enumerate(ids)}
        snap._model_masks = {}  # model_code never changes: shared by every snapshot derived from this one
        return snap

    # -- queries ------------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.node_ids)

    @property
    def max_gpus(self) -> int:
        return int(self.gpu_free.shape[1])

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
        return int(self.gpu_free.sum())

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
        for idx, milli in zip(where.gpu_indices, where.gpu_milli, strict=True):
            if self.gpu_free[row, idx] + milli > GPU_MILLI:
                raise ValueError(f"release of device {idx} on {self.node_ids[row]} exceeds its capacity")
        if self.cpu_free[row] + request.cpu_milli > self.cpu_capacity[row]:
            raise ValueError(f"release on {self.node_ids[row]} exceeds its CPU capacity")
        return self._changed(row, request, where, sign=+1)

    def with_free(self, rows: Mapping[int, tuple[int, int, Sequence[int]]]) -> ClusterSnapshot:
        """The same nodes with other free room on some rows (row -> free CPU, free memory, free milli per
        device slot), in the same family: only those rows get new stamps, so plugins' per-node caches
        recompute just them. What `from_nodes` would build from the updated nodes, short of the stamps."""
        if not rows:
            return self
        cpu_free = self.cpu_free.copy()
        mem_free = self.mem_free.copy()
        gpu_free = self.gpu_free.copy()
        stamps = self.node_stamp.copy()
        for row, (cpu, memory, devices) in rows.items():
            name = self.node_ids[row]
            if not (0 <= cpu <= self.cpu_capacity[row] and 0 <= memory <= self.mem_capacity[row]):
                raise ValueError(f"{name}: free CPU {cpu} or memory {memory} outside its capacity")
            if len(devices) != self.gpu_count[row] or any(not 0 <= m <= GPU_MILLI for m in devices):
                raise ValueError(f"{name}: free milli {tuple(devices)} do not fit its devices")
            cpu_free[row] = cpu
            mem_free[row] = memory
            gpu_free[row, : len(devices)] = devices
            stamps[row] = self.stamps.take()
        changed = np.fromiter(rows, dtype=np.int64, count=len(rows))
        return self._with_free_columns(cpu_free, mem_free, gpu_free, stamps, changed)

    def _check_fits(self, request: TaskRequest, where: Assignment) -> None:
        row = where.node
        name = self.node_ids[row]
        if len(where.gpu_indices) != request.gpu_count or len(where.gpu_milli) != request.gpu_count:
            raise ValueError(
                f"{name}: assignment names {len(where.gpu_indices)} devices, task needs {request.gpu_count}"
            )
        if len(set(where.gpu_indices)) != len(where.gpu_indices):
            raise ValueError(f"{name}: a device is named twice")
        if self.cpu_free[row] < request.cpu_milli or self.mem_free[row] < request.memory_mib:
            raise ValueError(f"{name}: not enough CPU or memory")
        for idx, milli in zip(where.gpu_indices, where.gpu_milli, strict=True):
            if not 0 <= idx < self.gpu_count[row]:
                raise ValueError(f"{name}: no device {idx}")
            if self.gpu_free[row, idx] < milli:
                raise ValueError(
                    f"{name}: device {idx} has {self.gpu_free[row, idx]} milli free, needs {milli}"
                )

    def _changed(self, row: int, request: TaskRequest, where: Assignment, sign: int) -> ClusterSnapshot:
        cpu_free = self.cpu_free.copy()
        cpu_free[row] += sign * request.cpu_milli
        mem_free = self.mem_free.copy()
        mem_free[row] += sign * request.memory_mib
        gpu_free = self.gpu_free.copy()
        for idx, milli in zip(where.gpu_indices, where.gpu_milli, strict=True):
            gpu_free[row, idx] += sign * milli
        class_counts = None
        klass = gpu_task_class(request)
        if klass >= 0:
            class_counts = self.class_counts.copy()
            class_counts[row, min(klass, class_counts.shape[1] - 1)] -= sign
        stamps = self.node_stamp.copy()
        stamps[row] = self.stamps.take()
        return self._with_free_columns(cpu_free, mem_free, gpu_free, stamps, np.array([row]), class_counts)

    def _with_free_columns(
        self,
        cpu_free: IntArray,
        mem_free: IntArray,
        gpu_free: IntArray,
        stamps: IntArray,
        rows: IntArray,
        class_counts: IntArray | None = None,
    ) -> ClusterSnapshot:
        """A snapshot of this family with new free columns; the derived ones recomputed on `rows`."""
        gpu_full = self.gpu_full.copy()
        gpu_full[rows] = (gpu_free[rows] == GPU_MILLI).sum(axis=1)
        gpu_max = self.gpu_max.copy()
        gpu_max[rows] = gpu_free[rows].max(axis=1)
        new = self._shallow_copy()
        new.cpu_free = _readonly(cpu_free)
        new.mem_free = _readonly(mem_free)
        new.gpu_free = _readonly(gpu_free)
        new.gpu_full = _readonly(gpu_full)
        new.gpu_max = _readonly(gpu_max)
        new.node_stamp = _readonly(stamps)
        if class_counts is not None:
            new.class_counts = _readonly(class_counts)
        return new

    def _shallow_copy(self) -> ClusterSnapshot:
        new = ClusterSnapshot.__new__(ClusterSnapshot)
        for name in ClusterSnapshot.__slots__:
            object.__setattr__(new, name, getattr(self, name))
        return new
