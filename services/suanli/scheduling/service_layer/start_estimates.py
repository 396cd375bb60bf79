"""Queue positions and estimated starts of waiting jobs, from the live projection and the capacity view.

The computation is the domain's (`domain.queueing.start_estimate`); this module only reads the snapshot
it needs: the queue's waiting jobs with their priorities and pending reasons, each schedulable node's
room, what each active task holds there until its expected end, and which nodes each waiting task may
run on (its node selector, regions and GPU models).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from suanli.scheduling.domain.jobs import JobView, TaskRun, TaskRunState
from suanli.scheduling.domain.jobs.spec import AcceptedTask
from suanli.scheduling.domain.model import GPU_MILLI, Node
from suanli.scheduling.domain.queueing.start_estimate import (
    Held,
    Room,
    StartEstimate,
    TaskDemand,
    Waiting,
    estimate_starts,
)
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.projection import Projection


class StartEstimates:
    """Estimates per queue, computed at most once per queue for the lifetime of one instance (one RPC)."""

    def __init__(self, projection: Projection, capacity: CapacityView, now: datetime) -> None:
        self._projection = projection
        self._now = now
        self._nodes = capacity.schedulable()
        self._queues: dict[str, dict[str, StartEstimate]] = {}
        self._held: tuple[Held, ...] | None = None
        self._next_seq = projection.next_seq  # the next job submitted is not in these replays
        self.spent_s = 0.0  # CPU time the replays took so far (the RPC server spaces them by it)

    def covers(self, job: JobView) -> bool:
        """Whether the job's queue was replayed with the job in it (a job submitted since was not)."""
        queue = self._queues.get(job.spec.queue)
        return queue is None or job.id in queue

    def submitted_since(self) -> bool:
        """Whether a job was submitted after these replays began: positions behind it may have moved."""
        return self._projection.next_seq != self._next_seq

    def of(self, job: JobView) -> StartEstimate | None:
        """The job's position and estimated start; None for a job that is not waiting."""
        if not job.waiting:
            return None
        queue = job.spec.queue
        if queue not in self._queues:
            rooms = {n.id: Room(n.cpu_milli, n.memory_mib, GPU_MILLI * len(n.gpus)) for n in self._nodes}
            waiting = [
                self._waiting(j)
                for j in self._projection.live.values()
                if j.waiting and j.spec.queue == queue
            ]
            started = time.perf_counter()
            self._queues[queue] = estimate_starts(waiting, rooms, self._held_room(), self._now)
            self.spent_s += time.perf_counter() - started
        return self._queues[queue].get(job.id)

    def _held_room(self) -> tuple[Held, ...]:
        if self._held is None:
            # Every job holding room is live: finished history is not walked.
            live = self._projection.live.values()
            self._held = tuple(self._held_by(task) for job in live for task in job.active)
        return self._held

    def _held_by(self, task: TaskRun) -> Held:
        spec = task.spec
        ends: datetime | None = None
        if task.state is TaskRunState.STOPPING:
            ends = self._now  # on its way out: the room comes back as soon as the node says it stopped
        elif spec.duration_s is not None and task.since is not None:
            # PLACED counts from its placement: a lower bound of its start.
            ends = max(self._now, task.since + timedelta(seconds=spec.duration_s))
        return Held(task.node_id, Room(spec.cpu_milli, spec.memory_mib, sum(task.gpu_milli)), ends)

    def _waiting(self, job: JobView) -> Waiting:
        s = job.spec
        value = self._projection.priority_of(s.priority_class) if s.priority_class else None
        reason = self._projection.pending_reasons.get(job.id) or {}
        durations = [t.duration_s for t in s.tasks]
        return Waiting(
            job_id=job.id,
            priority=s.priority if value is None else value,
            seq=job.seq,
            tasks=tuple(self._demand(t) for t in s.tasks),
            duration_s=None if any(d is None for d in durations) else max((d or 0.0) for d in durations),
            reason=str(reason.get("code") or ""),
        )

    def _demand(self, task: AcceptedTask) -> TaskDemand:
        room = Room(task.cpu_milli, task.memory_mib, task.gpu_count * task.gpu_milli)
        # The view's nodes come in id order: the order first fit tries them in.
        return TaskDemand(room, tuple(n.id for n in self._nodes if _may_run_on(task, n)))


def _may_run_on(task: AcceptedTask, node: Node) -> bool:
    """The task's own constraints against the node: selector, regions, GPU models."""
    labels = dict(node.labels)
    if any(labels.get(k) != v for k, v in task.node_selector):
        return False
    if task.regions and node.region not in task.regions:
        return False
    return not (task.gpu_count and task.gpu_models and node.gpu_model not in task.gpu_models)
