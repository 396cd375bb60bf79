"""PostgreSQL adapter of EventStore and TrackingStore over an asyncpg pool.

Every append takes `LOCK TABLE events IN EXCLUSIVE MODE` for the rest of its transaction. That serialises
writers (plain reads still run), which buys three things at once: the version check and the insert cannot
interleave with another append; event positions and outbox ids are assigned in commit order, so a reader
following `read_all` or the relay following outbox ids never skips a row committed late; and duplicate ids
are found by a query rather than by a failed insert that would poison the caller's transaction.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Self

import asyncpg

from suanli.clock import Clock, SystemClock
from suanli.eventstore.errors import AlreadyProcessed, ConcurrencyConflict, DuplicateEventId
from suanli.eventstore.migrator import check_schema, migrate
from suanli.eventstore.validation import check_batch
from suanli.eventstore.values import (
    ClaimedRecord,
    NewEvent,
    OutboxMessage,
    OutboxRecord,
    ParkedRow,
    StoredEvent,
    StreamAppend,
)
from suanli.telemetry.tracing import current_traceparent

DEFAULT_SCHEMA = "eventstore"
# Longest a statement may take: commits are small; migrations and rebuild reads are paged well below it.
COMMAND_TIMEOUT_S = 30.0
# Session settings of every connection the store opens. These tables start empty and grow by thousands of
# rows a minute. A generic plan PostgreSQL caches for a prepared statement while a table is one page (a
# sequential scan) is kept until autovacuum next analyses the table, a minute or more later, and meanwhile
# every execution scans the whole table: 3-6 ms per append check on the scheduler's single writer 40 s into
# bench/latency.py, growing with the table. Planning each execution with its parameters costs a fraction of
# that and finds the index at any size.
SESSION_SETTINGS = {"plan_cache_mode": "force_custom_plan"}

_EVENT_COLUMNS = "stream, version, position, event_id, event_name, payload, recorded_at, metadata"
OUTBOX_COLUMNS = (
    "id, topic, key, event_name, value, header_names, header_values, created_at, attempts, traceparent"
)
_PARKED_COLUMNS = (
    "id, topic, key, event_name, octet_length(value) AS size, attempts, last_error, created_at, parked_at"
)


def _stored_event(row: asyncpg.Record) -> StoredEvent:
    return StoredEvent(
        stream=row["stream"],
        version=row["version"],
        position=row["position"],
        event_id=row["event_id"],
        event_name=row["event_name"],
        payload=bytes(row["payload"]),
        recorded_at=row["recorded_at"],
        metadata=json.loads(row["metadata"]),
    )


def outbox_record(row: asyncpg.Record) -> OutboxRecord:
    """An outbox row as the relay publishes it."""
    key = row["key"]
    return OutboxRecord(
        id=row["id"],
        topic=row["topic"],
        key=None if key is None else bytes(key),
        event_name=row["event_name"],
        value=bytes(row["value"]),
        headers=tuple(zip(row["header_names"], map(bytes, row["header_values"]), strict=True)),
        created_at=row["created_at"],
        attempts=row["attempts"],
        traceparent=row["traceparent"],
    )


def parked_row(row: asyncpg.Record) -> ParkedRow:
    """A parked outbox row as operators list it (the value's size, not the value)."""
    key = row["key"]
    return ParkedRow(
        id=row["id"],
        topic=row["topic"],
        key=None if key is None else bytes(key),
        event_name=row["event_name"],
        size=row["size"],
        attempts=row["attempts"],
        reason=row["last_error"] or "",
        created_at=row["created_at"],
        parked_at=row["parked_at"],
    )


class Statements:
    """Statements with the schema spliced in once (the name is validated by check_schema)."""

    def __init__(self, schema: str) -> None:
        s = f'"{check_schema(schema)}"'
        self.lock = f"LOCK TABLE {s}.events IN EXCLUSIVE MODE"
        # BEGIN and the lock as one simple-query message: one round trip where they were two.
        self.begin_locked = f"BEGIN; {self.lock}"
        self.version = f"SELECT coalesce(max(version), 0) FROM {s}.events WHERE stream = $1"
        # The version check and the duplicate check of one batch in one round trip: rows with a stream are
        # current versions (NULL: a new stream), rows with an event id are ids recorded before. Each stream's
        # version is its newest row, one index probe: a max() grouped over `stream = ANY(...)` read every
        # event of the stream, and a tenant's billing stream grows without end.
        self.batch_checks = (
            f"SELECT a.stream, (SELECT e.version FROM {s}.events AS e WHERE e.stream = a.stream"
            " ORDER BY e.version DESC LIMIT 1) AS version, NULL::uuid AS event_id"
            " FROM unnest($1::text[]) AS a(stream)"
            f" UNION ALL SELECT NULL, NULL, event_id FROM {s}.events WHERE event_id = ANY($2::uuid[])"
        )
        self.insert_events = (
            f"INSERT INTO {s}.events (stream, version, event_id, event_name, payload, metadata, recorded_at)"
            " SELECT s, v, i, n, p, m::jsonb, t FROM unnest("
            "$1::text[], $2::bigint[], $3::uuid[], $4::text[], $5::bytea[], $6::text[], $7::timestamptz[]"
            ") WITH ORDINALITY AS e(s, v, i, n, p, m, t, ord) ORDER BY ord"
        )
        self.insert_outbox = (
            f"INSERT INTO {s}.outbox"
            " (topic, key, event_name, value, header_names, header_values, created_at, traceparent)"
            " VALUES ($1, $2, $3, $4, $5::text[], $6::bytea[], $7, $8)"
        )
        select = f"SELECT {_EVENT_COLUMNS} FROM {s}.events"
        self.read = f"{select} WHERE stream = $1 AND version > $2 ORDER BY version"
        self.read_all = f"{select} WHERE position > $1 ORDER BY position LIMIT $2"
        self.pending = (
            f"SELECT {OUTBOX_COLUMNS} FROM {s}.outbox"
            " WHERE published_at IS NULL AND parked_at IS NULL ORDER BY id LIMIT $1"
        )
        self.mark_published = f"UPDATE {s}.outbox SET published_at = $1 WHERE id = ANY($2::bigint[])"
        self.record_failures = (
            f"UPDATE {s}.outbox AS o SET attempts = o.attempts + 1, last_error = f.error,"
            " parked_at = CASE WHEN f.park THEN $4 ELSE o.parked_at END"
            " FROM unnest($1::bigint[], $2::text[], $3::bool[]) AS f(id, error, park) WHERE o.id = f.id"
        )
        self.parked = (
            f"SELECT {_PARKED_COLUMNS} FROM {s}.outbox WHERE parked_at IS NOT NULL ORDER BY id LIMIT $1"
        )
        # Newest first from past (parked_at, id) = ($2, $3) on, the order operators page in.
        self.parked_newest = (
            f"SELECT {_PARKED_COLUMNS} FROM {s}.outbox WHERE parked_at IS NOT NULL"
            " AND ($2::timestamptz IS NULL OR (parked_at, id) < ($2, $3::bigint))"
            " ORDER BY parked_at DESC, id DESC LIMIT $1"
        )
        self.unpark = (
            f"UPDATE {s}.outbox SET parked_at = NULL, attempts = 0"
            " WHERE id = ANY($1::bigint[]) AND parked_at IS NOT NULL RETURNING id"
        )
        # Claims the offset in the effect's transaction. The row lock taken by ON CONFLICT makes a concurrent
        # claim of the same partition wait, then see the committed offset and find nothing to update.
        self.claim = (
            f"INSERT INTO {s}.tracking AS t (group_id, topic, partition, last_offset, updated_at)"
            " VALUES ($1, $2, $3, $4, $5)"
            " ON CONFLICT (group_id, topic, partition) DO UPDATE"
            " SET last_offset = EXCLUDED.last_offset, updated_at = EXCLUDED.updated_at"
            " WHERE t.last_offset < EXCLUDED.last_offset"
            " RETURNING 1"
        )
        self.applied = (
            f"SELECT last_offset FROM {s}.tracking WHERE group_id = $1 AND topic = $2 AND partition = $3"
        )
        self.claim_event = (
            f'INSERT INTO {s}.processed_events (group_id, event_id, topic, partition, "offset", processed_at)'
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING RETURNING 1"
        )
        # Several at once (a group commit's records): the ids inserted, a repeated one only once.
        self.claim_events = (
            f'INSERT INTO {s}.processed_events (group_id, event_id, topic, partition, "offset", processed_at)'
            " SELECT $1, e, t, p, o, $6 FROM unnest($2::text[], $3::text[], $4::int[], $5::bigint[])"
            " WITH ORDINALITY AS r(e, t, p, o, n) ORDER BY n"
            " ON CONFLICT DO NOTHING RETURNING event_id"
        )
        # Pruning, one bounded batch per statement (oldest first, so a batch is found from the index's
        # start): published rows only (pending and parked rows stay), and processed-event records.
        self.prune_published = (
            f"DELETE FROM {s}.outbox WHERE id IN (SELECT id FROM {s}.outbox"
            " WHERE published_at < $1 AND parked_at IS NULL ORDER BY id LIMIT $2)"
        )
        self.prune_processed = (
            f"DELETE FROM {s}.processed_events WHERE ctid IN (SELECT ctid FROM {s}.processed_events"
            " WHERE processed_at < $1 ORDER BY processed_at LIMIT $2)"
        )
        # With event ids the offset row is only "last seen": after a broker restart it moves backwards.
        self.record_offset = (
            f"INSERT INTO {s}.tracking (group_id, topic, partition, last_offset, updated_at)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (group_id, topic, partition) DO UPDATE"
            " SET last_offset = EXCLUDED.last_offset, updated_at = EXCLUDED.updated_at"
        )


class PostgresTransaction:
    """A unit of work on one connection inside an open transaction."""

    def __init__(
        self, conn: asyncpg.Connection, sql: Statements, clock: Clock, *, locked: bool = False
    ) -> None:
        self._conn = conn
        self._sql = sql
        self._clock = clock
        self._locked = locked

    @property
    def connection(self) -> asyncpg.Connection:
        """The asyncpg connection, inside the open transaction."""
        return self._conn

    def now(self) -> datetime:
        """The store's clock (what its rows are stamped with)."""
        return self._clock.now()

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        outbox: Sequence[OutboxMessage] = (),
    ) -> int:
        """Like `Transaction.append`, committed with the transaction."""
        (version,) = await self.append_many([StreamAppend(stream, expected_version, events, outbox)])
        return version

    async def append_many(self, appends: Sequence[StreamAppend]) -> list[int]:
        """Like `Transaction.append_many`: one statement per check and insert, whatever the batch size."""
        check_batch(appends)
        if not appends:
            return []
        conn, sql = self._conn, self._sql
        if not self._locked:
            await conn.execute(sql.lock)
            self._locked = True
        streams = [a.stream for a in appends]
        events = [(a, offset, e) for a in appends for offset, e in enumerate(a.events, start=1)]
        ids = [e.event_id for _, _, e in events]
        rows = await conn.fetch(sql.batch_checks, streams, ids)
        current = {r["stream"]: r["version"] or 0 for r in rows if r["stream"] is not None}
        for a in appends:
            actual = current.get(a.stream, 0)
            if actual != a.expected_version:
                raise ConcurrencyConflict(a.stream, a.expected_version, actual)
        known = [r["event_id"] for r in rows if r["event_id"] is not None]
        if known:
            raise DuplicateEventId(known)
        if events:
            await conn.execute(
                sql.insert_events,
                [a.stream for a, _, _ in events],
                [a.expected_version + offset for a, offset, _ in events],
                ids,
                [e.event_name for _, _, e in events],
                [e.payload for _, _, e in events],
                [json.dumps(dict(e.metadata)) for _, _, e in events],
                [self._clock.now() for _ in events],
            )
        outbox = [m for a in appends for m in a.outbox]
        if outbox:
            # Taken at append time: the relay publishes later, in a task of its own, outside any trace.
            traceparent = current_traceparent()
            await conn.executemany(
                sql.insert_outbox,
                [
                    (
                        m.topic,
                        m.key,
                        m.event_name,
                        m.value,
                        [name for name, _ in m.headers],
                        [value for _, value in m.headers],
                        self._clock.now(),
                        m.traceparent or traceparent,
                    )
                    for m in outbox
                ],
            )
        return [a.expected_version + len(a.events) for a in appends]


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release without asyncpg's reset query (advisory unlock, CLOSE ALL, UNLISTEN, RESET ALL).

    Pool connections carry no session state here (LISTEN and session locks live on dedicated connections,
    and nothing SETs), and that query is one round trip on every release. asyncpg still rolls back a
    transaction left open before calling this.
    """


class PostgresEventStore:
    """EventStore and TrackingStore on PostgreSQL; all tables live in one schema (default "eventstore")."""

    def __init__(
        self, pool: asyncpg.Pool, *, schema: str = DEFAULT_SCHEMA, clock: Clock | None = None
    ) -> None:
        self._pool = pool
        self._schema = check_schema(schema)
        self._sql = Statements(schema)
        self._clock = clock or SystemClock()
        self._owns_pool = False

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        clock: Clock | None = None,
        min_size: int = 1,
        max_size: int = 10,
        command_timeout_s: float = COMMAND_TIMEOUT_S,
    ) -> Self:
        """Open a pool, apply pending migrations, and own the pool (closed by `close()`).

        Every statement gets ``command_timeout_s``: a server that stops answering (a network partition, a
        stopped host) fails the statement with a transient timeout instead of hanging its caller forever.
        """
        pool = await asyncpg.create_pool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            reset=_keep_session,
            command_timeout=command_timeout_s,
            server_settings=SESSION_SETTINGS,
        )
        try:
            async with pool.acquire() as conn:
                await migrate(conn, schema)
        except BaseException:
            await pool.close()
            raise
        store = cls(pool, schema=schema, clock=clock)
        store._owns_pool = True
        return store

    @property
    def schema(self) -> str:
        """The PostgreSQL schema the store's tables live in."""
        return self._schema

    @property
    def pool(self) -> asyncpg.Pool:
        """The connection pool the store runs its statements on."""
        return self._pool

    async def close(self) -> None:
        """Close the pool if the store created it."""
        if self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- EventStore --------------------------------------------------------------------------------

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        outbox: Sequence[OutboxMessage] = (),
    ) -> int:
        """Like `EventStore.append`, in a transaction of its own."""
        async with self.transaction() as tx:
            return await tx.append(stream, expected_version, events, outbox=outbox)

    async def read(self, stream: str, after_version: int = 0) -> list[StoredEvent]:
        """Like `EventStore.read`: the events of ``stream`` after ``after_version``."""
        rows = await self._pool.fetch(self._sql.read, stream, after_version)
        return [_stored_event(r) for r in rows]

    async def read_all(self, after_position: int = 0, limit: int | None = None) -> list[StoredEvent]:
        """Like `EventStore.read_all`: events of every stream after ``after_position``, in commit order."""
        rows = await self._pool.fetch(self._sql.read_all, after_position, limit)
        return [_stored_event(r) for r in rows]

    async def stream_version(self, stream: str) -> int:
        """Like `EventStore.stream_version`: 0 for a stream without events."""
        return await self._pool.fetchval(self._sql.version, stream)

    @asynccontextmanager
    async def transaction(self, *, appending: bool = False) -> AsyncIterator[PostgresTransaction]:
        """Like `EventStore.transaction`; with ``appending`` the append lock is taken as it begins."""
        if not appending:
            async with self._pool.acquire() as conn, conn.transaction():
                yield PostgresTransaction(conn, self._sql, self._clock)
            return
        async with self._pool.acquire() as conn:
            await conn.execute(self._sql.begin_locked)
            try:
                yield PostgresTransaction(conn, self._sql, self._clock, locked=True)
            except BaseException:
                # A connection broken mid-query cannot roll back; the pool then discards it on release.
                with contextlib.suppress(Exception):
                    await conn.execute("ROLLBACK")
                raise
            await conn.execute("COMMIT")

    async def pending_outbox(self, limit: int = 500) -> list[OutboxRecord]:
        """Like `EventStore.pending_outbox`: unpublished rows, oldest first."""
        rows = await self._pool.fetch(self._sql.pending, limit)
        return [outbox_record(r) for r in rows]

    async def parked_outbox(self, limit: int = 100) -> list[ParkedRow]:
        """Like `EventStore.parked_outbox`: parked rows, oldest first."""
        async with self._pool.acquire() as conn:
            return await parked_outbox_rows(conn, self._schema, limit)

    async def unpark_outbox(self, ids: Sequence[int]) -> list[int]:
        """Like `EventStore.unpark_outbox`: back in line, attempts reset."""
        async with self._pool.acquire() as conn:
            return await unpark_outbox_rows(conn, self._schema, ids)

    # -- TrackingStore -----------------------------------------------------------------------------

    async def applied(self, group: str, topic: str, partition: int, offset: int) -> bool:
        """Like `TrackingStore.applied`: whether ``offset`` was applied for the group and partition."""
        last = await self._pool.fetchval(self._sql.applied, group, topic, partition)
        return last is not None and offset <= last

    @asynccontextmanager
    async def tracking_transaction(
        self, group: str, topic: str, partition: int, offset: int, *, event_id: str | None = None
    ) -> AsyncIterator[PostgresTransaction]:
        """Like `TrackingStore.tracking_transaction`: the claim and the effect commit together."""
        async with self._pool.acquire() as conn, conn.transaction():
            now = self._clock.now()
            if event_id is None:
                claimed = await conn.fetchval(self._sql.claim, group, topic, partition, offset, now)
            else:
                claimed = await conn.fetchval(
                    self._sql.claim_event, group, str(event_id), topic, partition, offset, now
                )
                await conn.execute(self._sql.record_offset, group, topic, partition, offset, now)
            if claimed is None:
                raise AlreadyProcessed(group, topic, partition, offset)
            yield PostgresTransaction(conn, self._sql, self._clock)

    @asynccontextmanager
    async def tracking_batch(self, group: str) -> AsyncIterator[PostgresTrackingBatch]:
        """Like `BatchTrackingStore.tracking_batch`: one transaction, one BEGIN and COMMIT for them all."""
        async with self._pool.acquire() as conn, conn.transaction():
            batch = PostgresTrackingBatch(group, PostgresTransaction(conn, self._sql, self._clock), self._sql)
            yield batch
            await batch.record_offsets(self._clock.now())

    async def prune_processed(self, older_than: timedelta, limit: int) -> int:
        """Like `ProcessedPruning.prune_processed`: one bounded DELETE in a transaction of its own."""
        status = await self._pool.execute(self._sql.prune_processed, self._clock.now() - older_than, limit)
        return deleted_rows(status)


