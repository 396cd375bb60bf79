"""PostgreSQL: billing's tables next to its event store, the ports of a unit of work, and the read side.

Every unit of work takes one transaction-level advisory lock per schema before it reads anything, so
writers (consumer instances, the period closer, admin calls) are serialised: "is this period invoiced?"
and "record the charge" cannot interleave with issuing that invoice.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg

from suanli.billing.adapters import records
from suanli.billing.adapters.announce import Announcer
from suanli.billing.domain.invoices import ON_SCHEDULE, ChargeTotal, Closing, Invoice, InvoiceLine
from suanli.billing.domain.ledger import BilledCharge, entries_for
from suanli.billing.domain.periods import Calendar, Period
from suanli.billing.domain.rating import Charge
from suanli.billing.domain.usage import JobTerms, Usage
from suanli.billing.service_layer.ports import ChargePage, LedgerConflict, LedgerUnit, TrackedBatch, UsageRow
from suanli.clock import Clock
from suanli.eventstore import PostgresEventStore
from suanli.eventstore.migrator import Migration, migrate
from suanli.eventstore.postgres import PostgresTransaction

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def load_migrations() -> list[Migration]:
    return [Migration(p.stem, p.read_text(encoding="utf-8")) for p in sorted(MIGRATIONS_DIR.glob("*.sql"))]


async def migrate_billing(store: PostgresEventStore) -> list[str]:
    """Apply billing's migrations to the event store's schema (its own files: 0001.. are the store's)."""
    async with store.pool.acquire() as conn:
        return await migrate(conn, store.schema, migrations=load_migrations())


async def last_billed_period(store: PostgresEventStore) -> tuple[datetime, datetime] | None:
    """Start and end of the billing period of the latest charge recorded, if any."""
    async with store.pool.acquire() as conn:
        row = await conn.fetchrow(
            f"SELECT billing_period_start, billing_period_end FROM {store.schema}.charges"
            " ORDER BY seq DESC LIMIT 1"
        )
    return None if row is None else (row["billing_period_start"], row["billing_period_end"])


class _Port:
    """State every PostgreSQL port of a unit shares: the unit's transaction and billing's schema."""

    def __init__(
        self, tx: PostgresTransaction, schema: str, calendar: Calendar, announcer: Announcer, clock: Clock
    ) -> None:
        self._conn: asyncpg.Connection = tx.connection
        self._s = schema
        self._calendar = calendar
        self._announcer = announcer
        self._clock = clock


class PostgresTerms(_Port):
    async def job_terms(self, job_id: str) -> JobTerms | None:
        row = await self._conn.fetchrow(
            f"SELECT priority, preemptible FROM {self._s}.job_terms WHERE job_id = $1", job_id
        )
        return None if row is None else JobTerms(row["priority"], row["preemptible"])

    async def record_job_terms(self, job_id: str, tenant: str, terms: JobTerms) -> None:
        await self._conn.execute(
            f"INSERT INTO {self._s}.job_terms VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_id) DO NOTHING",
            job_id,
            tenant,
            terms.priority,
            terms.preemptible,
            self._clock.now(),
        )

    async def node_region(self, node_id: str) -> str | None:
        region: str | None = await self._conn.fetchval(
            f"SELECT region FROM {self._s}.node_regions WHERE node_id = $1", node_id
        )
        return region

    async def job_terms_of(self, job_ids: Collection[str]) -> dict[str, JobTerms]:
        rows = await self._conn.fetch(
            f"SELECT job_id, priority, preemptible FROM {self._s}.job_terms WHERE job_id = ANY($1::text[])",
            list(job_ids),
        )
        return {r["job_id"]: JobTerms(r["priority"], r["preemptible"]) for r in rows}

    async def record_job_terms_many(self, jobs: Sequence[tuple[str, str, JobTerms]]) -> None:
        if not jobs:
            return
        now = self._clock.now()
        # executemany: one round trip for all, each row inserted in order (the first terms of a job stay).
        await self._conn.executemany(
            f"INSERT INTO {self._s}.job_terms VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_id) DO NOTHING",
            [(job_id, tenant, terms.priority, terms.preemptible, now) for job_id, tenant, terms in jobs],
        )

    async def node_regions_of(self, node_ids: Collection[str]) -> dict[str, str]:
        rows = await self._conn.fetch(
            f"SELECT node_id, region FROM {self._s}.node_regions WHERE node_id = ANY($1::text[])",
            list(node_ids),
        )
        return {r["node_id"]: r["region"] for r in rows}

    async def record_node_region(self, node_id: str, region: str) -> None:
        await self._conn.execute(
            f"INSERT INTO {self._s}.node_regions VALUES ($1, $2, $3) "
            "ON CONFLICT (node_id) DO UPDATE SET region = EXCLUDED.region, updated_at = EXCLUDED.updated_at",
            node_id,
            region,
            self._clock.now(),
        )


class PostgresParking(_Port):
    async def park(self, usage: Usage) -> None:
        await self._conn.execute(
            f"INSERT INTO {self._s}.parked_usage VALUES ($1, $2, $3, $4, $5) "
            "ON CONFLICT (usage_event_id) DO NOTHING",
            usage.event_id,
            usage.job_id,
            usage.node_id,
            json.dumps(records.usage_to_json(usage)),
            self._clock.now(),
        )

    async def parked(self, *, job_id: str | None = None, node_id: str | None = None) -> list[Usage]:
        rows = await self._conn.fetch(
            f"SELECT usage FROM {self._s}.parked_usage WHERE job_id = $1 OR node_id = $2 "
            "ORDER BY parked_at, usage_event_id",
            job_id,
            node_id,
        )
        return [records.usage_from_json(json.loads(r["usage"])) for r in rows]

    async def parked_for_jobs(self, job_ids: Collection[str]) -> list[Usage]:
        rows = await self._conn.fetch(
            f"SELECT usage FROM {self._s}.parked_usage WHERE job_id = ANY($1::text[])"
            " ORDER BY parked_at, usage_event_id",
            list(job_ids),
        )
        return [records.usage_from_json(json.loads(r["usage"])) for r in rows]

    async def unpark(self, usage_event_id: str) -> None:
        await self._conn.execute(
            f"DELETE FROM {self._s}.parked_usage WHERE usage_event_id = $1", usage_event_id
        )

    async def unpark_many(self, usage_event_ids: Collection[str]) -> None:
        await self._conn.execute(
            f"DELETE FROM {self._s}.parked_usage WHERE usage_event_id = ANY($1::uuid[])",
            list(usage_event_ids),
        )


class PostgresLedger(_Port):
    async def claim_usage(self, usage_event_id: str) -> bool:
        claimed = await self._conn.fetchval(
            f"INSERT INTO {self._s}.rated_usage VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1",
            usage_event_id,
            self._clock.now(),
        )
        return claimed is not None

    async def claim_usages(self, usage_event_ids: Sequence[str]) -> set[str]:
        rows = await self._conn.fetch(
            f"INSERT INTO {self._s}.rated_usage SELECT u, $2 FROM unnest($1::uuid[]) AS u"
            " ON CONFLICT DO NOTHING RETURNING usage_event_id",
            list(usage_event_ids),
            self._clock.now(),
        )
        return {str(r["usage_event_id"]) for r in rows}

    async def record_charges(
        self, charges: Sequence[BilledCharge], traces: Mapping[str, str] | None = None
    ) -> None:
        if not charges:
            return
        now = self._clock.now()
        try:
            await self._conn.executemany(
                f"INSERT INTO {self._s}.charges (charge_id, usage_event_id, tenant, job_id, task_id,"
                " device_class, region, tier, preemptible, window_start, window_end, cu_seconds, unit_price,"
                " amount, currency,"
                " usage_period_start, billing_period_start, billing_period_end, reverses_charge_id,"
                " recorded_at)"
                " VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20)",
                [_charge_row(b, now) for b in charges],
            )
        except asyncpg.IntegrityConstraintViolationError as exc:
            # Keys, references and the period-open trigger of the migration: the ledger's invariants.
            raise LedgerConflict(str(exc)) from exc
        await self._conn.executemany(
            f"INSERT INTO {self._s}.ledger_entries (charge_id, account, amount, currency, recorded_at)"
            " VALUES ($1, $2, $3, $4, $5)",
            [
                (e.charge_id, e.account, e.amount, b.charge.currency, now)
                for b in charges
                for e in entries_for(b.charge)
            ],
        )
        await records.announce_charges(self._announcer, charges, now, traces)

    async def billed_charge(self, charge_id: str) -> BilledCharge | None:
        row = await self._conn.fetchrow(f"SELECT * FROM {self._s}.charges WHERE charge_id = $1", charge_id)
        return None if row is None else billed_from_row(row, self._calendar)

    async def reversed(self, charge_id: str) -> bool:
        found = await self._conn.fetchval(
            f"SELECT 1 FROM {self._s}.charges WHERE reverses_charge_id = $1", charge_id
        )
        return found is not None

    async def charge_totals(self, tenant: str, billing_period: Period) -> list[ChargeTotal]:
        rows = await self._conn.fetch(
            f"SELECT device_class, usage_period_start, sum(cu_seconds) AS cu, sum(amount) AS amount"
            f" FROM {self._s}.charges WHERE tenant = $1 AND billing_period_start = $2"
            " GROUP BY device_class, usage_period_start",
            tenant,
            billing_period.start,
        )
        return [
            ChargeTotal(
                r["device_class"], self._calendar.period_of(r["usage_period_start"]), r["cu"], r["amount"]
            )
            for r in rows
        ]


class PostgresInvoices(_Port):
    async def invoiced(self, tenant: str, period: Period) -> bool:
        found = await self._conn.fetchval(
            f"SELECT 1 FROM {self._s}.invoices WHERE tenant = $1 AND period_start = $2", tenant, period.start
        )
        return found is not None

    async def invoiced_of(self, keys: Collection[tuple[str, Period]]) -> set[tuple[str, Period]]:
        asked = list(keys)
        rows = await self._conn.fetch(
            f"SELECT k.n FROM unnest($1::text[], $2::timestamptz[]) WITH ORDINALITY AS k(tenant, start, n)"
            f" JOIN {self._s}.invoices i ON i.tenant = k.tenant AND i.period_start = k.start",
            [tenant for tenant, _ in asked],
            [period.start for _, period in asked],
        )
        return {asked[r["n"] - 1] for r in rows}

    async def invoice(self, tenant: str, period: Period) -> Invoice | None:
        return await read_invoice(self._conn, self._s, self._calendar, tenant, period)

    async def record_invoice(self, invoice: Invoice, closing: Closing = ON_SCHEDULE) -> None:
        try:
            await self._conn.execute(
                f"INSERT INTO {self._s}.invoices VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                invoice.invoice_id,
                invoice.tenant,
                invoice.period.start,
                invoice.period.end,
                invoice.period.label,
                invoice.currency,
                invoice.total,
                invoice.issued_at,
            )
        except asyncpg.UniqueViolationError as exc:
            raise LedgerConflict(str(exc)) from exc
        await self._conn.executemany(
            f"INSERT INTO {self._s}.invoice_lines VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            [
                (
                    invoice.invoice_id,
                    n,
                    ln.device_class,
                    ln.description,
                    ln.cu_hours,
                    ln.unit,
                    ln.amount,
                    ln.adjustment_of,
                )
                for n, ln in enumerate(invoice.lines, 1)
            ],
        )
        issued = records.invoice_issued(invoice, closing)
        await self._announcer.announce(invoice.tenant, [("InvoiceIssued", issued)])

    async def unbilled_periods(self, ended_by: datetime) -> list[tuple[str, datetime]]:
        rows = await self._conn.fetch(
            f"SELECT DISTINCT c.tenant, c.billing_period_start FROM {self._s}.charges c"
            f" WHERE c.billing_period_end <= $1 AND NOT EXISTS (SELECT 1 FROM {self._s}.invoices i"
            "  WHERE i.tenant = c.tenant AND i.period_start = c.billing_period_start)"
            " ORDER BY 2, 1",
            ended_by,
        )
        return [(r["tenant"], r["billing_period_start"]) for r in rows]


