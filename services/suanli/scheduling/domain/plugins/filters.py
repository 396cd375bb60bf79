"""Feasibility filters. Each is one vectorised test over all nodes, so the scheduler can report how many
nodes each one rejected, and the same test over some rows (`filter_rows`), which the scheduler's
per-request cache runs on the nodes that changed since its last decision for that request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext
from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.snapshot import ClusterSnapshot

_ALL = slice(None)
Rows = np.ndarray | slice


class _Filter:
    """`filter` is `filter_rows` over every node; a filter is a per-node test of the node's own state."""

    name = ""

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        mask = self.filter_rows(snapshot, request, _ALL)
        return np.ones(snapshot.size, dtype=bool) if mask is None else mask

    def filter_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: Rows) -> np.ndarray | None:
        """Mask over `rows` (an index array, or every node), None when the filter allows every node."""
        raise NotImplementedError


def _at_least(column: np.ndarray, need: int, rows: Rows) -> np.ndarray | None:
    """Where `column` holds at least `need`; None when nothing is needed (every node passes)."""
    if need <= 0:
        return None
    mask: np.ndarray = column[rows] >= need
    return mask


class CpuFilter(_Filter):
    name = "cpu"

    def filter_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: Rows) -> np.ndarray | None:
        return _at_least(snapshot.live().cpu_free, request.cpu_milli, rows)


class MemoryFilter(_Filter):
    name = "memory"

    def filter_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: Rows) -> np.ndarray | None:
        return _at_least(snapshot.live().mem_free, request.memory_mib, rows)


class GpuModelFilter(_Filter):
    """A GPU task with an allow-list of models only goes to nodes of those models."""

    name = "gpu-model"

    def filter_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: Rows) -> np.ndarray | None:
        if not request.gpu_models or request.gpu_count == 0:
            return None
        mask: np.ndarray = snapshot.model_mask(request.gpu_models)[rows]
        return mask


class GpuFitFilter(_Filter):
    """Enough devices with enough free milli. A shared task needs one device with room for its fraction;
    whole-device tasks need that many fully free devices on the same node."""

    name = "gpu-fit"

    def filter_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: Rows) -> np.ndarray | None:
        if request.gpu_count == 0:
            return None
        live = snapshot.live()
        mask: np.ndarray
        if request.is_shared_gpu:
            mask = live.gpu_max[rows] >= request.gpu_milli
        else:
            mask = live.gpu_full[rows] >= request.gpu_count
        return mask


class RegionFilter(_Filter):
    name = "region"

    def filter_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: Rows) -> np.ndarray | None:
        if not request.regions:
            return None
        codes = [snapshot.regions.index(r) for r in request.regions if r in snapshot.regions]
        mask: np.ndarray = np.isin(snapshot.region_code[rows], codes)
        return mask


class NodeSelectorFilter(_Filter):
    name = "node-selector"

    def filter_rows(self, snapshot: ClusterSnapshot, request: TaskRequest, rows: Rows) -> np.ndarray | None:
        if not request.node_selector:
            return None
        wanted = frozenset(request.node_selector)
        labels = snapshot.labels if isinstance(rows, slice) else [snapshot.labels[r] for r in rows]
        return np.fromiter((wanted <= node for node in labels), dtype=bool, count=len(labels))


class RequestSanity:
    """Admission: a request larger than the largest node can never be placed, say so up front."""

    name = "request-sanity"

    def __init__(self) -> None:
        # The largest node of a snapshot family (capacities never change within one): one pass per family.
        self._largest: tuple[np.ndarray, int, int, int] | None = None

    def admit(self, snapshot: ClusterSnapshot, request: TaskRequest) -> str | None:
        largest = self._largest
        if largest is None or largest[0] is not snapshot.gpu_count:
            largest = self._largest = (
                snapshot.gpu_count,
                int(snapshot.gpu_count.max()),
                int(snapshot.cpu_capacity.max()),
                int(snapshot.mem_capacity.max()),
            )
        _, gpus, cpu, memory = largest
        if request.gpu_count > gpus:
            return f"asks for {request.gpu_count} GPUs, the largest node has {gpus}"
        if request.cpu_milli > cpu:
            return f"asks for {request.cpu_milli} milli-CPU, more than any node has"
        if request.memory_mib > memory:
            return f"asks for {request.memory_mib} MiB, more than any node has"
        return None


def _plain(cls: type) -> Any:
    def factory(args: Mapping[str, Any], ctx: PluginContext) -> Any:
        return cls()

    return factory


SPECS = [
    PluginSpec(c.name, ExtensionPoint.FILTER, _plain(c), help=(c.__doc__ or "").split("\n")[0])
    for c in (CpuFilter, MemoryFilter, GpuModelFilter, GpuFitFilter, RegionFilter, NodeSelectorFilter)
] + [
    PluginSpec(
        RequestSanity.name, ExtensionPoint.ADMISSION, _plain(RequestSanity), help=RequestSanity.__doc__ or ""
    )
]
