"""The relay's lease on a PostgreSQL outbox: a paused relay is replaced and, resumed, marks nothing.

A relay paused with its session open (SIGSTOP) would keep a session lock for ever; the lease runs out
instead. Here the pause is stood in for at the database (the lease row expired unrenewed) and the crash
by closing the holder's session.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from relay_testkit import eventually, fill_outbox, published, unpublished

from suanli.eventstore import PostgresEventStore
from suanli.eventstore.lease import LeaseLost
from suanli.eventstore.pg_feed import RELAY_LEASE, PostgresOutboxFeed

LEASE_S = 3.0


def feed(pg_dsn: str, schema: str) -> PostgresOutboxFeed:
    return PostgresOutboxFeed(pg_dsn, schema=schema, standby_poll=0.05, lease_s=LEASE_S)


async def test_a_relay_whose_lease_was_taken_marks_nothing_and_stops_at_its_next_batch(
    pg_dsn: str, schema: str, pg_store: PostgresEventStore
) -> None:
    await fill_outbox(pg_store, "t", 10, keys=2, chunk=5)
    async with contextlib.AsyncExitStack() as stack:
        first = await stack.enter_async_context(feed(pg_dsn, schema).lease())
        rows = await first.pending(100)
        assert len(rows) == 10
        # Paused with the batch in hand, past its lease: a standby takes the outbox with the next epoch.
        await pg_store.pool.execute(
            f"UPDATE {schema}.leases SET lease_until = clock_timestamp() - interval '1 s' WHERE name = $1",
            RELAY_LEASE,
        )
        second = await asyncio.wait_for(stack.enter_async_context(feed(pg_dsn, schema).lease()), 10)
        assert second.epoch == first.epoch + 1

        with pytest.raises(LeaseLost, match=f"outbox-relay lease of epoch {first.epoch}"):
            await first.mark_published([r.id for r in rows])
        assert await published(pg_store) == 0  # the resumed relay marked nothing
        with pytest.raises(LeaseLost):
            await first.pending(100)
        again = await second.pending(100)
        assert [r.id for r in again] == [r.id for r in rows]  # the new relay resumes from the oldest row
        await second.mark_published([r.id for r in again])
        assert await unpublished(pg_store) == 0


async def test_a_crashed_relays_lease_is_taken_within_a_poll(
    pg_dsn: str, schema: str, pg_store: PostgresEventStore
) -> None:
    await fill_outbox(pg_store, "t", 1, keys=1, chunk=1)
    holder = feed(pg_dsn, schema).lease()
    first = await holder.__aenter__()
    waiting = feed(pg_dsn, schema).lease()  # kept: a dropped context manager closes its connection
    standby = asyncio.create_task(waiting.__aenter__())
    await asyncio.sleep(0.3)
    assert not standby.done()  # a live holder keeps the outbox
    loop = asyncio.get_running_loop()
    await holder.__aexit__(None, None, None)  # its session ends with plenty of lease left
    ended = loop.time()

    async def taken() -> bool:
        return standby.done()

    await eventually(taken, "the standby relay taking the lease", timeout_s=10)
    assert loop.time() - ended < LEASE_S
    second = standby.result()
    try:
        assert second.epoch == first.epoch + 1
        assert len(await second.pending(10)) == 1
    finally:
        await waiting.__aexit__(None, None, None)