def _charge_row(billed: BilledCharge, now: datetime) -> tuple[Any, ...]:
    c = billed.charge
    return (
        c.charge_id,
        c.usage_event_id,
        c.tenant,
        c.job_id,
        c.task_id,
        c.device_class,
        c.region,
        c.tier,
        c.preemptible,
        c.start,
        c.end,
        c.cu_seconds,
        c.unit_price,
        c.amount,
        c.currency,
        billed.usage_period.start,
        billed.billing_period.start,
        billed.billing_period.end,
        c.reverses,
        now,
    )


def billed_from_row(row: asyncpg.Record, calendar: Calendar) -> BilledCharge:
    charge = Charge(
        charge_id=str(row["charge_id"]),
        usage_event_id=None if row["usage_event_id"] is None else str(row["usage_event_id"]),
        tenant=row["tenant"],
        job_id=row["job_id"],
        task_id=row["task_id"],
        device_class=row["device_class"],
        region=row["region"],
        tier=row["tier"],
        preemptible=row["preemptible"],
        start=row["window_start"],
        end=row["window_end"],
        cu_seconds=row["cu_seconds"],
        unit_price=row["unit_price"],
        amount=row["amount"],
        currency=row["currency"],
        reverses=None if row["reverses_charge_id"] is None else str(row["reverses_charge_id"]),
    )
    return BilledCharge(
        charge, calendar.period_of(row["usage_period_start"]), calendar.period_of(row["billing_period_start"])
    )


