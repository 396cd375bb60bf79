"""The use cases: rate usage, learn the facts it is priced by, close periods, reverse charges."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from suanli.billing.domain.invoices import ON_SCHEDULE, Closing, Invoice, build_invoice
from suanli.billing.domain.ledger import BilledCharge
from suanli.billing.domain.periods import Calendar, Period
from suanli.billing.domain.rating import Charge, rate
from suanli.billing.domain.usage import JobTerms, Usage
from suanli.billing.service_layer.errors import AlreadyReversed, ChargeNotFound, PeriodNotEnded
from suanli.billing.service_layer.ports import Invoices, LedgerUnit
from suanli.resources.pricebook import PriceBook

Charged = Counter[str]
"""Charges recorded by a use case, per tenant charged (empty for a duplicate or parked usage)."""


@dataclass(frozen=True, slots=True)
class BillingService:
    book: PriceBook
    calendar: Calendar
    close_grace: timedelta

    async def usage_metered(self, unit: LedgerUnit, usage: Usage) -> Charged:
        """Rate `usage` now, or park it until its job's terms and node's region are known.

        Returns the charges recorded per tenant (none for a duplicate or a parked usage).
        """
        terms = await unit.terms.job_terms(usage.job_id)
        region = await unit.terms.node_region(usage.node_id)
        if terms is None or region is None:
            await unit.parking.park(usage)
            return Counter()
        return await self._rate(unit, usage, terms, region)

    async def job_submitted(self, unit: LedgerUnit, job_id: str, tenant: str, terms: JobTerms) -> Charged:
        await unit.terms.record_job_terms(job_id, tenant, terms)
        return await self._release(unit, await unit.parking.parked(job_id=job_id))

    async def node_located(self, unit: LedgerUnit, node_id: str, region: str) -> Charged:
        await unit.terms.record_node_region(node_id, region)
        return await self._release(unit, await unit.parking.parked(node_id=node_id))

    async def close_period(
        self, unit: LedgerUnit, tenant: str, period: Period, now: datetime, closing: Closing = ON_SCHEDULE
    ) -> Invoice:
        """Issue the tenant's invoice for `period` (the existing one if already issued), closed as `closing`
        says (recorded with the invoice: who asked is part of the audit trail)."""
        existing = await unit.invoices.invoice(tenant, period)
        if existing is not None:
            return existing
        if now < period.end:
            raise PeriodNotEnded(period)
        totals = await unit.ledger.charge_totals(tenant, period)
        invoice = build_invoice(tenant, period, self.book.currency, totals, issued_at=now)
        await unit.invoices.record_invoice(invoice, closing)
        return invoice

    async def periods_due(self, unit: LedgerUnit, now: datetime) -> list[tuple[str, Period]]:
        """Tenants' periods that ended more than the grace ago and are not invoiced yet."""
        found = await unit.invoices.unbilled_periods(now - self.close_grace)
        return [(tenant, self.calendar.period_of(start)) for tenant, start in found]

    async def reverse_charge(self, unit: LedgerUnit, charge_id: str) -> Charge:
        """Record the reversing charge of `charge_id`, billed in the first period still open."""
        billed = await unit.ledger.billed_charge(charge_id)
        if billed is None:
            raise ChargeNotFound(charge_id)
        if billed.charge.reverses is not None or await unit.ledger.reversed(charge_id):
            raise AlreadyReversed(charge_id)
        reversal = billed.charge.reversal()
        period = await self._open_period(unit.invoices, reversal.tenant, billed.billing_period)
        await unit.ledger.record_charges([BilledCharge(reversal, billed.usage_period, period)])
        return reversal

    async def _release(self, unit: LedgerUnit, parked: list[Usage]) -> Charged:
        recorded: Charged = Counter()
        for usage in parked:
            recorded += await self.usage_metered(unit, usage)
        return recorded

    async def _rate(self, unit: LedgerUnit, usage: Usage, terms: JobTerms, region: str) -> Charged:
        await unit.parking.unpark(usage.event_id)
        if not await unit.ledger.claim_usage(usage.event_id):
            return Counter()
        cuts = self.calendar.boundaries_within(usage.window_start, usage.window_end)
        billed = []
        for charge in rate(usage, terms, region, self.book, cuts):
            usage_period = self.calendar.period_of(charge.start)
            billing_period = await self._open_period(unit.invoices, charge.tenant, usage_period)
            billed.append(BilledCharge(charge, usage_period, billing_period))
        await unit.ledger.record_charges(billed)
        return Counter(b.charge.tenant for b in billed)

    async def _open_period(self, invoices: Invoices, tenant: str, period: Period) -> Period:
        # Late usage of an invoiced period is billed in the first period not yet invoiced.
        while await invoices.invoiced(tenant, period):
            period = self.calendar.next(period)
        return period
