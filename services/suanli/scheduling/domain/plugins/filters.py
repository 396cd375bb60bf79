"""Feasibility filters. Each is one vectorised test over all nodes, so the scheduler can report how many
nodes each one rejected."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from suanli.scheduling.domain.framework.plugin import PluginContext
from suanli.scheduling.domain.framework.registry import ExtensionPoint, PluginSpec
from suanli.scheduling.domain.model import TaskRequest
from suanli.scheduling.domain.snapshot import ClusterSnapshot


class CpuFilter:
    name = "cpu"

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        return snapshot.cpu_free >= request.cpu_milli


class MemoryFilter:
    name = "memory"

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        return snapshot.mem_free >= request.memory_mib


class GpuModelFilter:
    """A GPU task with an allow-list of models only goes to nodes of those models."""

    name = "gpu-model"

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        if not request.gpu_models or request.gpu_count == 0:
            return np.ones(snapshot.size, dtype=bool)
        return snapshot.model_mask(request.gpu_models)


class GpuFitFilter:
    """Enough devices with enough free milli. A shared task needs one device with room for its fraction;
    whole-device tasks need that many fully free devices on the same node."""

    name = "gpu-fit"

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        if request.gpu_count == 0:
            return np.ones(snapshot.size, dtype=bool)
        if request.is_shared_gpu:
            return snapshot.gpu_max >= request.gpu_milli
        return snapshot.gpu_full >= request.gpu_count


class RegionFilter:
    name = "region"

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        if not request.regions:
            return np.ones(snapshot.size, dtype=bool)
        codes = [snapshot.regions.index(r) for r in request.regions if r in snapshot.regions]
        return np.isin(snapshot.region_code, codes)


class NodeSelectorFilter:
    name = "node-selector"

    def filter(self, snapshot: ClusterSnapshot, request: TaskRequest) -> np.ndarray:
        if not request.node_selector:
            return np.ones(snapshot.size, dtype=bool)
        wanted = frozenset(request.node_selector)
        return np.fromiter((wanted <= labels for labels in snapshot.labels), dtype=bool, count=snapshot.size)


class RequestSanity:
    """Admission: a request larger than the largest node can never be placed, say so up front."""

    name = "request-sanity"

    def admit(self, snapshot: ClusterSnapshot, request: TaskRequest) -> str | None:
        if request.gpu_count > int(snapshot.gpu_count.max()):
            return f"asks for {request.gpu_count} GPUs, the largest node has {int(snapshot.gpu_count.max())}"
        if request.cpu_milli > int(snapshot.cpu_capacity.max()):
            return f"asks for {request.cpu_milli} milli-CPU, more than any node has"
        if request.memory_mib > int(snapshot.mem_capacity.max()):
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
