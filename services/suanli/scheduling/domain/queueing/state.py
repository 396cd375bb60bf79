"""Inputs of a scheduling cycle: the snapshot of queues, nodes and workloads, and the policy knobs."""

from __future__ import annotations

from dataclasses import dataclass

from suanli.scheduling.domain.model import GPU_MILLI, Job, Node, TaskPlacement
from suanli.scheduling.domain.network import EMPTY_NETWORK, NetworkSnapshot
from suanli.scheduling.domain.queueing.queues import QueueSpec


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Workload:
    """A job as the queueing core sees it. `seq` is the submission sequence number (FIFO order without a
    clock); `priority_class`, when set, overrides `job.priority` with the class's value."""

    job: Job
    seq: int
    priority_class: str | None = None


@dataclass(frozen=True, slots=True)
class RunningWorkload:
    """`stopping`: preempted in an earlier cycle and not yet gone. Its room is still in use, its quota is
    already released, and it cannot be chosen as a victim again."""

    workload: Workload
    placements: tuple[TaskPlacement, ...]
    stopping: bool = False

    @property
    def job(self) -> Job:
        return self.workload.job


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Node capacity is taken from the totals (`cpu_milli`, `memory_mib`, one whole GPU per device);
    what is in use is exactly what `running` holds. `network` is the network view of the cycle, which
    decides which pending jobs no region can ever serve (their network constraint rules every one out)."""

    nodes: tuple[Node, ...]
    queues: tuple[QueueSpec, ...]
    running: tuple[RunningWorkload, ...] = ()
    pending: tuple[Workload, ...] = ()
    network: NetworkSnapshot = EMPTY_NETWORK


@dataclass(frozen=True, slots=True)
class CycleConfig:
    priority_classes: tuple[PriorityClass, ...] = ()
    # Best-effort jobs whose GPU tasks are all fractional may fill a device up to ratio x 1000 milli.
    overcommit_ratio: float = 1.0
    preemption: bool = True
    backfill: bool = True
    # Placement attempts spent looking for a smaller victim set than the greedy one, per flavour.
    victim_search_budget: int = 256

    def __post_init__(self) -> None:
        if self.overcommit_ratio < 1.0:
            raise ValueError("overcommit_ratio must be >= 1.0")
        names = [pc.name for pc in self.priority_classes]
        if len(names) != len(set(names)):
            raise ValueError("a priority class is defined twice")

    @property
    def best_effort_gpu_capacity(self) -> int:
        return round(self.overcommit_ratio * GPU_MILLI)
