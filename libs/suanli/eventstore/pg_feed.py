"""The relay's view of a PostgreSQL outbox: one dedicated connection holding the ``outbox-relay`` lease.

Why one holder and not `FOR UPDATE SKIP LOCKED`: with SKIP LOCKED, two relays would split the pending
rows between them and publish concurrently, so a later row of a key could reach Kafka before an earlier
one held by the other relay. One relay reading rows in id order keeps per-key order. The hold is a lease
with an epoch (`suanli.eventstore.lease`), not a session lock alone, so a relay that is paused with its
session open (SIGSTOP, a stalled VM) is replaced after one lease, as a crashed one is within a poll. The
lease is renewed before every batch is read, and every mark is fenced by the epoch in its transaction:
a relay resumed after its lease was taken marks nothing (and stops at its next batch). Rows are marked
only after Kafka acknowledged them (at-least-once): the one batch a paused relay may still publish after
resuming is delivered twice at worst, and consumers de-duplicate by event id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta

import asyncpg

from suanli.clock import Clock, SystemClock
from suanli.eventstore.lease import PgLease
from suanli.eventstore.migrator import check_schema
from suanli.eventstore.postgres import (
    DEFAULT_SCHEMA,
    SESSION_SETTINGS,
    Statements,
    deleted_rows,
    outbox_record,
)
from suanli.eventstore.values import OutboxRecord, RowFailure

log = logging.getLogger(__name__)

RELAY_LEASE = "outbox-relay"


def notify_channel(schema: str) -> str:
    """The channel the outbox trigger notifies (see migrations/0002_outbox.sql)."""
    return f"suanli_outbox:{schema}"


class PostgresOutboxLease:
    """The relay's hold on a PostgreSQL outbox: the ``outbox-relay`` lease of ``epoch``, on its connection."""

    def __init__(
        self, conn: asyncpg.Connection, sql: Statements, clock: Clock, lease: PgLease, epoch: int
    ) -> None:
        self._conn = conn
        self._sql = sql
        self._clock = clock
        self._lease = lease
        self.epoch = epoch
        self._notified = asyncio.Event()

    def _on_notify(self, *_: object) -> None:
        self._notified.set()

    async def pending(self, limit: int) -> list[OutboxRecord]:
        """Like `OutboxLease.pending`: the oldest unpublished rows."""
        await self._lease.renew(self._conn, self.epoch)  # LeaseLost: another relay holds the outbox now
        # Cleared before the query: a commit landing after it re-arms the event, so no wake-up is lost.
        self._notified.clear()
        rows = await self._conn.fetch(self._sql.pending, limit)
        return [outbox_record(r) for r in rows]

    async def mark_published(self, ids: Sequence[int]) -> None:
        """Record ``ids`` as published, stamped with the clock's time (fenced by the lease's epoch)."""
        async with self._conn.transaction():
            await self._lease.check(self._conn, self.epoch)
            await self._conn.execute(self._sql.mark_published, self._clock.now(), list(ids))

    async def record_failures(self, failures: Sequence[RowFailure]) -> None:
        """Like `OutboxLease.record_failures`: one statement for the batch's failures (fenced)."""
        async with self._conn.transaction():
            await self._lease.check(self._conn, self.epoch)
            await self._conn.execute(
                self._sql.record_failures,
                [f.id for f in failures],
                [f.error for f in failures],
                [f.park for f in failures],
                self._clock.now(),
            )

    async def prune_published(self, older_than: timedelta, limit: int) -> int:
        """Like `OutboxLease.prune_published`: one bounded DELETE, fenced by the lease's epoch."""
        async with self._conn.transaction():
            await self._lease.check(self._conn, self.epoch)
            before = self._clock.now() - older_than
            status = await self._conn.execute(self._sql.prune_published, before, limit)
        return deleted_rows(status)

    async def wait_for_new(self, timeout: float) -> None:
        """Like `OutboxLease.wait_for_new`: woken by the outbox's NOTIFY, or after ``timeout`` seconds.

        Never longer than a third of the lease, so an idle relay renews it in time (``pending``).
        """
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._notified.wait(), min(timeout, self._lease.lease_s / 3))


class PostgresOutboxFeed:
    """The `OutboxFeed` of a PostgreSQL event store: one relay across every process holds the lease."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock | None = None,
        standby_poll: float = 1.0,
        lease_s: float = 10.0,
    ) -> None:
        self._dsn = dsn
        self._schema = check_schema(schema)
        self._sql = Statements(schema)
        self._clock = clock or SystemClock()
        self._lease = PgLease(schema, RELAY_LEASE, lease_s=lease_s, poll_s=standby_poll)

    async def _acquire(self, conn: asyncpg.Connection) -> int:
        try:
            return await self._lease.acquire(conn)
        except asyncpg.UndefinedTableError:
            # Fail (the relay retries with backoff and logs it) rather than wait silently.
            raise LookupError(
                f"schema {self._schema!r} has no leases table: run the event store migrations"
            ) from None

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[PostgresOutboxLease]:
        """Wait for the relay lease on a connection of its own, then hold it while the block runs."""
        conn = await asyncpg.connect(self._dsn, server_settings=SESSION_SETTINGS)
        try:
            # Polling (rather than blocking on a lock) keeps a standby cancellable and lets it notice
            # a dead connection.
            epoch = await self._acquire(conn)
            lease = PostgresOutboxLease(conn, self._sql, self._clock, self._lease, epoch)
            await conn.add_listener(notify_channel(self._schema), lease._on_notify)
            log.info("outbox relay lease taken on schema %s (epoch %d)", self._schema, epoch)
            yield lease
        finally:
            # Closing the session frees the lease for the next relay at once (its pid is gone);
            # terminate if a graceful close stalls.
            try:
                await asyncio.wait_for(conn.close(), 5)
            except (TimeoutError, OSError, asyncpg.PostgresError):
                conn.terminate()
