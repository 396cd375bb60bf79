"""The store's statements keep using their indexes as a young table grows (docs/operations.md, Notes).

PostgreSQL caches a generic plan for a prepared statement after a few executions. Cached while `events`
was one page, that plan is a sequential scan, and it stayed until autovacuum next analysed the table: on
a fresh platform every append check read the whole table. The store plans each execution with its
parameters instead; these tests read PostgreSQL's own scan counters.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from suanli.eventstore import NewEvent, PostgresEventStore, StreamAppend

GROWN_TO = 20_000  # events: past any size where a sequential scan could be the cheaper plan


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[PostgresEventStore]:
    # One connection, so every statement runs where the earlier ones left their cached plans.
    store = await PostgresEventStore.connect(pg_dsn, schema=f"esp_{secrets.token_hex(4)}", max_size=1)
    try:
        yield store
    finally:
        await store.close()


def event() -> NewEvent:
    return NewEvent(event_id=uuid.uuid4(), event_name="Noted", payload=b"{}")


async def append(store: PostgresEventStore, stream: str, expected: int) -> None:
    async with store.transaction(appending=True) as tx:
        await tx.append_many([StreamAppend(stream, expected, (event(),))])


async def scans(store: PostgresEventStore, observer: asyncpg.Connection) -> tuple[int, int]:
    """(sequential, index) scans of the store's events table so far, the store's session's flushed first
    (a backend publishes its counters when it goes idle, at most once a second unless asked)."""
    async with store.pool.acquire() as conn:
        await conn.execute("SELECT pg_stat_force_next_flush()")
        await conn.execute("SELECT 1")
    await observer.execute("SELECT pg_stat_clear_snapshot()")
    row = await observer.fetchrow(
        "SELECT seq_scan, coalesce(idx_scan, 0) AS idx_scan FROM pg_stat_user_tables"
        " WHERE schemaname = $1 AND relname = 'events'",
        store.schema,
    )
    assert row is not None
    return row["seq_scan"], row["idx_scan"]


async def test_the_append_check_probes_the_index_after_the_table_grew(
    store: PostgresEventStore, pg_dsn: str
) -> None:
    for n in range(10):  # a young table: enough executions for PostgreSQL to settle on a cached plan
        await append(store, f"young-{n}", 0)
    async with store.pool.acquire() as conn:
        await conn.execute(
            f"INSERT INTO {store.schema}.events (stream, version, event_id, event_name, payload, recorded_at)"
            " SELECT 'grown-' || n, 1, gen_random_uuid(), 'Noted', '\\x7b7d'::bytea, now()"
            " FROM generate_series(1, $1) AS n",
            GROWN_TO,
        )
    observer = await asyncpg.connect(pg_dsn)
    try:
        seq_before, idx_before = await scans(store, observer)
        await append(store, "young-3", 1)
        await append(store, "new-stream", 0)
        seq_after, idx_after = await scans(store, observer)
    finally:
        await observer.close()
    assert seq_after == seq_before, "an append check scanned the whole events table"
    assert idx_after > idx_before


async def test_the_pool_plans_each_execution_with_its_parameters(store: PostgresEventStore) -> None:
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
