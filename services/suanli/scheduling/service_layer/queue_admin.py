"""Queue administration: queues and priority classes created, replaced and deleted as recorded events.

The queue set is a fold of `QueueCreated` / `QueueUpdated` / `QueueDeleted` (stream `queue-<name>`) and
`PriorityClassDefined` / `PriorityClassDeleted` (stream `priority-classes`), published on `queues.events`
through the outbox like every other scheduling fact. The queue file only seeds a store that holds no queue
state yet (`SeedQueues`); after that the events win and the file is not read (docs/queues.md).

Each command runs in its own turn of the write lock (leader only), decides with the pure rules of
`domain.queueing.admin` on the caught-up projection, and commits; the commit wakes the cycle, so a new
queue admits at once and a changed quota or cohort counts from the next cycle on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from suanli.scheduling.domain.jobs import Actor, JobView, Phase
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec
from suanli.scheduling.domain.queueing.admin import (
    LiveJobs,
    check_create,
    check_delete,
    check_delete_class,
    check_update,
    creation_order,
)
from suanli.scheduling.service_layer.commands import (
    CreateQueue,
    DefinePriorityClass,
    DeletePriorityClass,
    DeleteQueue,
    SeedQueues,
    UpdateQueue,
)
from suanli.scheduling.service_layer.envelopes import Envelopes
from suanli.scheduling.service_layer.errors import Conflict
from suanli.scheduling.service_layer.payloads import actor_record
from suanli.scheduling.service_layer.ports import Append, Outgoing
from suanli.scheduling.service_layer.projection import (
    PRIORITY_STREAM,
    Projection,
    admin_fields,
    queue_stream,
)
from suanli.scheduling.service_layer.queues_config import queue_from_record, queue_record

log = logging.getLogger(__name__)

Commit = Callable[[Sequence[Append]], Awaitable[None]]


def _live(jobs: Mapping[str, JobView], belongs: Callable[[JobView], bool]) -> LiveJobs:
    pending = running = 0
    for job in jobs.values():
        if not belongs(job) or (job.phase.final and not job.active):
            continue
        if job.phase is Phase.PENDING:
            pending += 1
        else:
            running += 1
    return LiveJobs(pending, running)


class QueueAdmin:
    def __init__(self, projection: Projection, envelopes: Envelopes, commit: Commit) -> None:
        """`commit`: the job commands' commit (within a turn of the write lock; wakes the cycle)."""
        self._projection = projection
        self._envelopes = envelopes
        self._commit = commit
        self.handlers: Mapping[type, Callable[[Any], Awaitable[Any]]] = {
            SeedQueues: self._seed,
            CreateQueue: self._create,
            UpdateQueue: self._update,
            DeleteQueue: self._delete,
            DefinePriorityClass: self._define_class,
            DeletePriorityClass: self._delete_class,
        }

    # -- the file ----------------------------------------------------------------------------------

    async def _seed(self, cmd: SeedQueues) -> int:
        projection = self._projection
        if projection.has_queue_state:
            wanted = {q.name: q for q in cmd.config.queues}
            if wanted != projection.queues or cmd.config.priority_classes != projection.priority_classes:
                log.warning(
                    "queue file not applied: the store already holds the queue set (%d queue(s)); "
                    "change queues with `suanli queue` (docs/queues.md)",
                    len(projection.queues),
                )
            return 0
        appends = [
            Append(queue_stream(spec.name), 0, [self._queue_event("QueueCreated", spec, "", None)])
            for spec in creation_order(cmd.config.queues)
        ]
        classes = [
            self._fact("PriorityClassDefined", {"name": c.name, "value": c.value}, "", None)
            for c in cmd.config.priority_classes
        ]
        if classes:
            appends.append(Append(PRIORITY_STREAM, 0, classes))
        if appends:
            await self._commit(appends)
            log.info(
                "queue set seeded from the queue file: %d queue(s), %d priority class(es)",
                len(cmd.config.queues),
                len(classes),
            )
        return len(appends)

    # -- queues --------------------------------------------------------------------------------------

    async def _create(self, cmd: CreateQueue) -> QueueSpec:
        retried = self._retried("QueueCreated", queue_record(cmd.spec), cmd.request_id)
        if retried is not None:
            return queue_from_record(retried)
        check_create(self._projection.queues, cmd.spec)
        await self._record_queue("QueueCreated", cmd.spec, cmd.request_id, cmd.by)
        log.info("queue %s created", cmd.spec.name)
        return self._projection.queues[cmd.spec.name]

    async def _update(self, cmd: UpdateQueue) -> QueueSpec:
        retried = self._retried("QueueUpdated", queue_record(cmd.spec), cmd.request_id)
        if retried is not None:
            return queue_from_record(retried)
        if check_update(self._projection.queues, cmd.spec):
            await self._record_queue("QueueUpdated", cmd.spec, cmd.request_id, cmd.by)
            log.info("queue %s updated", cmd.spec.name)
        return self._projection.queues[cmd.spec.name]

    async def _delete(self, cmd: DeleteQueue) -> str:
        if self._retried("QueueDeleted", {"name": cmd.name}, cmd.request_id) is not None:
            return cmd.name
        projection = self._projection
        live = _live(projection.live, lambda job: job.spec.queue == cmd.name)
        check_delete(projection.queues, cmd.name, live)
        stream = queue_stream(cmd.name)
        event = self._fact("QueueDeleted", {"name": cmd.name}, cmd.request_id, cmd.by)
        await self._commit([Append(stream, projection.versions.get(stream, 0), [event])])
        log.info("queue %s deleted", cmd.name)
        return cmd.name

    # -- priority classes ----------------------------------------------------------------------------

    async def _define_class(self, cmd: DefinePriorityClass) -> PriorityClass:
        fields = {"name": cmd.name, "value": cmd.value}
        defined = PriorityClass(cmd.name, cmd.value)
        if self._retried("PriorityClassDefined", fields, cmd.request_id) is not None:
            return defined
        if defined not in self._projection.priority_classes:
            await self._record_classes(self._fact("PriorityClassDefined", fields, cmd.request_id, cmd.by))
            log.info("priority class %s = %d", cmd.name, cmd.value)
        return defined

    async def _delete_class(self, cmd: DeletePriorityClass) -> str:
        if self._retried("PriorityClassDeleted", {"name": cmd.name}, cmd.request_id) is not None:
            return cmd.name
        projection = self._projection
        live = _live(projection.live, lambda job: job.spec.priority_class == cmd.name)
        check_delete_class(projection.priority_classes, cmd.name, live)
        await self._record_classes(
            self._fact("PriorityClassDeleted", {"name": cmd.name}, cmd.request_id, cmd.by)
        )
        log.info("priority class %s deleted", cmd.name)
        return cmd.name

    # -- helpers -------------------------------------------------------------------------------------

    def _retried(self, event: str, record: Mapping[str, Any], request_id: str) -> dict[str, Any] | None:
        """The recorded fields when `request_id` already did this very change; a different use of the
        same key is refused, so a retry can never be taken for another request."""
        if not request_id:
            return None
        known = self._projection.admin_requests.get(request_id)
        if known is None:
            return None
        if known.event != event or known.fields != admin_fields(event, record):
            raise Conflict(
                f"request_id {request_id!r} was already used for {known.event} of {known.fields['name']!r} "
                "with another request"
            )
        return known.fields

    async def _record_queue(self, name: str, spec: QueueSpec, request_id: str, by: Actor | None) -> None:
        stream = queue_stream(spec.name)
        event = self._queue_event(name, spec, request_id, by)
        await self._commit([Append(stream, self._projection.versions.get(stream, 0), [event])])

    async def _record_classes(self, event: Outgoing) -> None:
        version = self._projection.versions.get(PRIORITY_STREAM, 0)
        await self._commit([Append(PRIORITY_STREAM, version, [event])])

    def _queue_event(self, name: str, spec: QueueSpec, request_id: str, by: Actor | None) -> Outgoing:
        return self._fact(name, queue_record(spec), request_id, by)

    def _fact(self, name: str, record: Mapping[str, Any], request_id: str, by: Actor | None) -> Outgoing:
        return self._envelopes.fact(name, {**record, "request_id": request_id, "principal": actor_record(by)})
