"""One contract suite, two adapters: the scheduler's writer on the in-memory store (what the unit tests
use) and on PostgreSQL (what the service uses) must behave alike. Each PostgreSQL test has its own
schema."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from writer_adapters import Fenced, WriterUnderTest

from suanli.clock import SteppingClock
from suanli.eventstore import InMemoryEventStore, PostgresEventStore
from suanli.scheduling.adapters.pending import InMemoryPendingReasons, PostgresPendingReasons
from suanli.scheduling.adapters.store import StoreWriter

CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(params=["memory", "postgres"])
async def subject(request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[WriterUnderTest]:
    clock, fence = SteppingClock(CLOCK_START), Fenced()
    if request.param == "memory":
        memory = InMemoryEventStore(clock=clock)
        yield WriterUnderTest(
            StoreWriter(memory, InMemoryPendingReasons(), fence, topic_prefix="t"), memory, fence
        )
        return
    store = await PostgresEventStore.connect(
        pg_dsn, schema=f"sw_{secrets.token_hex(4)}", clock=clock, max_size=4
    )
    try:
        writer = StoreWriter(
            store, PostgresPendingReasons(store.pool, store.schema), fence, topic_prefix="t", read_batch=2
        )
        await writer.setup()
        yield WriterUnderTest(writer, store, fence)
    finally:
        await store.close()
