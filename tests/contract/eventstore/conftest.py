"""One contract suite, two adapters: every test here runs against the in-memory and the PostgreSQL store.

Isolation: each PostgreSQL-backed test gets its own schema (`es_<random>`) in the session database, so
tests can assert on whole tables (read_all, pending_outbox) without seeing each other's rows.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from contract_adapters import Adapter

from suanli.clock import SteppingClock
from suanli.eventstore import InMemoryEventStore, PostgresEventStore, PostgresOutboxFeed

CLOCK_START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["memory", "postgres"])
async def adapter(request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[Adapter]:
    clock = SteppingClock(CLOCK_START)
    if request.param == "memory":
        memory = InMemoryEventStore(clock=clock)
        yield Adapter("memory", memory, memory.feed())
        return
    schema = f"es_{secrets.token_hex(4)}"
    store = await PostgresEventStore.connect(pg_dsn, schema=schema, clock=clock, max_size=6)
    try:
        yield Adapter("postgres", store, PostgresOutboxFeed(pg_dsn, schema=schema, standby_poll=0.02))
    finally:
        await store.close()


@pytest.fixture
def clock_start() -> datetime:
    return CLOCK_START


@pytest.fixture
def store(adapter: Adapter) -> InMemoryEventStore | PostgresEventStore:
    return adapter.store
