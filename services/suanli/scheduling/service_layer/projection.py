"""The service's state: a fold of every event in the store, in commit order.

Leader and standby keep the same projection: the leader catches up right after each of its own commits
(so it decides on exactly what is recorded), a standby tails the store on a timer. Reads (gRPC) are served
from it; watchers of a job are told about every event applied to it.

Memory is bounded by `Retention`: a finished job (final, nothing left on a node) is evicted once it has
been finished longer than ``finished_s`` or once more than ``max_finished`` finished jobs are kept, oldest
first. Its age is measured on the store's clock (the ``recorded_at`` of the events applied), so which
jobs are kept is a function of the events alone: a projection restored from a snapshot and caught up
equals one folded from position 0. Reads of an evicted job fold its stream on request (`fold_job`).
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from suanli.contracts import decode
from suanli.eventstore import StoredEvent
from suanli.scheduling.domain.jobs import JobEvent, JobSubmitted, JobView, Phase, evolve, submitted
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec
from suanli.scheduling.domain.queueing.admin import with_class, without_class
from suanli.scheduling.service_layer.job_index import JobIndex
from suanli.scheduling.service_layer.payloads import JOB_EVENTS, parse
from suanli.scheduling.service_layer.queues_config import queue_from_record
from suanli.telemetry.tracing import TRACEPARENT

JOB_STREAM = "job-"
# timedelta cannot hold an infinite retention: anything longer than this keeps finished jobs for good.
_FOREVER_S = 1e9
QUEUE_STREAM = "queue-"
PRIORITY_STREAM = "priority-classes"
# Internal events (never published) are JSON; integration events are Avro from suanli.contracts. The
# JSON queue events are what stores written before queue administration hold: still read, never written.
JSON_EVENTS = frozenset({"QueueConfigured", "QueueRemoved", "PriorityClassesConfigured"})
QUEUE_SET = frozenset({"QueueCreated", "QueueUpdated", "QueueConfigured"})
# The administration events that carry a request_id, and the fields a retry must repeat to be the same.
ADMIN_FIELDS: dict[str, tuple[str, ...]] = {
    "QueueCreated": ("name", "cohort", "stopped", "quotas"),
    "QueueUpdated": ("name", "cohort", "stopped", "quotas"),
    "QueueDeleted": ("name",),
    "PriorityClassDefined": ("name", "value"),
    "PriorityClassDeleted": ("name",),
}


def job_stream(job_id: str) -> str:
    return f"{JOB_STREAM}{job_id}"


def queue_stream(name: str) -> str:
    return f"{QUEUE_STREAM}{name}"


def decode_payload(event: StoredEvent) -> dict[str, Any]:
    record: dict[str, Any] = (
        json.loads(event.payload) if event.event_name in JSON_EVENTS else decode(event.payload)[1]
    )
    return record


@dataclass(frozen=True, slots=True)
class AdminRequest:
    """What an administration request_id was used for: the event it recorded and that event's fields."""

    event: str
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Retention:
    """How many finished jobs the projection keeps: those finished within ``finished_s`` seconds of the
    newest event applied, at most ``max_finished`` of them (0: no cap). The default keeps every job."""

    finished_s: float = float("inf")
    max_finished: int = 0


KEEP_ALL = Retention()


def job_step(current: JobView | None, event: StoredEvent) -> tuple[JobView, JobEvent, datetime] | None:
    """The view of a job after one event of its stream (`current`: the view before, None before its
    submission), with the typed fact and the time the view gives it; None when the event changes nothing
    (not a job event, or a fact about a job never submitted)."""
    if event.event_name not in JOB_EVENTS:
        return None
    record = decode_payload(event)
    at = record.get("occurred_at") or event.recorded_at
    fact = parse(event.event_name, record)
    if isinstance(fact, JobSubmitted):
        return submitted(fact, int(event.metadata.get("seq", event.position)), at), fact, at
    if current is None:
        return None
    return evolve(current, fact, event.version, at), fact, at


def fold_job(events: Iterable[StoredEvent]) -> JobView | None:
    """A job's view folded from its whole stream, exactly as the projection folds it; None when the
    stream holds no submission."""
    job: JobView | None = None
    for event in events:
        step = job_step(job, event)
        if step is not None:
            job = step[0]
    return job


def admin_fields(event: str, record: Mapping[str, Any]) -> dict[str, Any]:
    return {key: record.get(key) for key in ADMIN_FIELDS[event]}


