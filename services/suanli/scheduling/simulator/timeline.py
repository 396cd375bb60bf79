"""Timeline replay: pods arrive at their creation time and leave at their deletion time. A pod that does not
fit waits in a FIFO queue; whenever capacity frees, the queue is retried in order (a pod that still does not
fit keeps its place; later ones that fit go ahead of it). Reports allocation over time and queueing delay."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from suanli.scheduling.domain.fragmentation import TypicalTask
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.model import Node
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot
from suanli.scheduling.simulator.traces import TracePod
from suanli.scheduling.simulator.workload import workload_distribution

ARRIVE, LEAVE = 1, 0  # at equal times departures go first so their room is usable at once


@dataclass(frozen=True)
class TimelineResult:
    policy: str
    seed: int
    times: np.ndarray  # seconds, one sample per event
    allocation_pct: np.ndarray
    queue_length: np.ndarray
    delays: np.ndarray  # seconds waited by every pod that was placed
    never_placed: int
    mean_allocation_pct: float


def run_timeline(
    nodes: list[Node],
    pods: list[TracePod],
    policy: str,
    seed: int,
    typical: tuple[TypicalTask, ...] | None = None,
) -> TimelineResult:
    snapshot = ClusterSnapshot.from_nodes(nodes)
    capacity = snapshot.total_gpu_milli
    usable = [p for p in pods if p.creation_time is not None]
    if not usable:
        raise ValueError("timeline mode needs creation_time (and deletion_time) columns")
    typical = typical or workload_distribution([p.request for p in pods])
    scheduler = Scheduler(policy_profile(policy), np.random.default_rng([seed, 1]), PluginContext(typical))
    events: list[tuple[int, int, int]] = [(p.creation_time or 0, ARRIVE, i) for i, p in enumerate(usable)]
    heapq.heapify(events)
    queue: list[int] = []
    placed: dict[int, Assignment] = {}
    delays: list[float] = []
    times, alloc, qlen = [], [], []
    allocated = 0

    def try_place(i: int, now: int) -> bool:
        nonlocal snapshot, allocated
        pod = usable[i]
        result = scheduler.place_task(snapshot, pod.request)
        if result.assignment is None:
            return False
        snapshot = result.snapshot
        placed[i] = result.assignment
        allocated += pod.request.total_gpu_milli
        delays.append(now - (pod.creation_time or 0))
        end = pod.deletion_time
        if end is not None:
            # A pod keeps running for its original lifetime from whenever it started.
            heapq.heappush(events, (now + max(end - (pod.creation_time or 0), 0), LEAVE, i))
        return True

    while events:
        now, kind, i = heapq.heappop(events)
        if kind == ARRIVE:
            if not try_place(i, now):
                queue.append(i)
        else:
            snapshot = snapshot.release(usable[i].request, placed.pop(i))
            allocated -= usable[i].request.total_gpu_milli
            # Retry in FIFO order. Within one pass capacity only shrinks, so a request identical to one
            # that just failed is skipped without asking the scheduler.
            waiting: list[int] = []
            failed: set[object] = set()
            for j in queue:
                request = usable[j].request
                if request in failed or not try_place(j, now):
                    failed.add(request)
                    waiting.append(j)
            queue = waiting
        times.append(now)
        alloc.append(allocated / capacity * 100)
        qlen.append(len(queue))

    t = np.array(times, dtype=np.float64)
    a = np.array(alloc)
    span = np.diff(t, append=t[-1])
    mean_alloc = float((a * span).sum() / span.sum()) if span.sum() > 0 else float(a.mean())
    return TimelineResult(
        policy, seed, t, a, np.array(qlen), np.array(delays, dtype=np.float64), len(queue), mean_alloc
    )
