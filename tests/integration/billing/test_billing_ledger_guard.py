"""The ledger's commit-time guard in PostgreSQL itself (migration 1001, its check rewritten by 1003):
whatever the service does, a charge commits only with at least two entries that sum to zero and a first
entry (the debit) equal to the charge's amount."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal

import asyncpg
import pytest

from suanli.billing.adapters.postgres import migrate_billing
from suanli.eventstore import PostgresEventStore

AT = datetime(2026, 1, 5, tzinfo=UTC)
PERIOD = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def store(pg_dsn: str) -> AsyncIterator[PostgresEventStore]:
    store = await PostgresEventStore.connect(pg_dsn, schema=f"bilg_{secrets.token_hex(4)}", max_size=2)
    try:
        await migrate_billing(store)
        yield store
    finally:
        await store.close()


async def charge(store: PostgresEventStore, amount: str, entries: list[str], *, older: int = 0) -> uuid.UUID:
    """Insert one charge and its entries in one transaction (``older`` unrelated balanced charges first,
    so the ledger is not trivially small); the deferred guard runs at its commit."""
    s = store.schema
    charge_id = uuid.uuid4()
    async with store.pool.acquire() as conn, conn.transaction():
        for _ in range(older):
            other = uuid.uuid4()
            await _charge_row(conn, s, other, Decimal("1"))
            await _entries(conn, s, other, [Decimal("1"), Decimal("-1")])
        await _charge_row(conn, s, charge_id, Decimal(amount))
        await _entries(conn, s, charge_id, [Decimal(a) for a in entries])
    return charge_id


async def _charge_row(conn: asyncpg.Connection, s: str, charge_id: uuid.UUID, amount: Decimal) -> None:
    await conn.execute(
        f"INSERT INTO {s}.charges (charge_id, tenant, job_id, task_id, device_class, region, tier,"
        " preemptible, window_start, window_end, cu_seconds, unit_price, amount, currency,"
        " usage_period_start, billing_period_start, billing_period_end, recorded_at)"
        " VALUES ($1, 'acme', 'job-1', 't-0', 'h200', 'cn-east', 'standard', false, $2, $2, 1, 1, $3,"
        " 'CNY', $4, $4, $4, $2)",
        charge_id,
        AT,
        amount,
        PERIOD,
    )


async def _entries(conn: asyncpg.Connection, s: str, charge_id: uuid.UUID, amounts: list[Decimal]) -> None:
    for i, amount in enumerate(amounts):
        await conn.execute(
            f"INSERT INTO {s}.ledger_entries (charge_id, account, amount, currency, recorded_at)"
            " VALUES ($1, $2, $3, 'CNY', $4)",
            charge_id,
            "tenant:acme:receivable" if i == 0 else f"revenue:{i}",
            amount,
            AT,
        )


async def entry_count(store: PostgresEventStore) -> int:
    return int(await store.pool.fetchval(f"SELECT count(*) FROM {store.schema}.ledger_entries"))


async def test_a_balanced_charge_commits(store: PostgresEventStore) -> None:
    charge_id = await charge(store, "7.5", ["7.5", "-6", "-1.5"], older=50)
    rows = await store.pool.fetch(
        f"SELECT amount FROM {store.schema}.ledger_entries WHERE charge_id = $1 ORDER BY entry_id", charge_id
    )
    assert [r["amount"] for r in rows] == [Decimal("7.5"), Decimal("-6"), Decimal("-1.5")]


@pytest.mark.parametrize(
    ("amount", "entries"),
    [
        ("7.5", ["7.5", "-6"]),  # entries do not sum to zero
        ("7.5", ["7.5"]),  # a single entry
        ("7.5", ["6", "-6"]),  # balanced, but the debit is not the charge's amount
        ("7.5", ["-7.5", "7.5"]),  # the first entry is the credit
    ],
)
async def test_an_unbalanced_charge_is_refused_at_commit(
    store: PostgresEventStore, amount: str, entries: list[str]
) -> None:
    await charge(store, "1", ["1", "-1"], older=20)
    before = await entry_count(store)
    with pytest.raises(asyncpg.IntegrityConstraintViolationError, match="do not balance"):
        await charge(store, amount, entries, older=3)
    assert await entry_count(store) == before  # nothing of the refused transaction stays
