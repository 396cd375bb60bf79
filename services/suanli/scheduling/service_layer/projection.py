"""The service's state: a fold of every event in the store, in commit order.

Leader and standby keep the same projection: the leader catches up right after each of its own commits
(so it decides on exactly what is recorded), a standby tails the store on a timer. Reads (gRPC) are served
from it; watchers of a job are told about every event applied to it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from suanli.contracts import decode
from suanli.eventstore import StoredEvent
from suanli.scheduling.domain.jobs import JobSubmitted, JobView, Phase, evolve, submitted
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec
from suanli.scheduling.domain.queueing.admin import with_class, without_class
from suanli.scheduling.service_layer.job_index import JobIndex
from suanli.scheduling.service_layer.payloads import JOB_EVENTS, parse
from suanli.scheduling.service_layer.queues_config import queue_from_record
from suanli.telemetry.tracing import TRACEPARENT

JOB_STREAM = "job-"
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


class Projection:
    def __init__(self) -> None:
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
        self._seq = 0
        self._watchers: dict[str, set[asyncio.Queue[Change]]] = {}

    @property
    def next_seq(self) -> int:
        return self._seq + 1

    def apply_all(self, events: Iterable[StoredEvent]) -> None:
        for event in events:
            self.apply(event)

    def apply(self, event: StoredEvent) -> None:
        self.position = max(self.position, event.position)
        self.versions[event.stream] = event.version
        if event.stream.startswith(JOB_STREAM):
            self._apply_job(event)
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
        if event.event_name not in JOB_EVENTS:
            return
        record = decode_payload(event)
        at = record.get("occurred_at") or event.recorded_at
        job_id = event.stream[len(JOB_STREAM) :]
        fact = parse(event.event_name, record)
        if isinstance(fact, JobSubmitted):
            seq = int(event.metadata.get("seq", event.position))
            self._seq = max(self._seq, seq)
            job = submitted(fact, seq, at)
            if TRACEPARENT in event.metadata:
                self.traces[job_id] = event.metadata[TRACEPARENT]
            if job.spec.request_id:
                self.by_request[(job.spec.tenant, job.spec.request_id)] = job_id
            for task in job.tasks:
                self.task_owner[task.task_id] = job_id
        else:
            current = self.jobs.get(job_id)
            if current is None:
                return
            job = evolve(current, fact, event.version, at)
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
        change = Change(job, event.event_name, getattr(fact, "task_id", ""), getattr(fact, "attempt", 0), at)
        for queue in self._watchers.get(job_id, ()):
            queue.put_nowait(change)

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
