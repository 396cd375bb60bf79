"""Capacity view of one node from a full-state NodeSnapshot: total, allocatable and used, raw and in CU.

``used`` is what is *allocated* (placements of the tasks the node reports running), not what the devices
happen to be busy with: the scheduler packs by allocation, and actual utilisation is reported separately.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from suanli.resources import MILLI, DeviceCatalogue


@dataclass(frozen=True, slots=True)
class Resources:
    """Raw quantities; GPU share in milli (1000 per whole device)."""

    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_count: int = 0
    gpu_milli: int = 0
    gpu_memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class DeviceShare:
    index: int
    milli: int


@dataclass(frozen=True, slots=True)
class NodeAllocation:
    """What the scheduler bound to a node for one task attempt (from TaskPlaced)."""

    task_id: str
    job_id: str
    attempt: int
    node_id: str
    devices: tuple[DeviceShare, ...]
    cpu_milli: int
    memory_mib: int
    gpu_memory_mib: int  # per device
    placed_at_ms: int


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    index: int
    uuid: str
    model: str
    device_class: str
    cu: float  # whole device
    memory_total_mib: int
    memory_free_mib: int
    milli_allocated: int  # may exceed 1000 when a device is oversubscribed
    healthy: bool = True

    @property
    def milli_free(self) -> int:
        return max(0, MILLI - self.milli_allocated)

    @property
    def cu_allocated(self) -> float:
        # Not clamped: an oversubscribed device shows more than its worth allocated, as operators expect.
        return self.cu * self.milli_allocated / MILLI


@dataclass(frozen=True, slots=True)
class NodeCapacity:
    node_id: str
    region: str
    zone: str
    site: str
    total: Resources
    allocatable: Resources
    used: Resources
    cu_total: float
    cu_allocatable: float
    cu_used: float
    cpu_cu_allocatable: float
    cpu_cu_used: float
    devices: tuple[DeviceCapacity, ...]


_SLUG = re.compile(r"[^a-z0-9]+")


def class_name(catalogue: DeviceCatalogue, model: str) -> str:
    """Normalised device class ('NVIDIA H200' -> 'h200'): the key of CU-seconds and of price books."""
    return _SLUG.sub("-", catalogue.lookup(model).model.lower()).strip("-") or "unknown"


def capacity_of(
    snapshot: Mapping[str, Any],
    allocations: Iterable[NodeAllocation],
    catalogue: DeviceCatalogue,
    *,
    reserve: Resources = Resources(),
) -> NodeCapacity:
    """The node's capacity view; ``allocations`` are those still holding resources on it.

    ``reserve`` is kept back for the host itself (system daemons, the agent) and is not allocatable.
    Allocations naming a device the node does not report count towards CPU and memory only.
    """
    host = snapshot["host"]
    allocs = tuple(allocations)
    per_device: dict[int, int] = {}
    for alloc in allocs:
        for share in alloc.devices:
            per_device[share.index] = per_device.get(share.index, 0) + share.milli
    devices = tuple(
        DeviceCapacity(
            index=d["index"],
            uuid=d["uuid"],
            model=d["model"],
            device_class=class_name(catalogue, d["model"]),
            cu=catalogue.cu_of(d["model"], MILLI),
            memory_total_mib=d["memory_total_mib"],
            memory_free_mib=max(0, d["memory_total_mib"] - d["memory_used_mib"]),
            milli_allocated=per_device.get(d["index"], 0),
        )
        for d in sorted(snapshot.get("devices") or (), key=lambda d: d["index"])
    )
    known = {d.index for d in devices}
    gpu_memory = sum(d.memory_total_mib for d in devices)
    total = Resources(
        cpu_milli=host["cpu_cores"] * MILLI,
        memory_mib=host["memory_total_mib"],
        gpu_count=len(devices),
        gpu_milli=MILLI * len(devices),
        gpu_memory_mib=gpu_memory,
    )
    healthy = [d for d in devices if d.healthy]
    allocatable = Resources(
        cpu_milli=max(0, total.cpu_milli - reserve.cpu_milli),
        memory_mib=max(0, total.memory_mib - reserve.memory_mib),
        gpu_count=len(healthy),
        gpu_milli=MILLI * len(healthy),
        gpu_memory_mib=sum(d.memory_total_mib for d in healthy),
    )
    used = Resources(
        cpu_milli=sum(a.cpu_milli for a in allocs),
        memory_mib=sum(a.memory_mib for a in allocs),
        gpu_count=sum(1 for d in devices if d.milli_allocated > 0),
        gpu_milli=sum(s.milli for a in allocs for s in a.devices if s.index in known),
        gpu_memory_mib=sum(a.gpu_memory_mib * sum(s.index in known for s in a.devices) for a in allocs),
    )
    cpu_cu_allocatable = catalogue.cpu_cu(allocatable.cpu_milli)
    cpu_cu_used = catalogue.cpu_cu(used.cpu_milli)
    return NodeCapacity(
        node_id=snapshot["node_id"],
        region=snapshot["region"],
        zone=snapshot["zone"],
        site=snapshot["site"],
        total=total,
        allocatable=allocatable,
        used=used,
        cu_total=catalogue.cpu_cu(total.cpu_milli) + sum(d.cu for d in devices),
        cu_allocatable=cpu_cu_allocatable + sum(d.cu for d in healthy),
        cu_used=cpu_cu_used + sum(d.cu_allocated for d in devices),
        cpu_cu_allocatable=cpu_cu_allocatable,
        cpu_cu_used=cpu_cu_used,
        devices=devices,
    )