@dataclass(frozen=True, slots=True)
class Change:
    """One event applied to a job, as watchers see it."""

    job: JobView
    event: str
    task_id: str = ""
    attempt: int = 0
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class ProjectionState:
    """What a snapshot keeps of a projection: everything its decisions read, up to ``position``. The
    lookups (index, live jobs, task owners, request ids, pending counts) are rebuilt from ``jobs``;
    pending reasons have their own table."""

    position: int
    seq: int
    horizon: datetime | None
    evicted: int
    versions: dict[str, int]
    jobs: tuple[JobView, ...]
    finished: tuple[tuple[str, datetime], ...]
    traces: dict[str, str]
    queues: tuple[QueueSpec, ...]
    priority_classes: tuple[PriorityClass, ...]
    admin_requests: dict[str, AdminRequest]


class Projection:
    def __init__(self, retention: Retention = KEEP_ALL) -> None:
        self.retention = retention
        self.position = 0
        self.versions: dict[str, int] = {}
        self.jobs: dict[str, JobView] = {}
        # The same jobs in submission order per tenant and queue: list pages read only their own scope.
        self.index = JobIndex()
        # Jobs that still matter to a cycle or to reconciliation: not final, or holding room (a cancelled
        # job's stopping tasks). Kept so that per-cycle and per-snapshot work does not grow with history.
        self.live: dict[str, JobView] = {}
        self.task_owner: dict[str, str] = {}  # task id -> job id
        # Live job id -> the trace its submission ran in: a cycle decides for it in that trace.
        self.traces: dict[str, str] = {}
        # (tenant, request_id) -> job id: idempotency keys are per tenant.
        self.by_request: dict[tuple[str, str], str] = {}
        self.queues: dict[str, QueueSpec] = {}
        self.priority_classes: tuple[PriorityClass, ...] = ()
        # request_id -> what it did: administration retries answer the first outcome (docs/queues.md).
        self.admin_requests: dict[str, AdminRequest] = {}
        self.pending_reasons: dict[str, dict[str, Any]] = {}
        # Tenant -> its jobs in phase PENDING: the API's per-tenant pending limit reads it per submit.
        self.pending_by_tenant: dict[str, set[str]] = {}
        # Finished jobs in the order they finished, with the store time of that: the eviction queue.
        self.finished: OrderedDict[str, datetime] = OrderedDict()
        self.horizon: datetime | None = None  # the newest recorded_at applied: retention's "now"
        self.evicted = 0
        self._seq = 0
        self._watchers: dict[str, set[asyncio.Queue[Change]]] = {}

    def state(self) -> ProjectionState:
        """The state as of now, sharing the (immutable) job views: cheap enough to take on the loop."""
        return ProjectionState(
            position=self.position,
            seq=self._seq,
            horizon=self.horizon,
            evicted=self.evicted,
            versions=dict(self.versions),
            jobs=tuple(self.jobs.values()),
            finished=tuple(self.finished.items()),
            traces=dict(self.traces),
            queues=tuple(self.queues.values()),
            priority_classes=self.priority_classes,
            admin_requests=dict(self.admin_requests),
        )

    @classmethod
    def restored(cls, state: ProjectionState, retention: Retention = KEEP_ALL) -> Projection:
        """A projection continuing from ``state`` (a snapshot), under ``retention`` (a tighter one than
        the snapshot's evicts at once; jobs the snapshot had evicted are not brought back)."""
        projection = cls(retention)
        projection.position = state.position
        projection._seq = state.seq
        projection.horizon = state.horizon
        projection.evicted = state.evicted
        projection.versions = dict(state.versions)
        for job in state.jobs:
            projection._track(job)
        projection.finished = OrderedDict(state.finished)
        projection.traces = dict(state.traces)
        projection.queues = {queue.name: queue for queue in state.queues}
        projection.priority_classes = state.priority_classes
        projection.admin_requests = dict(state.admin_requests)
        projection._evict()
        return projection

    @property
    def next_seq(self) -> int:
        return self._seq + 1

    def apply_all(self, events: Iterable[StoredEvent]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: StoredEvent) -> None:
        self.position = max(self.position, event.position)
        if self.horizon is None or event.recorded_at > self.horizon:
            self.horizon = event.recorded_at
        self.versions[event.stream] = event.version
        if event.stream.startswith(JOB_STREAM):
            self._apply_job(event)
            self._evict()
        elif event.stream.startswith(QUEUE_STREAM):
            record = self._admin(event)
            if event.event_name in QUEUE_SET:
                self.queues[record["name"]] = queue_from_record(record)
            else:  # QueueDeleted, or a legacy QueueRemoved
                self.queues.pop(record["name"], None)
        elif event.stream == PRIORITY_STREAM:
            self._apply_classes(event.event_name, self._admin(event))

    @property
    def has_queue_state(self) -> bool:
        """Whether the store holds any queue or priority class event (then the queue file is not read)."""
        return PRIORITY_STREAM in self.versions or any(s.startswith(QUEUE_STREAM) for s in self.versions)

    def _admin(self, event: StoredEvent) -> dict[str, Any]:
        record = decode_payload(event)
        request_id = record.get("request_id")
        if request_id:
            fields = admin_fields(event.event_name, record)
            self.admin_requests[request_id] = AdminRequest(event.event_name, fields)
        return record

    def _apply_classes(self, name: str, record: Mapping[str, Any]) -> None:
        classes = self.priority_classes
        if name == "PriorityClassDefined":
            self.priority_classes = with_class(classes, PriorityClass(record["name"], int(record["value"])))
        elif name == "PriorityClassDeleted":
            self.priority_classes = without_class(classes, record["name"])
        else:  # a legacy PriorityClassesConfigured: the whole set
            self.priority_classes = tuple(PriorityClass(c["name"], c["value"]) for c in record["classes"])

    def _apply_job(self, event: StoredEvent) -> None:
        job_id = event.stream[len(JOB_STREAM) :]
        step = job_step(self.jobs.get(job_id), event)
        if step is None:
            if job_id not in self.jobs:  # an evicted job's stream: no version kept for it either
                self.versions.pop(event.stream, None)
            return
        job, fact, at = step
        if isinstance(fact, JobSubmitted):
            self._seq = max(self._seq, job.seq)
            if TRACEPARENT in event.metadata:
                self.traces[job_id] = event.metadata[TRACEPARENT]
        self._track(job)
        if job.phase.final and not job.active:
            self.finished.pop(job_id, None)
            self.finished[job_id] = event.recorded_at
        change = Change(job, event.event_name, getattr(fact, "task_id", ""), getattr(fact, "attempt", 0), at)
        for queue in self._watchers.get(job_id, ()):
            queue.put_nowait(change)

    def _track(self, job: JobView) -> None:
        """Record a job's new view in every map and index that holds it."""
        job_id = job.id
        if job_id not in self.jobs:
            if job.spec.request_id:
                self.by_request[(job.spec.tenant, job.spec.request_id)] = job_id
            for task in job.tasks:
                self.task_owner[task.task_id] = job_id
        self.jobs[job_id] = job
        self.index.put(job)
        self._count_pending(job)
        if job.phase.final and not job.active:
            self.live.pop(job_id, None)
            self.traces.pop(job_id, None)
        else:
            self.live[job_id] = job
        if job.phase.final:
            self.pending_reasons.pop(job_id, None)

    def _evict(self) -> None:
        """Forget the finished jobs past the retention, oldest finished first."""
        finished, horizon = self.finished, self.horizon
        if not finished or horizon is None:
            return
        cap = self.retention.max_finished
        oldest = (
            horizon - timedelta(seconds=self.retention.finished_s)
            if self.retention.finished_s < _FOREVER_S
            else None
        )
        while finished:
            job_id = next(iter(finished))
            if not (cap and len(finished) > cap) and (oldest is None or finished[job_id] >= oldest):
                return
            del finished[job_id]
            self._forget(self.jobs[job_id])

    def _forget(self, job: JobView) -> None:
        job_id = job.id
        del self.jobs[job_id]
        self.index.forget(job)
        self.versions.pop(job_stream(job_id), None)
        if job.spec.request_id:
            self.by_request.pop((job.spec.tenant, job.spec.request_id), None)
        for task in job.tasks:
            if self.task_owner.get(task.task_id) == job_id:
                del self.task_owner[task.task_id]
        self.live.pop(job_id, None)
        self.traces.pop(job_id, None)
        self.pending_reasons.pop(job_id, None)
        self.evicted += 1

    def _count_pending(self, job: JobView) -> None:
        tenant = job.spec.tenant
        if job.phase is Phase.PENDING:
            self.pending_by_tenant.setdefault(tenant, set()).add(job.id)
            return
        pending = self.pending_by_tenant.get(tenant)
        if pending is not None:
            pending.discard(job.id)
            if not pending:
                del self.pending_by_tenant[tenant]

    def pending_jobs(self, tenant: str) -> int:
        """How many of ``tenant``'s jobs are PENDING."""
        return len(self.pending_by_tenant.get(tenant, ()))

    def watch(self, job_id: str) -> asyncio.Queue[Change]:
        queue: asyncio.Queue[Change] = asyncio.Queue()
        self._watchers.setdefault(job_id, set()).add(queue)
        return queue

    def unwatch(self, job_id: str, queue: asyncio.Queue[Change]) -> None:
        watchers = self._watchers.get(job_id)
        if watchers is not None:
            watchers.discard(queue)
            if not watchers:
                del self._watchers[job_id]

    def priority_of(self, class_name: str) -> int | None:
        return next((c.value for c in self.priority_classes if c.name == class_name), None)
