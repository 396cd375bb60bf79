"""The consumer's handler against a real PostgreSQL that fails: transient trouble is retried, a broken
statement is not (suanli.infra.transient decides which is which)."""

from __future__ import annotations

import secrets
import uuid
from datetime import timedelta

import asyncpg
import pytest
from billing_testkit import job_submitted
from opentelemetry.context import Context

from suanli.billing.adapters.postgres import PostgresUnitOfWork, migrate_billing
from suanli.billing.domain.periods import Calendar
from suanli.billing.entrypoints.consumer import BillingHandler
from suanli.billing.service_layer.billing import BillingService
from suanli.bus import ConsumedEvent
from suanli.clock import SystemClock
from suanli.eventstore import PostgresEventStore
from suanli.infra.transient import RetriableError
from suanli.resources.pricebook import PriceBook

TOPICS = {"usage.metered": "u", "jobs.events": "j", "capacity.nodes": "c"}
BOOK = PriceBook.model_validate(
    {
        "currency": "CNY",
        "tiers": [{"name": "any"}],
        "versions": [
            {"effective_from": "2025-01-01T00:00:00Z", "rates": [{"device_class": "*", "cu_hour": 1}]}
        ],
    }
)


def submitted(offset: int) -> ConsumedEvent:
    record = job_submitted(f"job-{uuid.uuid4()}", "acme", 10, False)
    return ConsumedEvent("j", 0, offset, None, "JobSubmitted", record, (), Context(), 0)


async def handler(pg_dsn: str, *, migrated: bool) -> tuple[BillingHandler, PostgresEventStore]:
    store = await PostgresEventStore.connect(pg_dsn, schema=f"bilt_{secrets.token_hex(4)}", max_size=2)
    if migrated:
        await migrate_billing(store)
    calendar = Calendar()
    uow = PostgresUnitOfWork(store, calendar, "billing.events", SystemClock())
    return BillingHandler(
        BillingService(BOOK, calendar, timedelta(minutes=15)), uow, "billing", TOPICS
    ), store


async def test_connections_that_are_gone_are_retried(pg_dsn: str) -> None:
    handle, store = await handler(pg_dsn, migrated=True)
    await handle(submitted(0))
    await store.close()  # asyncpg's InterfaceError, as for connections lost under a unit of work
    with pytest.raises(RetriableError, match="database"):
        await handle(submitted(1))


async def test_a_statement_that_cannot_succeed_is_not_retried(pg_dsn: str) -> None:
    handle, store = await handler(pg_dsn, migrated=False)  # billing's tables are missing
    try:
        with pytest.raises(asyncpg.UndefinedTableError):
            await handle(submitted(0))
    finally:
        await store.close()
