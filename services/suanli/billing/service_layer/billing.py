"""The use cases: rate usage, learn the facts it is priced by, close periods, reverse charges."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
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
class Submission:
    """A job's submission as billing learns it: the terms its usage is priced by."""

    job_id: str
    tenant: str
    terms: JobTerms


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

    async def apply_batch(
        self, unit: LedgerUnit, inputs: Sequence[Usage | Submission], traces: Sequence[str | None]
    ) -> list[Charged]:
        """`usage_metered` and `job_submitted` of several inputs, in a fixed number of statements.

        What each input charges, in input order; ``traces`` (one per input, None for none) is the trace
        each input's charges continue. The charges are those of applying the inputs one by one, with one
        difference of attribution: the batch's submissions are recorded first, so usage that arrives in
        the same batch as its job's terms is rated as itself instead of parked and released by them.
        A domain error of any input fails the whole batch (nothing is written by it): apply the inputs
        one by one then to find it.
        """
        submitted = [(i, x) for i, x in enumerate(inputs) if isinstance(x, Submission)]
        await unit.terms.record_job_terms_many([(x.job_id, x.tenant, x.terms) for _, x in submitted])
        releasing: dict[str, int] = {}
        for i, x in submitted:
            releasing.setdefault(x.job_id, i)
        released = await unit.parking.parked_for_jobs(releasing) if releasing else []
        usages = [(releasing[u.job_id], u) for u in released]
        usages += [(i, x) for i, x in enumerate(inputs) if isinstance(x, Usage)]
        usages.sort(key=lambda pair: pair[0])  # stable: what a submission releases at its place
        terms = await unit.terms.job_terms_of({u.job_id for _, u in usages})
        regions = await unit.terms.node_regions_of({u.node_id for _, u in usages})
        ready = []
        for i, usage in usages:
            if usage.job_id in terms and usage.node_id in regions:
                ready.append((i, usage))
            else:
                await unit.parking.park(usage)
        if ready:
            await unit.parking.unpark_many({u.event_id for _, u in ready})
        claimed = await unit.ledger.claim_usages([u.event_id for _, u in ready]) if ready else set()
        rated: list[tuple[int, Charge]] = []
        for i, usage in ready:
            if usage.event_id not in claimed:
                continue
            claimed.discard(usage.event_id)  # a usage twice in the batch is rated once
            cuts = self.calendar.boundaries_within(usage.window_start, usage.window_end)
            charges = rate(usage, terms[usage.job_id], regions[usage.node_id], self.book, cuts)
            rated.extend((i, charge) for charge in charges)
        billed = await self._bill(unit.invoices, rated)
        charged: list[Charged] = [Counter() for _ in inputs]
        trace_of: dict[str, str] = {}
        for i, b in billed:
            charged[i][b.charge.tenant] += 1
            trace = traces[i]
            if trace is not None:
                trace_of[b.charge.charge_id] = trace
        await unit.ledger.record_charges([b for _, b in billed], trace_of)
        return charged

    async def _bill(
        self, invoices: Invoices, rated: list[tuple[int, Charge]]
    ) -> list[tuple[int, BilledCharge]]:
        """Each charge with its usage period and the first period of its tenant not invoiced from there."""
        usage_periods = [self.calendar.period_of(charge.start) for _, charge in rated]
        keys = {(charge.tenant, p) for (_, charge), p in zip(rated, usage_periods, strict=True)}
        invoiced = await invoices.invoiced_of(keys) if keys else set()
        billing: dict[tuple[str, Period], Period] = {}
        for tenant, period in keys:
            open_ = (
                period
                if (tenant, period) not in invoiced
                else await self._open_period(invoices, tenant, period)
            )
            billing[(tenant, period)] = open_
        return [
            (i, BilledCharge(charge, p, billing[(charge.tenant, p)]))
            for (i, charge), p in zip(rated, usage_periods, strict=True)
        ]

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
