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

    def __post_init__(self) -> None:
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

    @property
    def gang_size(self) -> int:
        return len(self.tasks) if self.min_available is None else self.min_available


@dataclass(frozen=True, slots=True)
class TaskPlacement:
    """A decision: which node, which device indices, and how many milli on each."""

    task_id: str
    node_id: str
    gpu_indices: tuple[int, ...] = ()
    gpu_milli: tuple[int, ...] = field(default=())
