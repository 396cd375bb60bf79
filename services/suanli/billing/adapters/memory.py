"""In memory: the same behaviour as PostgreSQL, for unit tests of the use cases and the contract suites.

Billing's tables are plain containers of frozen values. A unit of work stages its writes on a copy of
them inside a transaction of `InMemoryEventStore` (which also carries the tracked offset, the events and
their outbox rows) and swaps the copy in once that transaction committed, so the store's lock serialises
units as the advisory lock does in PostgreSQL, and a unit that raises leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal

from suanli.billing.adapters import records
from suanli.billing.adapters.announce import Announcer
from suanli.billing.domain.invoices import ON_SCHEDULE, ChargeTotal, Closing, Invoice
from suanli.billing.domain.ledger import BilledCharge, LedgerEntry, entries_for
from suanli.billing.domain.periods import Period
from suanli.billing.domain.usage import JobTerms, Usage
from suanli.billing.service_layer.ports import ChargePage, LedgerConflict, LedgerUnit, TrackedBatch, UsageRow
from suanli.clock import Clock
from suanli.eventstore import InMemoryEventStore, Transaction


@dataclass
class BillingTables:
    """What the PostgreSQL migration's tables hold, keyed as they are."""

    job_terms: dict[str, JobTerms] = field(default_factory=dict)
    job_tenants: dict[str, str] = field(default_factory=dict)  # the tenant column of job_terms
    node_regions: dict[str, str] = field(default_factory=dict)
    parked: dict[str, tuple[datetime, Usage]] = field(default_factory=dict)  # by usage event id
    rated: set[str] = field(default_factory=set)
    charges: list[BilledCharge] = field(default_factory=list)  # in recording order: seq = index + 1
    entries: list[LedgerEntry] = field(default_factory=list)
    invoices: dict[tuple[str, datetime], Invoice] = field(default_factory=dict)  # (tenant, period start)

    def copy(self) -> BillingTables:
        # Shallow copies suffice: every value held is immutable.
        return BillingTables(
            dict(self.job_terms),
            dict(self.job_tenants),
            dict(self.node_regions),
            dict(self.parked),
            set(self.rated),
            list(self.charges),
            list(self.entries),
            dict(self.invoices),
        )


class _Port:
    def __init__(self, tables: BillingTables, announcer: Announcer, clock: Clock) -> None:
        self._t = tables
        self._announcer = announcer
        self._clock = clock


class InMemoryTerms(_Port):
    async def job_terms(self, job_id: str) -> JobTerms | None:
        return self._t.job_terms.get(job_id)

    async def record_job_terms(self, job_id: str, tenant: str, terms: JobTerms) -> None:
        self._t.job_terms.setdefault(job_id, terms)
        self._t.job_tenants.setdefault(job_id, tenant)

    async def node_region(self, node_id: str) -> str | None:
        return self._t.node_regions.get(node_id)

    async def job_terms_of(self, job_ids: Collection[str]) -> dict[str, JobTerms]:
        return {j: self._t.job_terms[j] for j in job_ids if j in self._t.job_terms}

    async def record_job_terms_many(self, jobs: Sequence[tuple[str, str, JobTerms]]) -> None:
        for job_id, tenant, terms in jobs:
            await self.record_job_terms(job_id, tenant, terms)

    async def node_regions_of(self, node_ids: Collection[str]) -> dict[str, str]:
        return {n: self._t.node_regions[n] for n in node_ids if n in self._t.node_regions}

    async def record_node_region(self, node_id: str, region: str) -> None:
        self._t.node_regions[node_id] = region


class InMemoryParking(_Port):
    async def park(self, usage: Usage) -> None:
        self._t.parked.setdefault(usage.event_id, (self._clock.now(), usage))

    async def parked(self, *, job_id: str | None = None, node_id: str | None = None) -> list[Usage]:
        return self._oldest_first(lambda u: u.job_id == job_id or u.node_id == node_id)

    async def parked_for_jobs(self, job_ids: Collection[str]) -> list[Usage]:
        wanted = set(job_ids)
        return self._oldest_first(lambda u: u.job_id in wanted)

    def _oldest_first(self, keep: Callable[[Usage], bool]) -> list[Usage]:
        found = [(at, usage) for at, usage in self._t.parked.values() if keep(usage)]
        return [usage for _, usage in sorted(found, key=lambda p: (p[0], p[1].event_id))]

    async def unpark(self, usage_event_id: str) -> None:
        self._t.parked.pop(usage_event_id, None)

    async def unpark_many(self, usage_event_ids: Collection[str]) -> None:
        for usage_event_id in usage_event_ids:
            self._t.parked.pop(usage_event_id, None)


