"""Consumed records of the scheduler's topics → use cases, each in a tracked unit of work.

The handler table says which event of which topic runs which use case. Records of those topics that
are not about a replica (another producer's command reply, a placement of a batch job) are passed over
without a transaction; an event that does not belong on its topic at all is dead-lettered.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

from suanli.bus import ConsumedEvent
from suanli.contracts.catalogue import events_on
from suanli.contracts.load import LoadView, load_from_record
from suanli.contracts.replica_env import REPLICA_ENV
from suanli.eventstore import AlreadyProcessed
from suanli.infra.transient import RetriableError, is_transient
from suanli.serving.domain.service import REQUEST_PREFIX
from suanli.serving.service_layer.ports import Services, ServingQueries, UnitOfWork
from suanli.serving.service_layer.serving import ServingService

log = logging.getLogger(__name__)

INPUTS = ("jobs.replies", "jobs.events", "placements", "tasks.lifecycle")
LOAD = "services.load"  # consumed apart: into the in-memory load view, by every instance

Effect = Callable[[Services], Awaitable[None]]
# (service, record) -> the effect to run in a unit of work, or None when the record is not ours.
Handler = Callable[[ServingService, Mapping[str, Any]], Effect | None]


class UnexpectedEvent(ValueError):
    """An event that does not belong on the topic it arrived on (dead-lettered)."""


def _ours(request_id: object) -> bool:
    return isinstance(request_id, str) and request_id.startswith(REQUEST_PREFIX)


def _answered(s: ServingService, r: Mapping[str, Any]) -> Effect | None:
    if not _ours(r["request_id"]) or r["command"] != "JobSubmissionRequested":
        return None
    return lambda unit: s.job_answered(unit, r["request_id"], r["ok"], r["job_id"], r["code"], r["message"])


def _submitted(s: ServingService, r: Mapping[str, Any]) -> Effect | None:
    request_id = r.get("request_id") or ""
    if not _ours(request_id):
        return None
    return lambda unit: s.job_submitted(unit, request_id, r["job_id"])


def _ended(s: ServingService, r: Mapping[str, Any], name: str) -> Effect:
    return lambda unit: s.job_ended(unit, r["job_id"], name, str(r.get("reason") or ""))


def _requeued(s: ServingService, r: Mapping[str, Any]) -> Effect:
    return lambda unit: s.job_requeued(unit, r["job_id"], int(r["attempt"]), str(r.get("reason") or ""))


def _placed(s: ServingService, r: Mapping[str, Any]) -> Effect | None:
    replica_id = (r.get("env") or {}).get(REPLICA_ENV)
    if not replica_id:
        return None
    return lambda unit: s.task_placed(
        unit, replica_id, r["job_id"], r["node_id"], r["region"], r["site"], int(r["attempt"])
    )


def _started(s: ServingService, r: Mapping[str, Any]) -> Effect:
    return lambda unit: s.task_started(unit, r["job_id"], r["node_id"], int(r["attempt"]))


# Facts named by job id only: most are about other jobs, passed over after one unlocked lookup.
BY_JOB = frozenset(
    {
        ("jobs.events", "JobFailed"),
        ("jobs.events", "JobSucceeded"),
        ("jobs.events", "JobCancelled"),
        ("jobs.events", "JobRequeued"),
        ("tasks.lifecycle", "TaskStarted"),
    }
)

HANDLERS: Mapping[tuple[str, str], Handler] = MappingProxyType(
    {
        ("jobs.replies", "JobCommandAnswered"): _answered,
        ("jobs.events", "JobSubmitted"): _submitted,
        ("jobs.events", "JobFailed"): lambda s, r: _ended(s, r, "JobFailed"),
        ("jobs.events", "JobSucceeded"): lambda s, r: _ended(s, r, "JobSucceeded"),
        ("jobs.events", "JobCancelled"): lambda s, r: _ended(s, r, "JobCancelled"),
        ("jobs.events", "JobRequeued"): _requeued,
        ("placements", "TaskPlaced"): _placed,
        ("tasks.lifecycle", "TaskStarted"): _started,
    }
)


class ServingHandler:
    """The `EventConsumer` handler of serving's inputs (`INPUTS`, by their physical names in `topics`).

    Domain refusals propagate and the bus dead-letters the record; transient database trouble becomes
    `RetriableError`, so the bus retries it in place.
    """

    def __init__(
        self,
        service: ServingService,
        uow: UnitOfWork,
        queries: ServingQueries,
        group: str,
        topics: Mapping[str, str],
    ) -> None:
        self._service = service
        self._uow = uow
        self._queries = queries
        self._group = group
        self._logical = {physical: logical for logical, physical in topics.items()}
        # Effects run so far: a lookup made before one may be out of date (it may have made a job ours).
        self._effects = 0
        # The last `prepare`: the effect count then, the jobs looked up, and those found to be ours.
        self._looked_up: tuple[int, frozenset[str], frozenset[str]] | None = None

    async def prepare(self, events: Sequence[ConsumedEvent]) -> None:
        """The bus's `Prepare` hook: one query for the jobs of a fetch's records named by job id.

        A lookup per record was most of serving's CPU, and a round trip of PostgreSQL's each, at
        bench/latency.py's load (about 100 records a second, nearly all about batch jobs).
        """
        ids = {e.record["job_id"] for e in events if self._by_job(e)}
        if ids:
            self._looked_up = (self._effects, frozenset(ids), frozenset(await self._queries.known_jobs(ids)))

    async def __call__(self, event: ConsumedEvent) -> None:
        effect = self._effect(event)
        if effect is None:
            return
        try:
            if await self._elsewhere(event):
                return
            self._effects += 1
            async with self._uow.tracked(
                self._group, event.topic, event.partition, event.offset, event.event_id
            ) as unit:
                await effect(unit)
        except AlreadyProcessed:
            log.debug("%s[%d]@%d already applied", event.topic, event.partition, event.offset)
        except Exception as exc:
            if is_transient(exc):
                raise RetriableError(f"database: {exc!r}") from exc
            raise

    async def _elsewhere(self, event: ConsumedEvent) -> bool:
        """A fact named by job id about a job that is no replica's (no transaction, no tracking)."""
        if not self._by_job(event):
            return False
        job_id = event.record["job_id"]
        looked_up = self._looked_up
        if looked_up is not None and looked_up[0] == self._effects and job_id in looked_up[1]:
            return job_id not in looked_up[2]
        return not await self._queries.knows_job(job_id)

    def _by_job(self, event: ConsumedEvent) -> bool:
        logical = self._logical.get(event.topic)
        return (
            not event.tombstone
            and (logical, event.event_name) in BY_JOB
            and isinstance(event.record.get("job_id"), str)
        )

    def _effect(self, event: ConsumedEvent) -> Effect | None:
        topic = self._logical.get(event.topic)
        if topic is None:
            raise UnexpectedEvent(f"serving does not consume {event.topic}")
        if event.tombstone:
            return None
        name = event.event_name or ""
        if name not in events_on(topic):
            raise UnexpectedEvent(f"{name or 'an unnamed record'} is not an event of {topic}")
        handler = HANDLERS.get((topic, name))
        return None if handler is None else handler(self._service, event.record)


class LoadHandler:
    """The `EventConsumer` handler of `services.load`: each report into the in-memory load view.

    No transaction: the view is rebuilt from the next reports after a restart (full state, latest wins).
    Anything but a valid ReplicaLoadReported is dead-lettered with the reason.
    """

    def __init__(
        self, view: LoadView, now: Callable[[], datetime], counted: Callable[[bool], None] | None = None
    ) -> None:
        self._view = view
        self._now = now
        self._counted = counted

    async def __call__(self, event: ConsumedEvent) -> None:
        if event.tombstone:
            return
        if event.event_name != "ReplicaLoadReported":
            raise UnexpectedEvent(f"{event.event_name or 'an unnamed record'} is not an event of {LOAD}")
        kept = self._view.report(load_from_record(event.record), self._now())
        if self._counted is not None:
            self._counted(kept)