async def read_invoice(
    conn: asyncpg.Connection | asyncpg.Pool, schema: str, calendar: Calendar, tenant: str, period: Period
) -> Invoice | None:
    head = await conn.fetchrow(
        f"SELECT * FROM {schema}.invoices WHERE tenant = $1 AND period_start = $2", tenant, period.start
    )
    if head is None:
        return None
    lines = await conn.fetch(
        f"SELECT * FROM {schema}.invoice_lines WHERE invoice_id = $1 ORDER BY line_no", head["invoice_id"]
    )
    return Invoice(
        invoice_id=str(head["invoice_id"]),
        tenant=head["tenant"],
        period=calendar.period_of(head["period_start"]),
        currency=head["currency"],
        lines=tuple(
            InvoiceLine(r["device_class"], r["description"], r["cu_hours"], r["amount"], r["adjustment_of"])
            for r in lines
        ),
        issued_at=head["issued_at"],
    )


class PostgresUnitOfWork:
    """`UnitOfWork` on the event store's transactions (which also carry the tracked offset)."""

    def __init__(
        self, store: PostgresEventStore, calendar: Calendar, billing_topic: str, clock: Clock
    ) -> None:
        self.store = store
        self._calendar = calendar
        self._topic = billing_topic
        self._clock = clock

    @asynccontextmanager
    async def tracked(
        self, group: str, topic: str, partition: int, offset: int, event_id: str | None = None
    ) -> AsyncIterator[LedgerUnit]:
        async with self.store.tracking_transaction(group, topic, partition, offset, event_id=event_id) as tx:
            yield await self._unit(tx)

    @asynccontextmanager
    async def tracked_batch(self, group: str) -> AsyncIterator[TrackedBatch]:
        async with self.store.tracking_batch(group) as batch:
            yield TrackedBatch(await self._unit(batch.transaction), batch)

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[LedgerUnit]:
        async with self.store.transaction() as tx:
            yield await self._unit(tx)

    async def _unit(self, tx: PostgresTransaction) -> LedgerUnit:
        schema = self.store.schema
        conn: asyncpg.Connection = tx.connection
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"suanli.billing:{schema}")

        async def versions_of(streams: list[str]) -> dict[str, int]:
            # One index probe per stream (a grouped max would read every event of each stream).
            rows = await conn.fetch(
                f"SELECT a.stream, (SELECT e.version FROM {schema}.events AS e WHERE e.stream = a.stream"
                " ORDER BY e.version DESC LIMIT 1) AS version FROM unnest($1::text[]) AS a(stream)",
                streams,
            )
            return {r["stream"]: r["version"] or 0 for r in rows}

        shared = (tx, schema, self._calendar, Announcer(tx, self._topic, versions_of), self._clock)
        return LedgerUnit(
            PostgresTerms(*shared),
            PostgresParking(*shared),
            PostgresLedger(*shared),
            PostgresInvoices(*shared),
        )


