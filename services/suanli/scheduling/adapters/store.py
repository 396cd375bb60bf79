"""The `Writer` on any `EventStore` (PostgreSQL in service, in memory in unit tests): events, their outbox
rows and pending reasons in one transaction, fenced by the leader lock, and the projection's catch-up
from `read_all`.

Scheduling-context events go to the outbox on the topic and key the contracts catalogue names (TaskPlaced
on `placements` keyed by node, JobSubmitted on `jobs.events` keyed by job, ...). Task facts recorded from
`tasks.lifecycle` keep their original event id (so a redelivery is refused as a duplicate) and are not
published again. Internal events (queue configuration) are JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from suanli.bus.topics import topic_name
from suanli.contracts import encode
from suanli.contracts.catalogue import EVENTS
from suanli.eventstore import EventStore, NewEvent, OutboxMessage, StreamAppend, Transaction
from suanli.scheduling.service_layer.ports import Append, Outgoing
from suanli.scheduling.service_layer.projection import JSON_EVENTS, Projection
from suanli.telemetry.tracing import TRACEPARENT, batch_span

PendingChanges = Mapping[str, Mapping[str, Any] | None]  # job id -> its pending reason, None: it has none


class Fence(Protocol):
    async def check(self, conn: Any) -> None:
        """Raise `NotLeader` unless this instance still holds the leadership (checked inside the
        transaction, on its connection)."""
        ...


class PendingReasons(Protocol):
    """The last pending reason per job, written in the writer's transaction (`adapters.pending`)."""

    async def setup(self) -> None: ...

    async def load(self) -> dict[str, dict[str, Any]]: ...

    async def write(self, tx: Transaction, changes: PendingChanges) -> None: ...


class Unfenced:
    """The fence of a scheduler that is the only writer of its store (unit tests, one in-memory store)."""

    async def check(self, conn: Any) -> None:
        return None


class StoreWriter:
    def __init__(
        self,
        store: EventStore,
        pending: PendingReasons,
        fence: Fence,
        *,
        topic_prefix: str | None = None,
        read_batch: int = 5000,
    ) -> None:
        self._store = store
        self._pending = pending
        self._fence = fence
        self._prefix = topic_prefix
        self._batch = read_batch

    async def setup(self) -> None:
        await self._pending.setup()

    async def load_pending(self, projection: Projection) -> None:
        # The table holds every reason the leader keeps: one it deleted (the job was placed, cancelled)
        # must leave a standby's view too, not linger there until this instance leads.
        loaded = await self._pending.load()
        projection.pending_reasons.clear()
        projection.pending_reasons.update(loaded)

    async def commit(self, appends: Sequence[Append], pending: PendingChanges | None = None) -> None:
        traces = [o.metadata.get(TRACEPARENT) for a in appends for o in a.events]
        with batch_span("scheduling.commit", traces, {"streams": len(appends)}):
            async with self._store.transaction(appending=True) as tx:
                await self._fence.check(tx.connection)
                batch = []
                for append in appends:
                    events, outbox = self._encode(append.events)
                    batch.append(StreamAppend(append.stream, append.expected_version, events, outbox))
                await tx.append_many(batch)
                if pending:
                    await self._pending.write(tx, pending)

    async def catch_up(self, projection: Projection) -> None:
        while True:
            events = await self._store.read_all(projection.position, self._batch)
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
                topic = topic_name(spec.topic, self._prefix)
                trace = o.metadata.get(TRACEPARENT)
                outbox.append(OutboxMessage.for_event(topic, key, event, traceparent=trace))
        return events, outbox
