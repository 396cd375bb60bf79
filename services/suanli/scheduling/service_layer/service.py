"""The scheduling service's use cases behind one lock: every command reads the projection, decides pure,
commits through the `Writer` (events + outbox + pending reasons, one transaction, leader only), then
catches the projection up from the store.

The frequent commands (submits, task reports, reconciliations) are *planned* (`planners`) and committed in
groups (`group_commit`); the rest (cycles, cancels, lost nodes, queue configuration) run one at a time
(`handlers`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from suanli.clock import Clock, IdFactory
from suanli.contracts import new_envelope
from suanli.contracts.catalogue import EVENTS
from suanli.eventstore import ConcurrencyConflict, DuplicateEventId
from suanli.scheduling.domain.queueing import CycleConfig, Placer
from suanli.scheduling.service_layer import jobs
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import (
    CancelJob,
    Command,
    ConfigureQueues,
    MarkNodeLost,
    ReconcileNode,
    RecordTaskReport,
    RunCycle,
    SubmitJob,
)
from suanli.scheduling.service_layer.cycle import WorkloadCache, placed, run_cycle
from suanli.scheduling.service_layer.errors import Conflict, InvalidSpec, JobNotFound, NotLeader, Precondition
from suanli.scheduling.service_layer.group_commit import GroupCommitter, Plan, Planner
from suanli.scheduling.service_layer.jobs import Decision, JobView, Phase
from suanli.scheduling.service_layer.ports import Append, Metrics, NoMetrics, Outgoing, Writer
from suanli.scheduling.service_layer.projection import (
    PRIORITY_STREAM,
    Projection,
    job_stream,
    queue_stream,
)
from suanli.scheduling.service_layer.queues_config import queue_record
from suanli.scheduling.service_layer.reconcile import Reconciler
from suanli.scheduling.service_layer.spec import JobSpec, spec_record

PlacerFactory = Callable[[Sequence[Any], int], Placer]  # (task requests seen, cycle number) -> placer
_REQUEST_NS = uuid.UUID("6f1c8a52-4c1e-4d39-9d0a-5b2f7c0e9a11")
_FOLLOW_UP_ROUNDS = 4
log = logging.getLogger(__name__)
# Recorded events after which a waiting job may fit: a task's room is given back, or its job is requeued.
ROOM_GIVEN_BACK = frozenset({"TaskFinished", "TaskFailed", "TaskPreempted", "JobRequeued"})


def job_id_for(request_id: str, ids: IdFactory) -> str:
    """Same idempotency key, same job id: a concurrent duplicate submit then collides in the store."""
    raw = uuid.uuid5(_REQUEST_NS, request_id) if request_id else ids()
    return f"job-{raw.hex[:12]}"


class SchedulingService:
    def __init__(
        self,
        writer: Writer,
        projection: Projection,
        capacity: CapacityView,
        placer_factory: PlacerFactory,
        *,
        clock: Clock,
        ids: IdFactory,
        producer: str = "scheduling",
        cycle_config: CycleConfig | None = None,
        reconcile_grace: timedelta = timedelta(seconds=15),
        metrics: Metrics | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        eager_cycles: bool = False,
    ) -> None:
        """`eager_cycles`: the group commit runs the cycle itself after every batch that woke it, so a
        submit is placed within one batch and one cycle of arriving (the running service); without it
        cycles run only when asked (`RunCycle`), as the unit tests drive them."""
        self.writer = writer
        self.projection = projection
        self.capacity = capacity
        self.placer_factory = placer_factory
        self.clock = clock
        self.ids = ids
        self.producer = producer
        self.cycle_config = cycle_config or CycleConfig()
        self.reconciler = Reconciler(reconcile_grace)
        self.metrics = metrics or NoMetrics()
        self.is_leader = is_leader
        self.lock = asyncio.Lock()
        self.cycles = 0
        self.last_cycle_at = float("-inf")  # time.monotonic() when the last cycle began
        self._workloads: WorkloadCache = {}
        self.wake = asyncio.Event()
        self._submitted_in_batch = 0
        self._idle_reported = False
        self._lock_waiters = 0  # commands outside the group commit waiting for the lock
        self.handlers: dict[type, Callable[[Any], Awaitable[Any]]] = {
            CancelJob: self._cancel,
            MarkNodeLost: self._node_lost,
            RunCycle: self._cycle,
            ConfigureQueues: self._configure,
        }
        self.planners: dict[type, Planner] = {
            SubmitJob: self._plan_submit,
            RecordTaskReport: self._plan_report,
            ReconcileNode: self._plan_reconcile,
        }
        self.group = GroupCommitter(
            writer,
            projection,
            self.lock,
            self.planners,
            check_leader=self._check_leader,
            on_batch=self._new_batch,
            on_committed=self.wake.set,
            between_batches=self._cycle_if_woken if eager_cycles else None,
            others_waiting=lambda: self._lock_waiters > 0,
        )

    async def handle(self, command: Command) -> Any:
        if self.group.accepts(command):
            return await self.group.submit(command)
        self._lock_waiters += 1  # seen by the group commit, which then hands the lock over
        try:
            await self.lock.acquire()
        finally:
            self._lock_waiters -= 1
        try:
            self._check_leader()
            await self.writer.catch_up(self.projection)
            return await self.handlers[type(command)](command)
        finally:
            self.lock.release()

    def _check_leader(self) -> None:
        if not self.is_leader():
            raise NotLeader("this scheduler is a standby; writes go to the leader")

    def _new_batch(self) -> None:
        self._submitted_in_batch = 0

    # -- events --------------------------------------------------------------------------------------

    def _own(self, name: str, body: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> Outgoing:
        event_id = self.ids()
        subject = str(body[EVENTS[name].key]) if name in EVENTS else str(body.get("name", name))
        record = {
            **new_envelope(self.producer, subject, event_id=event_id, occurred_at=self.clock.now()),
            **body,
        }
        return Outgoing(name, record, event_id, metadata or {})

    def _with_follow_ups(self, job: JobView, decisions: list[Decision]) -> list[Outgoing]:
        """The decisions, then whatever they make necessary (stop siblings, requeue, finish), in order."""
        out: list[Outgoing] = []
        now = self.clock.now()
        batch = decisions
        for _ in range(_FOLLOW_UP_ROUNDS):
            for name, body in batch:
                event = self._own(name, body)
                out.append(event)
                job = jobs.evolve(job, name, event.record, job.version + 1, now)
            batch = jobs.follow_ups(job)
            if not batch:
                break
        return out

    async def _commit(
        self, appends: Sequence[Append], pending: Mapping[str, Any] | None = None, *, wake: bool = True
    ) -> None:
        await self.writer.commit(appends, pending)
        await self.writer.catch_up(self.projection)
        if wake:
            self.wake.set()

    def _job(self, job_id: str) -> JobView:
        job = self.projection.jobs.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    # -- handlers ------------------------------------------------------------------------------------

    def _plan_submit(self, cmd: SubmitJob) -> Plan:
        spec = cmd.spec
        known = self.projection.by_request.get(spec.request_id) if spec.request_id else None
        if known is not None:
            answer = self._same_or_conflict(known, spec)
            return Plan(answer=lambda: answer)
        if spec.queue not in self.projection.queues:
            names = ", ".join(sorted(self.projection.queues)) or "none configured"
            raise InvalidSpec("spec.queue", f"unknown queue {spec.queue!r} (known: {names})")
        priority = 0
        if spec.priority_class:
            value = self.projection.priority_of(spec.priority_class)
            if value is None:
                names = ", ".join(c.name for c in self.projection.priority_classes) or "none configured"
                raise InvalidSpec(
                    "spec.priority_class", f"unknown priority class {spec.priority_class!r} (known: {names})"
                )
            priority = value
        job_id = job_id_for(spec.request_id, self.ids)
        tasks = tuple(replace(t, task_id=f"{job_id}-{t.name}") for t in spec.tasks)
        spec = replace(spec, tasks=tasks, priority=priority)
        # Submission order (the queues' FIFO) for the jobs of one batch follows their place in it.
        seq = self.projection.next_seq + self._submitted_in_batch
        self._submitted_in_batch += 1
        event = self._own("JobSubmitted", spec_record(job_id, spec), {"seq": seq})

        def refused(exc: Exception) -> JobView:
            if not isinstance(exc, ConcurrencyConflict):
                raise exc
            return self._same_or_conflict(job_id, spec)  # a concurrent submit of the same request

        return Plan(
            [Append(job_stream(job_id), 0, [event])],
            answer=lambda: self.projection.jobs[job_id],
            on_refused=refused,
        )

    def _same_or_conflict(self, job_id: str, spec: JobSpec) -> JobView:
        job = self._job(job_id)
        if not job.spec.same_request(
            replace(
                spec,
                tasks=tuple(
                    replace(t, task_id=o.task_id) for t, o in zip(spec.tasks, job.spec.tasks, strict=False)
                ),
                priority=job.spec.priority,
            )
        ):
            raise Conflict(
                f"request_id {spec.request_id!r} was already used for job {job_id} with another spec"
            )
        return job

    async def _cancel(self, cmd: CancelJob) -> JobView:
        job = self._job(cmd.job_id)
        if job.phase is Phase.CANCELLED:
            return job  # a retried cancel
        if job.phase.final:
            raise Precondition(
                f"job {job.id} already {job.phase.value.lower()}; only live jobs can be cancelled"
            )
        events = [self._own(n, b) for n, b in jobs.cancel(job, cmd.reason or "cancelled", cmd.requested_by)]
        await self._commit([Append(job_stream(job.id), job.version, events)], {job.id: None})
        self.metrics.decision("cancelled")
        return self.projection.jobs[job.id]

    def _plan_report(self, cmd: RecordTaskReport) -> Plan:
        job = self.projection.jobs.get(str(cmd.record.get("job_id")))
        if job is None or not jobs.relevant_report(job, cmd.record):
            return Plan(answer=lambda: False)
        fact = Outgoing(cmd.name, cmd.record, _event_uuid(cmd.event_id))
        now = self.clock.now()
        after = jobs.evolve(job, cmd.name, cmd.record, job.version + 1, now)
        events = [fact, *self._with_follow_ups(after, jobs.follow_ups(after))]

        def recorded() -> bool:
            self._count_outcomes(events)
            return True

        def refused(exc: Exception) -> bool:
            if not isinstance(exc, DuplicateEventId):
                raise exc
            return False  # recorded before (a redelivery)

        return Plan(
            [Append(job_stream(job.id), job.version, events)],
            answer=recorded,
            on_refused=refused,
            wakes=any(e.name in ROOM_GIVEN_BACK for e in events),
        )

    async def _node_lost(self, cmd: MarkNodeLost) -> int:
        appends = []
        for job in list(self.projection.live.values()):
            lost = jobs.lost_on(job, cmd.node_id, cmd.lost_at)
            if not lost:
                continue
            facts: list[Decision] = [
                (
                    "TaskFailed",
                    {
                        "task_id": t.task_id,
                        "job_id": job.id,
                        "node_id": t.node_id,
                        "attempt": t.attempt,
                        "reason": f"node {cmd.node_id} was lost",
                        "kind": "NODE_LOST",
                        "exit_code": None,
                    },
                )
                for t in lost
            ]
            appends.append(Append(job_stream(job.id), job.version, self._with_follow_ups(job, facts)))
        if appends:
            await self._commit(appends)
            self._count_outcomes([e for a in appends for e in a.events])
        return len(appends)

    def _plan_reconcile(self, cmd: ReconcileNode) -> Plan:
        actions = self.reconciler.reconcile(
            self.projection.live,
            cmd.snapshot,
            self.clock.now(),
            lambda job, task: placed(job, task.placement(), self.cycles, self._regions()),
            owner=self._owner,
        )
        if not actions:
            return Plan(answer=lambda: 0)
        appends = [
            Append(
                job_stream(job_id),
                self.projection.jobs[job_id].version,
                self._with_follow_ups(self.projection.jobs[job_id], decisions),
            )
            for job_id, decisions in actions.per_job.items()
        ]
        if actions.unknown_stops:
            stream = f"node-{cmd.snapshot['node_id']}"
            appends.append(
                Append(
                    stream,
                    self.projection.versions.get(stream, 0),
                    [self._own(n, b) for n, b in actions.unknown_stops],
                )
            )
        count = sum(len(a.events) for a in appends)

        def recorded() -> int:
            self.reconciler.sent(actions)
            self.metrics.decision("reconciled", count)
            return count

        return Plan(appends, answer=recorded)

    async def _cycle_if_woken(self) -> None:
        """The cycle as the group commit's turn between batches (the lock is held, the projection current)."""
        if not self.wake.is_set():
            return
        self.wake.clear()
        try:
            await self._cycle(RunCycle())
        except Exception as exc:  # the cycle loop retries it; the commands queued behind must still run
            log.warning("scheduling cycle between batches failed: %r", exc)
            self.wake.set()

    async def _cycle(self, cmd: RunCycle) -> int:
        if not self.projection.queues:
            return 0
        started = time.perf_counter()
        self.last_cycle_at = time.monotonic()
        self.cycles += 1
        if not any(job.waiting for job in self.projection.live.values()):
            # Nothing to admit means nothing to place, preempt or reserve for: most wakes under load
            # (task reports, capacity updates) find the queues empty, and the cycle would only rebuild
            # its snapshot to learn that. The gauges are zeroed once, as an empty cycle would.
            if not self._idle_reported:
                self.metrics.cycle(time.perf_counter() - started, 0, 0, {}, {})
                self._idle_reported = True
            return 0
        self._idle_reported = False
        requests = [
            t.request() for j in self.projection.live.values() if not j.phase.final for t in j.spec.tasks
        ]
        placer = self.placer_factory(requests, self.cycles)
        nodes = self.capacity.schedulable()
        # The priority classes are configuration recorded in the store (ConfigureQueues), not fixed at
        # start: without them every job naming a class was inadmissible ("priority class ... is unknown").
        config = replace(self.cycle_config, priority_classes=self.projection.priority_classes)
        outcome = run_cycle(
            self.projection, nodes, placer, config, self.cycles, self._regions(), self._workloads
        )
        appends = [
            Append(
                job_stream(job_id),
                self.projection.jobs[job_id].version,
                [self._own(n, b) for n, b in decisions],
            )
            for job_id, decisions in outcome.decisions.items()
        ]
        changed: dict[str, Any] = {
            job_id: reason
            for job_id, reason in outcome.pending.items()
            if self.projection.pending_reasons.get(job_id) != reason
        }
        changed.update(
            {job_id: None for job_id in outcome.result.admitted if job_id in self.projection.pending_reasons}
        )
        if appends or changed:
            # A cycle's own placements give no room back: the next cycle waits for something that does.
            await self._commit(appends, changed, wake=False)
            for job_id, reason in changed.items():
                if reason is None:
                    self.projection.pending_reasons.pop(job_id, None)
                else:
                    self.projection.pending_reasons[job_id] = reason
        now = self.clock.now()
        for admission in outcome.result.admissions:
            job = self.projection.jobs[admission.job_id]
            for p in admission.placements:
                self.metrics.placed(
                    self.capacity.nodes[p.node_id].region, (now - job.submitted_at).total_seconds()
                )
        preempted = sum(len(p.victims) for p in outcome.result.preemptions)
        pending_by: dict[tuple[str, str], int] = {}
        for p in outcome.result.pending:
            key = (p.queue, str(p.reason.code))
            pending_by[key] = pending_by.get(key, 0) + 1
        depth: dict[str, int] = {}
        for job in self.projection.live.values():
            if job.waiting:
                depth[job.spec.queue] = depth.get(job.spec.queue, 0) + 1
        self.metrics.cycle(
            time.perf_counter() - started, len(outcome.result.admissions), preempted, pending_by, depth
        )
        return len(outcome.result.admissions)

    async def _configure(self, cmd: ConfigureQueues) -> int:
        appends: list[Append] = []
        wanted = {q.name: q for q in cmd.config.queues}
        for name, spec in wanted.items():
            if self.projection.queues.get(name) != spec:
                stream = queue_stream(name)
                appends.append(
                    Append(
                        stream,
                        self.projection.versions.get(stream, 0),
                        [self._own("QueueConfigured", queue_record(spec))],
                    )
                )
        for name in set(self.projection.queues) - set(wanted):
            stream = queue_stream(name)
            appends.append(
                Append(
                    stream,
                    self.projection.versions.get(stream, 0),
                    [self._own("QueueRemoved", {"name": name})],
                )
            )
        classes = [{"name": c.name, "value": c.value} for c in cmd.config.priority_classes]
        if tuple(cmd.config.priority_classes) != self.projection.priority_classes:
            appends.append(
                Append(
                    PRIORITY_STREAM,
                    self.projection.versions.get(PRIORITY_STREAM, 0),
                    [
                        self._own(
                            "PriorityClassesConfigured", {"name": "priority-classes", "classes": classes}
                        )
                    ],
                )
            )
        if appends:
            await self._commit(appends)
        return len(appends)

    # -- helpers -------------------------------------------------------------------------------------

    def _owner(self, task_id: str) -> JobView | None:
        job_id = self.projection.task_owner.get(task_id)
        return None if job_id is None else self.projection.jobs.get(job_id)

    def _regions(self) -> dict[str, tuple[str, str]]:
        return {n.id: (n.region, n.site) for n in self.capacity.nodes.values()}

    def _count_outcomes(self, events: Sequence[Outgoing]) -> None:
        for event in events:
            outcome = {"JobRequeued": "requeued", "JobFailed": "failed", "JobSucceeded": "succeeded"}.get(
                event.name
            )
            if outcome:
                self.metrics.decision(outcome)


def _event_uuid(event_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(event_id)
    except ValueError:
        return uuid.uuid5(_REQUEST_NS, event_id)
