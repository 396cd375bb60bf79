"""One simulated run of the FGD paper's experiment: pods arrive one at a time, are placed at once or
dropped, and never leave. Records allocation and fragmentation after every arrival."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from suanli.scheduling.domain.fragmentation import FragmentationModel, TypicalTask
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.model import Node, TaskRequest
from suanli.scheduling.domain.plugins._fragmentation import FragmentationTracker
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.snapshot import ClusterSnapshot
from suanli.scheduling.simulator.metrics import MAX_ARRIVED_PCT, arrived_bins, binned
from suanli.scheduling.simulator.workload import build_arrivals, workload_distribution

# Separate streams per seed so the workload does not change when a policy draws more or fewer numbers.
WORKLOAD_STREAM, SCHEDULER_STREAM = 0, 1


@dataclass(frozen=True)
class RunCurves:
    """Binned curves over arrived % (index = x)."""

    allocation_pct: np.ndarray
    unallocated_pct: np.ndarray
    frag_pct: np.ndarray  # fragmentation / capacity
    frag_rate_pct: np.ndarray  # fragmentation / idle


@dataclass(frozen=True)
class RunResult:
    policy: str
    seed: int
    arrivals: int
    failed: int
    capacity_gpu_milli: int
    curves: RunCurves
    final_allocation_pct: float
    seconds: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)


def run_arrivals(
    nodes: list[Node],
    requests: list[TaskRequest],
    policy: str,
    seed: int,
    tune: float,
    typical: tuple[TypicalTask, ...] | None = None,
) -> RunResult:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    capacity = snapshot.total_gpu_milli
    typical = typical or workload_distribution(requests)
    arrivals = build_arrivals(requests, capacity, tune, np.random.default_rng([seed, WORKLOAD_STREAM]))
    context = PluginContext(typical_tasks=typical)
    scheduler = Scheduler(policy_profile(policy), np.random.default_rng([seed, SCHEDULER_STREAM]), context)
    # The metric uses the same distribution as FGD, per the paper; its cache is separate from the policy's.
    tracker = FragmentationTracker(FragmentationModel(typical))

    n = len(arrivals)
    arrived = np.empty(n)
    allocated = np.empty(n)
    frag = np.empty(n)
    idle = np.empty(n)
    arrived_milli = allocated_milli = 0
    failed = 0
    for i, request in enumerate(arrivals):
        arrived_milli += request.total_gpu_milli
        result = scheduler.place_task(snapshot, request)
        if result.placed:
            snapshot = result.snapshot
            allocated_milli += request.total_gpu_milli
        else:
            failed += 1
        arrived[i] = arrived_milli
        allocated[i] = allocated_milli
        frag[i] = tracker.cluster_fragmentation(snapshot)
        idle[i] = capacity - allocated_milli

    bins = arrived_bins(arrived, capacity)
    allocation_pct = binned(allocated / capacity * 100, bins)
    curves = RunCurves(
        allocation_pct=allocation_pct,
        unallocated_pct=100 - allocation_pct,
        frag_pct=binned(frag / capacity * 100, bins),
        frag_rate_pct=binned(np.where(idle > 0, frag / np.maximum(idle, 1) * 100, 0.0), bins),
    )
    return RunResult(
        policy=policy,
        seed=seed,
        arrivals=n,
        failed=failed,
        capacity_gpu_milli=capacity,
        curves=curves,
        final_allocation_pct=float(allocated_milli / capacity * 100),
    )


__all__ = ["MAX_ARRIVED_PCT", "RunCurves", "RunResult", "run_arrivals"]
