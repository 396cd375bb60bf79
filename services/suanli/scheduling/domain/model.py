"""Domain model of the scheduling core: nodes and their devices, task requests, jobs.

Plain frozen values. The vectorised view used by filters and scores is `ClusterSnapshot`
(see snapshot.py); these are what the outside world hands in and what decisions refer to.
GPU capacity is counted in milli-GPU: 1000 is one whole device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

GPU_MILLI = 1000


class JobKind(StrEnum):
    TRAINING = "training"
    INFERENCE = "inference"
    BATCH = "batch"


class Locality(StrEnum):
    """How close together the tasks of a gang must run: one node, one fabric domain (nodes of one zone
    with the same `fabric` label), one zone, one region (the default for gangs), or anywhere (then
    `min_bandwidth_gbps` bounds the links between the regions it uses). Where a gang does not need it
    strictly, the topology score still prefers the closer placements."""

    NODE = "node"
    FABRIC = "fabric"
    ZONE = "zone"
    REGION = "region"
    ANY = "any"


@dataclass(frozen=True, slots=True)
class GpuDevice:
    index: int
    model: str
    memory_mib: int = 0
    free_milli: int = GPU_MILLI

    def __post_init__(self) -> None:
        if not 0 <= self.free_milli <= GPU_MILLI:
            raise ValueError(f"device {self.index}: free_milli {self.free_milli} outside 0..{GPU_MILLI}")


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    cpu_milli: int
    memory_mib: int
    gpus: tuple[GpuDevice, ...] = ()
    region: str = "default"
    zone: str = "default"
    labels: tuple[tuple[str, str], ...] = ()
    free_cpu_milli: int | None = None
    free_memory_mib: int | None = None

    @property
    def gpu_model(self) -> str | None:
        return self.gpus[0].model if self.gpus else None

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


@dataclass(frozen=True, slots=True)
class TaskRequest:
    """What one task asks of a node.

    `gpu_milli` is per GPU; a value below 1000 is a shared (fractional) GPU and is only valid with
    `gpu_count == 1`: a shared task must fit inside one device, never split across devices.
    """

    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_count: int = 0
    gpu_milli: int = 0
    gpu_models: tuple[str, ...] = ()  # allow-list; empty means any model
    node_selector: tuple[tuple[str, str], ...] = ()
    regions: tuple[str, ...] = ()  # allow-list; empty means any region
    # Where the job's data or clients are, and the most round-trip time to it a node's region may have
    # (None: no bound; the data region then only steers the network score). Job-wide, carried per task so
    # that filters and scores see it in the request they are given.
    data_region: str = ""
    max_rtt_ms: float | None = None

    def __post_init__(self) -> None:
        if self.max_rtt_ms is not None and (self.max_rtt_ms < 0 or not self.data_region):
            raise ValueError("max_rtt_ms must be >= 0 and needs a data_region")
        if self.cpu_milli < 0 or self.memory_mib < 0 or self.gpu_count < 0:
            raise ValueError("cpu_milli, memory_mib and gpu_count must be >= 0")
        if self.gpu_count == 0 and self.gpu_milli != 0:
            raise ValueError("gpu_milli set without gpu_count")
        if self.gpu_count > 0 and not 0 < self.gpu_milli <= GPU_MILLI:
            raise ValueError(f"gpu_milli must be in 1..{GPU_MILLI} when gpu_count > 0")
        if self.gpu_count > 1 and self.gpu_milli != GPU_MILLI:
            raise ValueError("a fractional gpu_milli is only valid with gpu_count == 1")

    @property
    def total_gpu_milli(self) -> int:
        return self.gpu_count * self.gpu_milli

    @property
    def is_shared_gpu(self) -> bool:
        return self.gpu_count == 1 and self.gpu_milli < GPU_MILLI


@dataclass(frozen=True, slots=True)
class Task:
    id: str
    request: TaskRequest


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    queue: str
    tasks: tuple[Task, ...]
    priority: int = 0
    min_available: int | None = None  # gang size; None means every task
    preemptible: bool = True
    kind: JobKind = JobKind.BATCH
    best_effort: bool = False
    locality: Locality | None = None  # None: the default, one region for a gang
    min_bandwidth_gbps: float | None = None  # between the regions of a gang with locality `any`

    @property
    def gang_size(self) -> int:
        return len(self.tasks) if self.min_available is None else self.min_available

    @property
    def placement_locality(self) -> Locality:
        """What placement enforces: a job that is not a gang (fewer than two tasks placed together) has
        nothing to keep together."""
        if self.gang_size < 2:
            return Locality.ANY
        return self.locality or Locality.REGION


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    """A decision: which node, which device indices, and how many milli on each; with what placement
    knew about it: the node's region, the RTT from there to the job's data region and the expected
    price per hour (None where unknown)."""

    task_id: str
    node_id: str
    gpu_indices: tuple[int, ...] = ()
    gpu_milli: tuple[int, ...] = field(default=())
    region: str = field(default="", compare=False)
    rtt_ms: float | None = field(default=None, compare=False)
    price_per_hour: float | None = field(default=None, compare=False)
