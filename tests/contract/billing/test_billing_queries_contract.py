"""Read-side contract (the API's `BillingQueries`): usage of a period, charges page by page, balances."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from billing_contract_kit import CALENDAR, FEBRUARY, JAN, JANUARY, STANDARD, Adapter, billed, invoice, usage

from suanli.billing.domain.ledger import BilledCharge
from suanli.billing.service_layer.ports import UsageRow


async def recorded(adapter: Adapter, *batches: list[BilledCharge]) -> list[BilledCharge]:
    async with adapter.uow.begin() as unit:
        for charges in batches:
            for usage_event_id in {b.charge.usage_event_id for b in charges if b.charge.usage_event_id}:
                await unit.ledger.claim_usage(usage_event_id)
            await unit.ledger.record_charges(charges)
    return [b for charges in batches for b in charges]


async def test_usage_of_a_period_by_device_class_and_region(adapter: Adapter) -> None:
    await recorded(
        adapter,
        billed(usage(1, h200="6000", cpu="3600")),
        billed(usage(2, start=JAN + timedelta(minutes=1)), region="cn-west"),
        billed(usage(3, start=JAN + timedelta(minutes=2))),
        billed(usage(4, start=FEBRUARY.start)),
        billed(usage(5, tenant="globex")),
        # Late January usage billed in February is still January's usage.
        billed(usage(6, start=JAN + timedelta(minutes=3)), billing_period=FEBRUARY),
    )
    assert await adapter.queries.usage("acme", JANUARY) == [
        UsageRow("cpu", "cn-east", Decimal("3600.000000"), Decimal("1.800000"), 1),
        UsageRow("h200", "cn-east", Decimal("18000.000000"), Decimal("18.000000"), 3),
        UsageRow("h200", "cn-west", Decimal("6000.000000"), Decimal("6.000000"), 1),
    ]
    assert await adapter.queries.usage("nobody", JANUARY) == []


@pytest.mark.parametrize("newest_first", [False, True])
async def test_charges_page_by_page_in_either_order(adapter: Adapter, newest_first: bool) -> None:
    charges = await recorded(adapter, *(billed(usage(n, start=JAN + timedelta(minutes=n))) for n in range(5)))
    seen: list[BilledCharge] = []
    after = 0
    while True:
        page = await adapter.queries.charges("acme", after=after, limit=2, newest_first=newest_first)
        seen += page.charges
        if page.next_after is None:
            break
        after = page.next_after
    assert seen == (charges[::-1] if newest_first else charges)
    exact = await adapter.queries.charges("acme", limit=5, newest_first=newest_first)
    assert (len(exact.charges), exact.next_after) == (5, None)


async def test_charges_filtered_by_billing_period_and_job(adapter: Adapter) -> None:
    jan, feb, other = await recorded(
        adapter,
        billed(usage(1)),
        billed(usage(2, start=FEBRUARY.start)),
        billed(usage(3, job="job-2", start=JAN + timedelta(minutes=1))),
    )
    assert (await adapter.queries.charges("acme", billing_period=FEBRUARY)).charges == [feb]
    assert (await adapter.queries.charges("acme", job_id="job-1")).charges == [jan, feb]
    assert (await adapter.queries.charges("acme", billing_period=JANUARY, job_id="job-2")).charges == [other]
    assert (await adapter.queries.charges("globex")).charges == []


async def test_the_latest_invoice_is_the_one_of_the_latest_period(adapter: Adapter) -> None:
    assert await adapter.queries.latest_invoice("acme") is None
    march = CALENDAR.next(FEBRUARY)
    issued = {
        p.label: invoice("acme", p, [], issued_at=p.end + timedelta(minutes=20))
        for p in (FEBRUARY, JANUARY)  # issued out of order: the period decides, not the issue order
    }
    async with adapter.uow.begin() as unit:
        for one in issued.values():
            await unit.invoices.record_invoice(one)
        await unit.invoices.record_invoice(invoice("globex", march, [], issued_at=march.end))
    assert await adapter.queries.latest_invoice("acme") == issued["2025-02"]
    assert await adapter.queries.latest_invoice("nobody") is None


async def test_a_tenant_is_known_by_a_jobs_terms_a_charge_or_an_invoice(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        await unit.terms.record_job_terms("job-9", "termed", STANDARD)
        await unit.invoices.record_invoice(invoice("invoiced", JANUARY, [], issued_at=FEBRUARY.start))
    await recorded(adapter, billed(usage(1, tenant="charged")))
    for tenant in ("termed", "charged", "invoiced"):
        assert await adapter.queries.known_tenant(tenant), tenant
    assert not await adapter.queries.known_tenant("nobody")
    assert not await adapter.queries.known_tenant("job-9")
