"""The `Writer` on the PostgreSQL event store: events, their outbox rows and pending reasons in one
transaction, fenced by the leader lock, and the projection's catch-up from `read_all`.

Scheduling-context events go to the outbox on the topic and key the contracts catalogue names (TaskPlaced
on `placements` keyed by node, JobSubmitted on `jobs.events` keyed by job, ...). Task facts recorded from
`tasks.lifecycle` keep their original event id (so a redelivery is refused as a duplicate) and are not
published again. Internal events (queue configuration) are JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import asyncpg

from suanli.bus.topics import topic_name
from suanli.contracts import encode
from suanli.contracts.catalogue import EVENTS
from suanli.eventstore import NewEvent, OutboxMessage, PostgresEventStore, StreamAppend
from suanli.scheduling.service_layer.ports import Append, Outgoing
from suanli.scheduling.service_layer.projection import JSON_EVENTS, Projection

PENDING_TABLE = "scheduler_pending"


class Fence(Protocol):
    async def check(self, conn: asyncpg.Connection) -> None:
        """Raise `NotLeader` unless this instance still holds the leader lock (checked inside the tx)."""
        ...


class PostgresWriter:
    def __init__(
        self,
        store: PostgresEventStore,
        fence: Fence,
        *,
        topic_prefix: str | None = None,
        read_batch: int = 5000,
    ) -> None:
        self.store = store
        self.fence = fence
        self._prefix = topic_prefix
        self._batch = read_batch

    async def setup(self) -> None:
        await self.store.pool.execute(
            f"CREATE TABLE IF NOT EXISTS {self.store.schema}.{PENDING_TABLE} ("
            "job_id text PRIMARY KEY, reason jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )

    async def load_pending(self, projection: Projection) -> None:
        rows = await self.store.pool.fetch(f"SELECT job_id, reason FROM {self.store.schema}.{PENDING_TABLE}")
        projection.pending_reasons.update({r["job_id"]: json.loads(r["reason"]) for r in rows})

    async def commit(
        self, appends: Sequence[Append], pending: Mapping[str, Mapping[str, Any] | None] | None = None
    ) -> None:
        async with self.store.transaction(appending=True) as tx:
            await self.fence.check(tx.connection)
            batch = []
            for append in appends:
                events, outbox = self._encode(append.events)
                batch.append(StreamAppend(append.stream, append.expected_version, events, outbox))
            await tx.append_many(batch)
            if pending:
                table = f"{self.store.schema}.{PENDING_TABLE}"
                gone = [job_id for job_id, reason in pending.items() if reason is None]
                if gone:
                    await tx.connection.execute(f"DELETE FROM {table} WHERE job_id = ANY($1)", gone)
                rows = [
                    (job_id, json.dumps(reason)) for job_id, reason in pending.items() if reason is not None
                ]
                if rows:
                    await tx.connection.executemany(
                        f"INSERT INTO {table} (job_id, reason) VALUES ($1, $2::jsonb) ON CONFLICT (job_id) "
                        "DO UPDATE SET reason = EXCLUDED.reason, updated_at = now()",
                        rows,
                    )

    async def catch_up(self, projection: Projection) -> None:
        while True:
            events = await self.store.read_all(projection.position, self._batch)
            projection.apply_all(events)
            if len(events) < self._batch:
                return

    def _encode(self, outgoing: Sequence[Outgoing]) -> tuple[list[NewEvent], list[OutboxMessage]]:
        events: list[NewEvent] = []
        outbox: list[OutboxMessage] = []
        for o in outgoing:
            if o.name in JSON_EVENTS:
                payload = json.dumps(dict(o.record), default=str).encode()
            else:
                payload = encode(o.name, dict(o.record))
            event = NewEvent(o.event_id, o.name, payload, o.metadata)
            events.append(event)
            spec = EVENTS.get(o.name)
            if spec is not None and spec.context == "scheduling":
                key = str(o.record[spec.key]).encode()
                outbox.append(OutboxMessage.for_event(topic_name(spec.topic, self._prefix), key, event))
        return events, outbox
