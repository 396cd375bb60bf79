"""Billing's events leave through the event store: appended to the tenant's stream with their outbox rows.

Shared by both adapters, so an in-memory unit of work announces exactly what a PostgreSQL one does.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from suanli.contracts import encode
from suanli.eventstore import NewEvent, OutboxMessage, StreamAppend, Transaction

STREAM_PREFIX = "billing-"

Announcement = tuple[str, dict[str, Any]]  # (event name, record)
# The current versions of several streams at once (0 for a stream with no event yet).
VersionsOf = Callable[[list[str]], Awaitable[dict[str, int]]]


class Announcer:
    """Appends to `billing-<tenant>` streams inside one transaction of the event store.

    Safe without a retry loop: every unit of work holds billing's writer lock, and billing is the only
    writer of these streams. A stream's version is read once per unit, then followed locally, so several
    announcements to one tenant in a unit chain their versions.
    """

    def __init__(self, tx: Transaction, topic: str, versions_of: VersionsOf) -> None:
        self._tx = tx
        self._topic = topic
        self._versions_of = versions_of
        self._versions: dict[str, int] = {}

    async def announce(
        self, tenant: str, events: list[Announcement], traces: Sequence[str | None] | None = None
    ) -> None:
        """``traces``: each event's traceparent, in order (None: the span active now, as without it)."""
        await self.announce_many({tenant: events}, None if traces is None else {tenant: traces})

    async def announce_many(
        self,
        events: Mapping[str, list[Announcement]],
        traces: Mapping[str, Sequence[str | None]] | None = None,
    ) -> None:
        """Several tenants' events, in one append whatever their number (``traces`` by tenant, as for
        `announce`)."""
        unknown = [STREAM_PREFIX + t for t in events if STREAM_PREFIX + t not in self._versions]
        if unknown:
            self._versions.update(await self._versions_of(unknown))
        appends = []
        for tenant, announced in events.items():
            new = [NewEvent(uuid.UUID(r["event_id"]), name, encode(name, r), {}) for name, r in announced]
            traced = traces.get(tenant) if traces is not None else None
            outbox = [
                OutboxMessage.for_event(self._topic, tenant.encode(), e, traceparent=t)
                for e, t in zip(new, traced if traced is not None else [None] * len(new), strict=True)
            ]
            stream = STREAM_PREFIX + tenant
            appends.append(StreamAppend(stream, self._versions[stream], new, outbox))
        for append, version in zip(appends, await self._tx.append_many(appends), strict=True):
            self._versions[append.stream] = version
