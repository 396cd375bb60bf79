"""Queue positions and estimated starts of waiting jobs, from the live projection and the capacity view.

The computation is the domain's (`domain.queueing.start_estimate`); this module only reads the snapshot
it needs: the queue's waiting jobs with their priorities and pending reasons, the pooled capacity of
the schedulable nodes and what each active task holds there until its expected end.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from suanli.scheduling.domain.jobs import JobView, TaskRun, TaskRunState
from suanli.scheduling.domain.queueing.start_estimate import (
    Held,
    Room,
    StartEstimate,
    Waiting,
    estimate_starts,
)
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.projection import Projection

GPU_MILLI = 1000


class StartEstimates:
    """Estimates per queue, computed at most once per queue for the lifetime of one instance (one RPC)."""

    def __init__(self, projection: Projection, capacity: CapacityView, now: datetime) -> None:
        self._projection = projection
        self._capacity = capacity
        self._now = now
        self._queues: dict[str, dict[str, StartEstimate]] = {}
        self._pool: tuple[Room, tuple[Held, ...]] | None = None

    def of(self, job: JobView) -> StartEstimate | None:
        """The job's position and estimated start; None for a job that is not waiting."""
        if not job.waiting:
            return None
        queue = job.spec.queue
        if queue not in self._queues:
            total, held = self._pool or self._read_pool()
            waiting = [self._waiting(j) for j in self._projection.live.values() if _waits_in(j, queue)]
            self._queues[queue] = estimate_starts(waiting, total, held, self._now)
        return self._queues[queue].get(job.id)

    def _read_pool(self) -> tuple[Room, tuple[Held, ...]]:
        nodes = {n.id: n for n in self._capacity.schedulable()}
        gpu: dict[str, int] = {}
        for node in nodes.values():
            for device in node.gpus:
                gpu[device.model] = gpu.get(device.model, 0) + GPU_MILLI
        total = Room(sum(n.cpu_milli for n in nodes.values()), sum(n.memory_mib for n in nodes.values()), gpu)
        held = []
        for job in self._projection.jobs.values():
            for task in job.active:
                on = nodes.get(task.node_id)
                if on is not None:  # room on a node out of the pool is not the pool's
                    held.append(self._held(task, on.gpus[0].model if on.gpus else ""))
        self._pool = (total, tuple(held))
        return self._pool

    def _held(self, task: TaskRun, model: str) -> Held:
        spec = task.spec
        ends: datetime | None = None
        if task.state is TaskRunState.STOPPING:
            ends = self._now  # on its way out: the room comes back as soon as the node says it stopped
        elif spec.duration_s is not None and task.since is not None:
            # PLACED counts from its placement: a lower bound of its start.
            ends = max(self._now, task.since + timedelta(seconds=spec.duration_s))
        return Held(spec.cpu_milli, spec.memory_mib, sum(task.gpu_milli), model, ends)

    def _waiting(self, job: JobView) -> Waiting:
        s = job.spec
        value = self._projection.priority_of(s.priority_class) if s.priority_class else None
        reason = self._projection.pending_reasons.get(job.id) or {}
        durations = [t.duration_s for t in s.tasks]
        return Waiting(
            job_id=job.id,
            priority=s.priority if value is None else value,
            seq=job.seq,
            cpu_milli=sum(t.cpu_milli for t in s.tasks),
            memory_mib=sum(t.memory_mib for t in s.tasks),
            gpu_milli=sum(t.gpu_count * t.gpu_milli for t in s.tasks),
            gpu_models=_common_models(t.gpu_models for t in s.tasks),
            duration_s=None if any(d is None for d in durations) else max((d or 0.0) for d in durations),
            reason=str(reason.get("code") or ""),
        )


def _waits_in(job: JobView, queue: str) -> bool:
    return job.waiting and job.spec.queue == queue


def _common_models(models: Iterable[tuple[str, ...]]) -> frozenset[str]:
    """The GPU models every task of the gang accepts (a gang runs on one model); empty: any."""
    common: frozenset[str] | None = None
    for named in models:
        if named:
            common = frozenset(named) if common is None else common & frozenset(named)
    if common is None:
        return frozenset()
    # No model every task accepts: a name no node reports, so the estimate says it never fits.
    return common or frozenset({"(no model common to the gang)"})
