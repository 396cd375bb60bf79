"""One contract suite per billing port, each test run against the in-memory and the PostgreSQL adapters.

Isolation: each PostgreSQL-backed test gets its own schema (`bilc_<random>`), migrated like the
service's, so tests can assert on whole tables and on the event store's outbox.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest
from billing_contract_kit import BILLING_TOPIC, CALENDAR, JAN, Adapter

from suanli.billing.adapters.memory import InMemoryBillingQueries, InMemoryUnitOfWork
from suanli.billing.adapters.postgres import PostgresBillingQueries, PostgresUnitOfWork, migrate_billing
from suanli.clock import SteppingClock
from suanli.eventstore import InMemoryEventStore, PostgresEventStore


@pytest.fixture(params=["memory", "postgres"])
async def adapter(request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[Adapter]:
    clock = SteppingClock(JAN)
    if request.param == "memory":
        memory = InMemoryEventStore(clock=clock)
        uow = InMemoryUnitOfWork(memory, BILLING_TOPIC, clock)
        yield Adapter("memory", uow, InMemoryBillingQueries(uow), memory)
        return
    store = await PostgresEventStore.connect(
        pg_dsn, schema=f"bilc_{secrets.token_hex(4)}", clock=clock, max_size=4
    )
    try:
        await migrate_billing(store)
        uow_pg = PostgresUnitOfWork(store, CALENDAR, BILLING_TOPIC, clock)
        yield Adapter("postgres", uow_pg, PostgresBillingQueries(store.pool, store.schema, CALENDAR), store)
    finally:
        await store.close()
