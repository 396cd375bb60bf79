"""A job's history read from its stream `job-<id>` in the event store (the record, not the projection:
earlier attempts, who preempted or cancelled it and why are all there)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from suanli.eventstore import StoredEvent
from suanli.scheduling.domain.jobs import JobView
from suanli.scheduling.domain.jobs.history import History, build_history
from suanli.scheduling.service_layer.payloads import JOB_EVENTS, parse
from suanli.scheduling.service_layer.projection import Projection, decode_payload, job_stream


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


def queue_position(projection: Projection, job: JobView) -> tuple[int, int] | None:
    """Where a waiting job stands in its queue, as the cycle takes the queue's jobs: higher priority
    first (its class's value now, as the cycle reads it), then submission order. (position from 1, how
    many wait in the queue); None for a job that is not waiting."""
    if not job.waiting:
        return None

    def rank(j: JobView) -> tuple[int, int, str]:
        value = projection.priority_of(j.spec.priority_class) if j.spec.priority_class else None
        return (-(j.spec.priority if value is None else value), j.seq, j.id)

    waiting = [j for j in projection.live.values() if j.waiting and j.spec.queue == job.spec.queue]
    mine = rank(job)
    return 1 + sum(1 for j in waiting if rank(j) < mine), len(waiting)