class PostgresBillingQueries:
    """`BillingQueries`: plain reads of committed rows, no lock."""

    def __init__(self, pool: asyncpg.Pool, schema: str, calendar: Calendar) -> None:
        self._pool = pool
        self._s = schema
        self._calendar = calendar

    async def usage(self, tenant: str, period: Period) -> list[UsageRow]:
        rows = await self._pool.fetch(
            f"SELECT device_class, region, sum(cu_seconds) AS cu, sum(amount) AS amount, count(*) AS n"
            f" FROM {self._s}.charges WHERE tenant = $1 AND usage_period_start = $2"
            " GROUP BY device_class, region ORDER BY device_class, region",
            tenant,
            period.start,
        )
        return [UsageRow(r["device_class"], r["region"], r["cu"], r["amount"], r["n"]) for r in rows]

    async def charges(
        self,
        tenant: str,
        *,
        billing_period: Period | None = None,
        job_id: str | None = None,
        after: int = 0,
        limit: int = 100,
        newest_first: bool = False,
    ) -> ChargePage:
        past, order = ("($2 = 0 OR seq < $2)", "seq DESC") if newest_first else ("seq > $2", "seq")
        rows = await self._pool.fetch(
            f"SELECT * FROM {self._s}.charges WHERE tenant = $1 AND {past}"
            " AND ($3::timestamptz IS NULL OR billing_period_start = $3)"
            " AND ($4::text IS NULL OR job_id = $4)"
            f" ORDER BY {order} LIMIT $5",
            tenant,
            after,
            None if billing_period is None else billing_period.start,
            job_id,
            limit + 1,
        )
        more = len(rows) > limit
        rows = rows[:limit]
        return ChargePage(
            [billed_from_row(r, self._calendar) for r in rows], rows[-1]["seq"] if more and rows else None
        )

    async def invoice(self, tenant: str, period: Period) -> Invoice | None:
        return await read_invoice(self._pool, self._s, self._calendar, tenant, period)

    async def latest_invoice(self, tenant: str) -> Invoice | None:
        start = await self._pool.fetchval(
            f"SELECT max(period_start) FROM {self._s}.invoices WHERE tenant = $1", tenant
        )
        if start is None:
            return None
        period = self._calendar.period_of(start)
        return await read_invoice(self._pool, self._s, self._calendar, tenant, period)

    async def known_tenant(self, tenant: str) -> bool:
        known: bool = await self._pool.fetchval(
            f"SELECT EXISTS (SELECT 1 FROM {self._s}.job_terms WHERE tenant = $1)"
            f" OR EXISTS (SELECT 1 FROM {self._s}.charges WHERE tenant = $1)"
            f" OR EXISTS (SELECT 1 FROM {self._s}.invoices WHERE tenant = $1)",
            tenant,
        )
        return known

    async def balance(self, account: str) -> Decimal:
        total = await self._pool.fetchval(
            f"SELECT coalesce(sum(amount), 0) FROM {self._s}.ledger_entries WHERE account = $1", account
        )
        return Decimal(total)
