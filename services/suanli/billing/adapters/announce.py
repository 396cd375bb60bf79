"""Billing's events leave through the event store: appended to the tenant's stream with their outbox rows.

Shared by both adapters, so an in-memory unit of work announces exactly what a PostgreSQL one does.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from suanli.contracts import encode
from suanli.eventstore import NewEvent, OutboxMessage, Transaction

STREAM_PREFIX = "billing-"

Announcement = tuple[str, dict[str, Any]]  # (event name, record)


class Announcer:
    """Appends to `billing-<tenant>` streams inside one transaction of the event store.

    Safe without a retry loop: every unit of work holds billing's writer lock, and billing is the only
    writer of these streams. A stream's version is read once per unit, then followed locally, so several
    announcements to one tenant in a unit chain their versions.
    """

    def __init__(self, tx: Transaction, topic: str, version_of: Callable[[str], Awaitable[int]]) -> None:
        self._tx = tx
        self._topic = topic
        self._version_of = version_of
        self._versions: dict[str, int] = {}

    async def announce(self, tenant: str, events: list[Announcement]) -> None:
        stream = STREAM_PREFIX + tenant
        version = self._versions.get(stream)
        if version is None:
            version = await self._version_of(stream)
        new = [NewEvent(uuid.UUID(r["event_id"]), name, encode(name, r), {}) for name, r in events]
        outbox = [OutboxMessage.for_event(self._topic, tenant.encode(), e) for e in new]
        self._versions[stream] = await self._tx.append(stream, version, new, outbox=outbox)