class InMemoryLedger(_Port):
    async def claim_usage(self, usage_event_id: str) -> bool:
        if usage_event_id in self._t.rated:
            return False
        self._t.rated.add(usage_event_id)
        return True

    async def claim_usages(self, usage_event_ids: Sequence[str]) -> set[str]:
        return {u for u in usage_event_ids if await self.claim_usage(u)}

    async def record_charges(
        self, charges: Sequence[BilledCharge], traces: Mapping[str, str] | None = None
    ) -> None:
        if not charges:
            return
        for billed in charges:
            self._check(billed)
            self._t.charges.append(billed)
            self._t.entries.extend(entries_for(billed.charge))
        await records.announce_charges(self._announcer, charges, self._clock.now(), traces)

    def _check(self, billed: BilledCharge) -> None:
        """The keys, references and triggers of the PostgreSQL migration."""
        charge = billed.charge
        known = {b.charge.charge_id for b in self._t.charges}
        if charge.charge_id in known:
            raise LedgerConflict(f"charge {charge.charge_id} is already recorded")
        if charge.usage_event_id is not None and charge.usage_event_id not in self._t.rated:
            raise LedgerConflict(f"usage {charge.usage_event_id} of charge {charge.charge_id} is not claimed")
        if charge.reverses is not None:
            if charge.reverses not in known:
                raise LedgerConflict(f"charge {charge.reverses} to reverse is not recorded")
            if any(b.charge.reverses == charge.reverses for b in self._t.charges):
                raise LedgerConflict(f"charge {charge.reverses} is already reversed")
        if (charge.tenant, billed.billing_period.start) in self._t.invoices:
            raise LedgerConflict(
                f"period {billed.billing_period.label} of tenant {charge.tenant} is already invoiced"
            )

    async def billed_charge(self, charge_id: str) -> BilledCharge | None:
        return next((b for b in self._t.charges if b.charge.charge_id == charge_id), None)

    async def reversed(self, charge_id: str) -> bool:
        return any(b.charge.reverses == charge_id for b in self._t.charges)

    async def charge_totals(self, tenant: str, billing_period: Period) -> list[ChargeTotal]:
        totals: dict[tuple[str, Period], ChargeTotal] = {}
        for b in self._t.charges:
            if b.charge.tenant != tenant or b.billing_period.start != billing_period.start:
                continue
            key = (b.charge.device_class, b.usage_period)
            total = totals.get(key, ChargeTotal(*key, Decimal(0), Decimal(0)))
            totals[key] = replace(
                total,
                cu_seconds=total.cu_seconds + b.charge.cu_seconds,
                amount=total.amount + b.charge.amount,
            )
        return list(totals.values())


class InMemoryInvoices(_Port):
    async def invoiced(self, tenant: str, period: Period) -> bool:
        return (tenant, period.start) in self._t.invoices

    async def invoiced_of(self, keys: Collection[tuple[str, Period]]) -> set[tuple[str, Period]]:
        return {(tenant, period) for tenant, period in keys if (tenant, period.start) in self._t.invoices}

    async def invoice(self, tenant: str, period: Period) -> Invoice | None:
        return self._t.invoices.get((tenant, period.start))

    async def record_invoice(self, invoice: Invoice, closing: Closing = ON_SCHEDULE) -> None:
        key = (invoice.tenant, invoice.period.start)
        if key in self._t.invoices:
            raise LedgerConflict(f"period {invoice.period.label} of tenant {invoice.tenant} is invoiced")
        self._t.invoices[key] = invoice
        issued = records.invoice_issued(invoice, closing)
        await self._announcer.announce(invoice.tenant, [("InvoiceIssued", issued)])

    async def unbilled_periods(self, ended_by: datetime) -> list[tuple[str, datetime]]:
        found = {
            (b.charge.tenant, b.billing_period.start)
            for b in self._t.charges
            if b.billing_period.end <= ended_by
            and (b.charge.tenant, b.billing_period.start) not in self._t.invoices
        }
        return sorted(found, key=lambda pair: (pair[1], pair[0]))


