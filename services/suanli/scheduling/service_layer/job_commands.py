"""The job commands: submit, cancel, task reports, node reconciliation, lost nodes; queue administration
(`queue_admin`) shares their entry point and write lock.

Each reads the projection, decides (pure, in the domain), and records through the write lock's commit
(events + outbox + pending reasons, one transaction, leader only). The frequent ones (submits, task
reports, reconciliations) are *planned* and committed in groups (`group_commit`); the rest run one at a
time in their own turn of the write lock. A commit that may let a waiting job in wakes the cycle.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from suanli.clock import Clock, IdFactory
from suanli.eventstore import ConcurrencyConflict, DuplicateEventId
from suanli.jobspec.ids import REQUEST_NAMESPACE, id_problem, job_id_of_request
from suanli.scheduling.domain.jobs import (
    ROOM_GIVEN_BACK,
    AcceptedSpec,
    JobEvent,
    JobFailed,
    JobRequeued,
    JobSubmitted,
    JobSucceeded,
    JobView,
    Phase,
    TaskFailed,
    TaskReport,
    cancel,
    evolve,
    follow_ups,
    lost_attempt_stops,
    lost_on,
    relevant_report,
)
from suanli.scheduling.service_layer.activity import Activity
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import (
    CancelJob,
    Command,
    MarkNodeLost,
    ReconcileNode,
    RecordTaskReport,
    SubmitJob,
)
from suanli.scheduling.service_layer.cycle import placed
from suanli.scheduling.service_layer.envelopes import Envelopes
from suanli.scheduling.service_layer.errors import (
    Conflict,
    EvictedJob,
    InvalidSpec,
    JobNotFound,
    Precondition,
)
from suanli.scheduling.service_layer.group_commit import GroupCommitter, Plan, Planner
from suanli.scheduling.service_layer.payloads import parse
from suanli.scheduling.service_layer.ports import Append, Metrics, NoMetrics, Outgoing, Writer
from suanli.scheduling.service_layer.projection import Projection, job_stream
from suanli.scheduling.service_layer.queue_admin import QueueAdmin
from suanli.scheduling.service_layer.reconcile import Reconciler
from suanli.scheduling.service_layer.write_lock import WriteLock

log = logging.getLogger(__name__)

_OUTCOMES: Mapping[type[JobEvent], str] = {
    JobRequeued: "requeued",
    JobFailed: "failed",
    JobSucceeded: "succeeded",
}


def job_id_for(tenant: str, request_id: str, ids: IdFactory) -> str:
    """The job id of a submit: from its idempotency key (`job_id_of_request`), else a fresh one."""
    return job_id_of_request(tenant, request_id) if request_id else f"job-{ids().hex[:12]}"


def same_or_conflict(job: JobView, spec: AcceptedSpec) -> JobView:
    """A submit whose request_id recorded ``job``: answered with it when it asks the same, else refused."""
    if not job.spec.same_request(
        replace(
            spec,
            tasks=tuple(
                replace(t, task_id=o.task_id) for t, o in zip(spec.tasks, job.spec.tasks, strict=False)
            ),
            priority=job.spec.priority,
        )
    ):
        raise Conflict(f"request_id {spec.request_id!r} was already used for job {job.id} with another spec")
    return job


def cancel_of_final(job: JobView) -> JobView:
    """A cancel of a job already final: a retried cancel gets the job, any other is refused."""
    if job.phase is Phase.CANCELLED:
        return job
    raise Precondition(f"job {job.id} already {job.phase.value.lower()}; only live jobs can be cancelled")


class JobCommands:
    def __init__(
        self,
        writer: Writer,
        write_lock: WriteLock,
        projection: Projection,
        capacity: CapacityView,
        envelopes: Envelopes,
        *,
        clock: Clock,
        ids: IdFactory,
        cycle_number: Callable[[], int],
        wake_cycle: Callable[[], None],
        reconcile_grace: timedelta = timedelta(seconds=15),
        metrics: Metrics | None = None,
        between_batches: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`cycle_number`: the last cycle's number, written into a placement sent again;
        `between_batches`: the group commit's turn after each batch (the eager cycle)."""
        self._write_lock = write_lock
        self._projection = projection
        self._capacity = capacity
        self._envelopes = envelopes
        self._clock = clock
        self._ids = ids
        self._cycle_number = cycle_number
        self._wake_cycle = wake_cycle
        self._reconciler = Reconciler(reconcile_grace)
        self._metrics = metrics or NoMetrics()
        self.activity = Activity()
        self._submitted_in_batch = 0
        self._reported_in_batch: dict[str, JobView] = {}  # job id -> as this batch's reports leave it
        self._handlers: Mapping[type, Callable[[Any], Awaitable[Any]]] = {
            CancelJob: self._cancel,
            MarkNodeLost: self._node_lost,
            **QueueAdmin(projection, envelopes, self._commit).handlers,
        }
        planners: Mapping[type, Planner] = {
            SubmitJob: self._plan_submit,
            RecordTaskReport: self._plan_report,
            ReconcileNode: self._plan_reconcile,
        }
        self._group = GroupCommitter(
            writer,
            projection,
            write_lock.lock,
            planners,
            check_leader=write_lock.check_leader,
            on_batch=self._new_batch,
            on_committed=wake_cycle,
            between_batches=between_batches,
            others_waiting=write_lock.others_waiting,
        )

    async def handle(self, command: Command) -> Any:
        if self._group.accepts(command):
            return await self._group.submit(command)
        async with self._write_lock.turn():
            return await self._handlers[type(command)](command)

    def reports_flowing(self) -> None:
        """Task reports are consumed from now on: a task's absence from snapshots may mean its end."""
        self._reconciler.reports_since = self._clock.now()

    def reports_stopped(self) -> None:
        """No task reports are consumed (no partitions, or not the leader): absence proves nothing."""
        self._reconciler.reports_since = None

    def _new_batch(self) -> None:
        self._submitted_in_batch = 0
        self._reported_in_batch = {}

    async def _commit(
        self, appends: Sequence[Append], pending: Mapping[str, Mapping[str, Any] | None] | None = None
    ) -> None:
        await self._write_lock.commit(appends, pending)
        self._wake_cycle()

    def _job(self, job_id: str) -> JobView:
        job = self._projection.jobs.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    # -- planned (group commit) ------------------------------------------------------------------------

    def _plan_submit(self, cmd: SubmitJob) -> Plan:
        spec = cmd.spec
        projection = self._projection
        known = projection.by_request.get((spec.tenant, spec.request_id)) if spec.request_id else None
        if known is not None:
            answer = self._same_or_conflict(known, spec)
            return Plan(answer=lambda: answer)
        if spec.queue not in projection.queues:
            names = ", ".join(sorted(projection.queues)) or "none configured"
            raise InvalidSpec("spec.queue", f"unknown queue {spec.queue!r} (known: {names})")
        priority = 0
        if spec.priority_class:
            value = projection.priority_of(spec.priority_class)
            if value is None:
                names = ", ".join(c.name for c in projection.priority_classes) or "none configured"
                raise InvalidSpec(
                    "spec.priority_class", f"unknown priority class {spec.priority_class!r} (known: {names})"
                )
            priority = value
        job_id = job_id_for(spec.tenant, spec.request_id, self._ids)
        tasks = tuple(replace(t, task_id=f"{job_id}-{t.name}") for t in spec.tasks)
        for i, task in enumerate(tasks):
            # The agent refuses placements whose ids break this rule; never make one it would refuse.
            problem = id_problem(task.task_id, "task id")
            if problem is not None:
                raise InvalidSpec(f"spec.tasks[{i}].name", problem)
        spec = replace(spec, tasks=tasks, priority=priority)
        # Submission order (the queues' FIFO) for the jobs of one batch follows their place in it.
        seq = projection.next_seq + self._submitted_in_batch
        self._submitted_in_batch += 1
        event = self._envelopes.event(JobSubmitted(job_id, spec, cmd.by), {"seq": seq})

        def refused(exc: Exception) -> JobView:
            if not isinstance(exc, ConcurrencyConflict):
                raise exc
            return self._same_or_conflict(job_id, spec)  # a concurrent submit of the same request

        return Plan(
            [Append(job_stream(job_id), 0, [event])],
            answer=lambda: projection.jobs[job_id],
            on_refused=refused,
        )

    def _same_or_conflict(self, job_id: str, spec: AcceptedSpec) -> JobView:
        job = self._projection.jobs.get(job_id)
        if job is None:  # recorded, then evicted past the retention: the caller reads its stream
            raise EvictedJob(job_id)
        return same_or_conflict(job, spec)

    def _plan_report(self, cmd: RecordTaskReport) -> Plan:
        # Decided on the job as this batch's earlier reports of it leave it (a chained plan).
        job_id = str(cmd.record.get("job_id"))
        job = self._reported_in_batch.get(job_id) or self._projection.jobs.get(job_id)
        if job is None:
            return Plan(answer=lambda: False)
        report = parse(cmd.name, cmd.record)
        assert isinstance(report, TaskReport)  # the consumer takes only TaskStarted/Finished/Failed
        if not relevant_report(job, report):
            return Plan(answer=lambda: False)
        # Recorded as received (its own event id and fields), so a redelivery is refused as a duplicate.
        fact = Outgoing(cmd.name, cmd.record, _event_uuid(cmd.event_id))
        after = evolve(job, report, job.version + 1, self._clock.now())
        decided, final = self._envelopes.followed_through(after, follow_ups(after))
        events = [fact, *decided]
        reported = self._reported_in_batch

        def recorded() -> bool:
            self._count_outcomes(events)
            self.activity.count(f"{cmd.name} recorded")
            return True

        def refused(exc: Exception) -> bool:
            if not isinstance(exc, DuplicateEventId):
                raise exc
            return False  # recorded before (a redelivery)

        return Plan(
            [Append(job_stream(job.id), job.version, events)],
            answer=recorded,
            on_refused=refused,
            wakes=any(e.name in _ROOM_NAMES for e in events),
            chained=True,
            staged=lambda: reported.__setitem__(job.id, final),
        )

    def _plan_reconcile(self, cmd: ReconcileNode) -> Plan:
        projection = self._projection
        regions = self._capacity.regions()
        actions = self._reconciler.reconcile(
            projection.live,
            cmd.snapshot,
            self._clock.now(),
            lambda job, task: placed(job, task.placement(), self._cycle_number(), regions),
            owner=self._owner,
        )
        if not actions:
            return Plan(answer=lambda: 0)
        appends = [
            Append(
                job_stream(job_id),
                projection.jobs[job_id].version,
                self._envelopes.with_follow_ups(projection.jobs[job_id], decisions),
            )
            for job_id, decisions in actions.per_job.items()
        ]
        if actions.unknown_stops:
            stream = f"node-{cmd.snapshot['node_id']}"
            appends.append(
                Append(
                    stream, projection.versions.get(stream, 0), self._envelopes.events(actions.unknown_stops)
                )
            )
        count = sum(len(a.events) for a in appends)

        def recorded() -> int:
            self._reconciler.sent(actions)
            self._metrics.decision("reconciled", count)
            self.activity.count("reconciliation orders", count)
            return count

        return Plan(appends, answer=recorded)

    # -- one at a time -----------------------------------------------------------------------------

    async def _cancel(self, cmd: CancelJob) -> JobView:
        job = self._job(cmd.job_id)
        if job.phase.final:
            return cancel_of_final(job)
        events = self._envelopes.events(cancel(job, cmd.reason or "cancelled", cmd.requested_by, cmd.by))
        await self._commit([Append(job_stream(job.id), job.version, events)], {job.id: None})
        self._metrics.decision("cancelled")
        log.info("job %s cancelled (%s): %d task(s) told to stop", job.id, cmd.reason, len(events) - 1)
        return self._projection.jobs[job.id]

    async def _node_lost(self, cmd: MarkNodeLost) -> int:
        appends = []
        for job in list(self._projection.live.values()):
            lost = lost_on(job, cmd.node_id, cmd.lost_at, confirmed=cmd.confirmed)
            if not lost:
                continue
            facts: list[JobEvent] = [
                TaskFailed(
                    t.task_id, job.id, t.node_id, t.attempt, f"node {cmd.node_id} was lost", "NODE_LOST", None
                )
                for t in lost
            ]
            facts += lost_attempt_stops(job, lost, cmd.node_id)
            appends.append(
                Append(job_stream(job.id), job.version, self._envelopes.with_follow_ups(job, facts))
            )
        if appends:
            await self._commit(appends)
            self._count_outcomes([e for a in appends for e in a.events])
            log.info(
                "node %s lost%s: %d job(s) requeued, their lost attempts told to stop",
                cmd.node_id,
                "" if cmd.confirmed else " (suspected: non-preemptible jobs kept)",
                len(appends),
            )
        return len(appends)

    # -- helpers -------------------------------------------------------------------------------------

    def _owner(self, task_id: str) -> JobView | None:
        job_id = self._projection.task_owner.get(task_id)
        return None if job_id is None else self._projection.jobs.get(job_id)

    def _count_outcomes(self, events: Sequence[Outgoing]) -> None:
        for event in events:
            outcome = _OUTCOME_NAMES.get(event.name)
            if outcome:
                self._metrics.decision(outcome)
            if event.name in ("JobRequeued", "JobFailed"):
                record = event.record
                log.info("job %s %s: %s", record.get("job_id"), outcome, record.get("reason") or "")


_OUTCOME_NAMES = {t.__name__: outcome for t, outcome in _OUTCOMES.items()}
_ROOM_NAMES = frozenset(t.__name__ for t in ROOM_GIVEN_BACK)


def _event_uuid(event_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(event_id)
    except ValueError:
        return uuid.uuid5(REQUEST_NAMESPACE, event_id)