class PostgresTrackingBatch:
    """`TrackingBatch` on one open transaction: a claim per record, the offsets once per partition."""

    def __init__(self, group: str, tx: PostgresTransaction, sql: Statements) -> None:
        self._group = group
        self._tx = tx
        self._sql = sql
        self._offsets: dict[tuple[str, int], int] = {}

    @property
    def transaction(self) -> PostgresTransaction:
        """Like `TrackingBatch.transaction`."""
        return self._tx

    async def claim(self, topic: str, partition: int, offset: int, *, event_id: str | None = None) -> bool:
        """Like `TrackingBatch.claim`."""
        conn, now = self._tx.connection, self._tx.now()
        if event_id is None:
            claimed = await conn.fetchval(self._sql.claim, self._group, topic, partition, offset, now)
        else:
            claimed = await conn.fetchval(
                self._sql.claim_event, self._group, str(event_id), topic, partition, offset, now
            )
            key = (topic, partition)
            self._offsets[key] = max(offset, self._offsets.get(key, offset))
        return claimed is not None

    async def claim_many(self, records: Sequence[ClaimedRecord]) -> list[bool]:
        """Like `TrackingBatch.claim_many`: the records with event ids in one statement."""
        by_id = [r for r in records if r.event_id is not None]
        claimed_ids: set[str] = set()
        if by_id:
            conn, now = self._tx.connection, self._tx.now()
            rows = await conn.fetch(
                self._sql.claim_events,
                self._group,
                [str(r.event_id) for r in by_id],
                [r.topic for r in by_id],
                [r.partition for r in by_id],
                [r.offset for r in by_id],
                now,
            )
            claimed_ids = {r["event_id"] for r in rows}
            for r in by_id:
                key = (r.topic, r.partition)
                self._offsets[key] = max(r.offset, self._offsets.get(key, r.offset))
        answers: list[bool] = []
        for r in records:
            if r.event_id is None:
                answers.append(await self.claim(r.topic, r.partition, r.offset))
            else:
                # An id twice in `records` was inserted once: the first occurrence holds the claim.
                answers.append(str(r.event_id) in claimed_ids)
                claimed_ids.discard(str(r.event_id))
        return answers

    async def record_offsets(self, now: datetime) -> None:
        """The highest offset of each partition claimed by event id (by offset, the claim recorded it)."""
        if self._offsets:
            rows = [(self._group, t, p, o, now) for (t, p), o in self._offsets.items()]
            await self._tx.connection.executemany(self._sql.record_offset, rows)