class InMemoryUnitOfWork:
    """`UnitOfWork` over an `InMemoryEventStore`; `tables` is what committed units left."""

    def __init__(self, store: InMemoryEventStore, billing_topic: str, clock: Clock) -> None:
        self.store = store
        self.tables = BillingTables()
        self._topic = billing_topic
        self._clock = clock

    @asynccontextmanager
    async def tracked(
        self, group: str, topic: str, partition: int, offset: int, event_id: str | None = None
    ) -> AsyncIterator[LedgerUnit]:
        async with self.store.tracking_transaction(group, topic, partition, offset, event_id=event_id) as tx:
            staged = self.tables.copy()
            yield self._unit(tx, staged)
        self.tables = staged

    @asynccontextmanager
    async def tracked_batch(self, group: str) -> AsyncIterator[TrackedBatch]:
        async with self.store.tracking_batch(group) as batch:
            staged = self.tables.copy()
            yield TrackedBatch(self._unit(batch.transaction, staged), batch)
        self.tables = staged

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[LedgerUnit]:
        async with self.store.transaction() as tx:
            staged = self.tables.copy()
            yield self._unit(tx, staged)
        # No await between the store's commit and this swap: no other unit can start in between.
        self.tables = staged

    def _unit(self, tx: Transaction, tables: BillingTables) -> LedgerUnit:
        async def versions_of(streams: list[str]) -> dict[str, int]:
            return {stream: await self.store.stream_version(stream) for stream in streams}

        shared = (tables, Announcer(tx, self._topic, versions_of), self._clock)
        return LedgerUnit(
            InMemoryTerms(*shared),
            InMemoryParking(*shared),
            InMemoryLedger(*shared),
            InMemoryInvoices(*shared),
        )


class InMemoryBillingQueries:
    """`BillingQueries` over what the unit of work committed."""

    def __init__(self, uow: InMemoryUnitOfWork) -> None:
        self._uow = uow

    async def usage(self, tenant: str, period: Period) -> list[UsageRow]:
        rows: dict[tuple[str, str], UsageRow] = {}
        for b in self._uow.tables.charges:
            c = b.charge
            if c.tenant != tenant or b.usage_period.start != period.start:
                continue
            key = (c.device_class, c.region)
            row = rows.get(key, UsageRow(*key, Decimal(0), Decimal(0), 0))
            rows[key] = replace(
                row,
                cu_seconds=row.cu_seconds + c.cu_seconds,
                amount=row.amount + c.amount,
                charges=row.charges + 1,
            )
        return [rows[key] for key in sorted(rows)]

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
        numbered = list(enumerate(self._uow.tables.charges, 1))
        found = [
            (seq, b)
            for seq, b in (reversed(numbered) if newest_first else numbered)
            if ((not after or seq < after) if newest_first else seq > after)
            and b.charge.tenant == tenant
            and (billing_period is None or b.billing_period.start == billing_period.start)
            and (job_id is None or b.charge.job_id == job_id)
        ]
        page = found[:limit]
        more = len(found) > limit
        return ChargePage([b for _, b in page], page[-1][0] if more and page else None)

    async def invoice(self, tenant: str, period: Period) -> Invoice | None:
        return self._uow.tables.invoices.get((tenant, period.start))

    async def latest_invoice(self, tenant: str) -> Invoice | None:
        starts = [start for t, start in self._uow.tables.invoices if t == tenant]
        return self._uow.tables.invoices[(tenant, max(starts))] if starts else None

    async def known_tenant(self, tenant: str) -> bool:
        t = self._uow.tables
        return (
            tenant in t.job_tenants.values()
            or any(b.charge.tenant == tenant for b in t.charges)
            or any(owner == tenant for owner, _ in t.invoices)
        )

    async def balance(self, account: str) -> Decimal:
        return sum((e.amount for e in self._uow.tables.entries if e.account == account), Decimal(0))
