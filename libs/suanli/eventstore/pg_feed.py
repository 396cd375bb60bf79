"""The relay's view of a PostgreSQL outbox: one dedicated connection holding a session advisory lock.

Why an advisory lock and not `FOR UPDATE SKIP LOCKED`: with SKIP LOCKED, two relays would split the
pending rows between them and publish concurrently, so a later row of a key could reach Kafka before an
earlier one held by the other relay. One leader reading rows in id order keeps per-key order. The lock is
a session lock on the same connection that reads and marks rows, so a relay that loses its connection
loses the lock and the ability to mark at the same moment; the standby that takes over resumes from the
oldest unpublished row (rows are marked only after Kafka acknowledged them: at-least-once).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import asyncpg

from suanli.clock import Clock, SystemClock
from suanli.eventstore.migrator import check_schema
from suanli.eventstore.postgres import DEFAULT_SCHEMA, Statements, outbox_record
from suanli.eventstore.values import OutboxRecord, RowFailure

log = logging.getLogger(__name__)

# High 32 bits of the advisory lock key; the low 32 are the schema's OID, unique within the database.
RELAY_LOCK_CLASS = 0x5355414E  # "SUAN"
_TRY_LOCK = (
    "SELECT pg_try_advisory_lock(($1::bigint << 32) | oid::bigint) FROM pg_namespace WHERE nspname = $2"
)


def notify_channel(schema: str) -> str:
    """The channel the outbox trigger notifies (see migrations/0002_outbox.sql)."""
    return f"suanli_outbox:{schema}"


class PostgresOutboxLease:
    """The relay's hold on a PostgreSQL outbox: a session advisory lock on a dedicated connection."""

    def __init__(self, conn: asyncpg.Connection, sql: Statements, clock: Clock) -> None:
        self._conn = conn
        self._sql = sql
        self._clock = clock
        self._notified = asyncio.Event()

    def _on_notify(self, *_: object) -> None:
        self._notified.set()

    async def pending(self, limit: int) -> list[OutboxRecord]:
        """Like `OutboxLease.pending`: the oldest unpublished rows."""
        # Cleared before the query: a commit landing after it re-arms the event, so no wake-up is lost.
        self._notified.clear()
        rows = await self._conn.fetch(self._sql.pending, limit)
        return [outbox_record(r) for r in rows]

    async def mark_published(self, ids: Sequence[int]) -> None:
        """Record ``ids`` as published, stamped with the clock's time."""
        await self._conn.execute(self._sql.mark_published, self._clock.now(), list(ids))

    async def record_failures(self, failures: Sequence[RowFailure]) -> None:
        """Like `OutboxLease.record_failures`: one statement for the batch's failures."""
        await self._conn.execute(
            self._sql.record_failures,
            [f.id for f in failures],
            [f.error for f in failures],
            [f.park for f in failures],
            self._clock.now(),
        )

    async def wait_for_new(self, timeout: float) -> None:
        """Like `OutboxLease.wait_for_new`: woken by the outbox's NOTIFY, or after ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._notified.wait(), timeout)


class PostgresOutboxFeed:
    """The `OutboxFeed` of a PostgreSQL event store: one relay across every process holds the lease."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock | None = None,
        standby_poll: float = 1.0,
    ) -> None:
        self._dsn = dsn
        self._schema = check_schema(schema)
        self._sql = Statements(schema)
        self._clock = clock or SystemClock()
        self._standby_poll = standby_poll

    async def _try_lock(self, conn: asyncpg.Connection) -> bool:
        taken = await conn.fetchval(_TRY_LOCK, RELAY_LOCK_CLASS, self._schema)
        if taken is None:
            # No such schema: fail (the relay retries with backoff and logs it) rather than wait silently.
            raise LookupError(f"schema {self._schema!r} does not exist: run the event store migrations")
        return bool(taken)

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[PostgresOutboxLease]:
        """Wait for the advisory lock on a connection of its own, then hold it while the block runs."""
        conn = await asyncpg.connect(self._dsn)
        try:
            # Polling pg_try_advisory_lock rather than blocking in pg_advisory_lock keeps a standby
            # cancellable and lets it notice a dead connection.
            while not await self._try_lock(conn):
                await asyncio.sleep(self._standby_poll)
            lease = PostgresOutboxLease(conn, self._sql, self._clock)
            await conn.add_listener(notify_channel(self._schema), lease._on_notify)
            log.info("outbox relay lease taken on schema %s", self._schema)
            yield lease
        finally:
            # Closing the session releases the advisory lock; terminate if a graceful close stalls.
            try:
                await asyncio.wait_for(conn.close(), 5)
            except (TimeoutError, OSError, asyncpg.PostgresError):
                conn.terminate()