def deleted_rows(status: str) -> int:
    """The row count of a ``DELETE n`` command status."""
    return int(status.rsplit(" ", 1)[-1])


# For operators' tools (``suanli outbox``), which look at a service's schema without opening its store
# (opening one migrates it).


async def outbox_parking_ready(conn: asyncpg.Connection, schema: str) -> bool:
    """Whether ``schema`` has an outbox with the parking columns (migration 0005 applied)."""
    found = await conn.fetchval(
        "SELECT 1 FROM information_schema.columns"
        " WHERE table_schema = $1 AND table_name = 'outbox' AND column_name = 'parked_at'",
        check_schema(schema),
    )
    return found is not None


async def parked_outbox_rows(conn: asyncpg.Connection, schema: str, limit: int = 100) -> list[ParkedRow]:
    """The parked rows of ``schema``'s outbox, oldest first."""
    return [parked_row(r) for r in await conn.fetch(Statements(schema).parked, limit)]


async def newest_parked_outbox_rows(
    conn: asyncpg.Connection,
    schema: str,
    limit: int | None = None,
    before: tuple[datetime, int] | None = None,
) -> list[ParkedRow]:
    """The parked rows of ``schema``'s outbox, newest parked first (then by id, descending).

    From the first past ``before`` (a row's ``(parked_at, id)``) on, at most ``limit`` (None: all).
    """
    at, row_id = before if before is not None else (None, None)
    return [parked_row(r) for r in await conn.fetch(Statements(schema).parked_newest, limit, at, row_id)]


async def unpark_outbox_rows(conn: asyncpg.Connection, schema: str, ids: Sequence[int]) -> list[int]:
    """Put parked rows ``ids`` of ``schema``'s outbox back in line; the ids that were parked."""
    rows = await conn.fetch(Statements(schema).unpark, list(ids))
    return sorted(r["id"] for r in rows)
