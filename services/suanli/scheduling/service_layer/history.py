"""A job's history read from its stream `job-<id>` in the event store (the record, not the projection:
earlier attempts, who preempted or cancelled it and why are all there), and the view of a job the
projection no longer holds (evicted past the retention), folded from the same stream."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from suanli.eventstore import StoredEvent
from suanli.scheduling.domain.jobs import JobView
from suanli.scheduling.domain.jobs.history import History, build_history
from suanli.scheduling.service_layer.payloads import JOB_EVENTS, parse
from suanli.scheduling.service_layer.projection import decode_payload, fold_job, job_stream


class StreamReader(Protocol):
    """The part of an `EventStore` a history needs."""

    async def read(self, stream: str, after_version: int = 0) -> list[StoredEvent]: ...


async def job_history(store: StreamReader, job_id: str, now: datetime) -> History | None:
    """The history of `job_id` as of `now`; None when its stream holds no job."""
    events = []
    for stored in await store.read(job_stream(job_id)):
        if stored.event_name not in JOB_EVENTS:
            continue
        record = decode_payload(stored)
        # The time the projection gives the event too: when it happened, else when it was recorded.
        events.append((record.get("occurred_at") or stored.recorded_at, parse(stored.event_name, record)))
    return build_history(events, now) if events else None


async def archived_job(store: StreamReader, job_id: str) -> JobView | None:
    """The view of `job_id` folded from its stream, as the projection had it; None when there is no job."""
    return fold_job(await store.read(job_stream(job_id)))
