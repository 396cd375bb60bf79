"""Queues, quotas, fair share, priorities, gang admission, preemption, backfill and best-effort work.

A pure core: `schedule_cycle(state, placer, config)` turns a snapshot into decisions, and `Placer` is the
one seam to the placement framework. Concepts and the cycle's steps are in docs/queues.md.
"""

from suanli.scheduling.domain.queueing.cycle import (
    Admission,
    CycleResult,
    Pending,
    Preemption,
    QueueUsage,
    Reservation,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.ledger import RunningBooks
from suanli.scheduling.domain.queueing.placer import GangPlacement, NodeAvailability, NoFit, Placer
from suanli.scheduling.domain.queueing.queues import QueueSpec, QueueTree, ResourceQuota
from suanli.scheduling.domain.queueing.reasons import (
    BlockedByHigherPriority,
    GangIncomplete,
    Inadmissible,
    NetworkConstraint,
    NoNodeFits,
    NoRegionFits,
    PendingReason,
    QuotaExceeded,
    ReasonCode,
    Unschedulable,
    WaitingForPreemption,
)
from suanli.scheduling.domain.queueing.reference_placer import FirstFitPlacer
from suanli.scheduling.domain.queueing.resources import CPU, MEMORY, gpu_flavour
from suanli.scheduling.domain.queueing.state import (
    ClusterState,
    CycleConfig,
    PriorityClass,
    RunningWorkload,
    Workload,
)

__all__ = [
    "CPU",
    "MEMORY",
    "Admission",
    "BlockedByHigherPriority",
    "ClusterState",
    "CycleConfig",
    "CycleResult",
    "FirstFitPlacer",
    "GangIncomplete",
    "GangPlacement",
    "Inadmissible",
    "NetworkConstraint",
    "NoFit",
    "NoNodeFits",
    "NoRegionFits",
    "NodeAvailability",
    "Pending",
    "PendingReason",
    "Placer",
    "Preemption",
    "PriorityClass",
    "QueueSpec",
    "QueueTree",
    "QueueUsage",
    "QuotaExceeded",
    "ReasonCode",
    "Reservation",
    "ResourceQuota",
    "RunningBooks",
    "RunningWorkload",
    "Unschedulable",
    "WaitingForPreemption",
    "Workload",
    "gpu_flavour",
    "schedule_cycle",
]
