"""Invoices port contract: an invoice is issued once per tenant and period, reads back as issued, is
announced through the outbox; periods with charges and no invoice are found once they ended."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from billing_contract_kit import CALENDAR, FEBRUARY, JAN, JANUARY, Adapter, billed, invoice, usage

from suanli.billing.domain.invoices import Caller, ChargeTotal, Closing
from suanli.billing.service_layer.ports import LedgerConflict, LedgerUnit
from suanli.contracts import decode

DECEMBER = CALENDAR.period_of(JAN - timedelta(days=31))


async def charge(unit: LedgerUnit, n: int, tenant: str = "acme", start: datetime = JAN) -> None:
    u = usage(n, tenant=tenant, start=start)
    await unit.ledger.claim_usage(u.event_id)
    await unit.ledger.record_charges(billed(u))


async def test_an_issued_invoice_reads_back_as_issued(adapter: Adapter) -> None:
    issued = invoice(
        "acme",
        JANUARY,
        [
            ChargeTotal("h200", JANUARY, Decimal("12000.000000"), Decimal("12.000000")),
            ChargeTotal("cpu", JANUARY, Decimal("3600.000000"), Decimal("1.800000")),
            ChargeTotal("h200", DECEMBER, Decimal("60.000000"), Decimal("0.060000")),
        ],
        issued_at=FEBRUARY.start + timedelta(minutes=20),
    )
    async with adapter.uow.begin() as unit:
        assert await unit.invoices.invoiced("acme", JANUARY) is False
        assert await unit.invoices.invoice("acme", JANUARY) is None
        await unit.invoices.record_invoice(issued)
    async with adapter.uow.begin() as unit:
        assert await unit.invoices.invoiced("acme", JANUARY) is True
        assert await unit.invoices.invoiced("acme", FEBRUARY) is False
        assert await unit.invoices.invoiced("globex", JANUARY) is False
        assert await unit.invoices.invoice("acme", JANUARY) == issued
    assert await adapter.queries.invoice("acme", JANUARY) == issued
    assert [line.adjustment_of for line in issued.lines] == [None, None, "2024-12"]
    assert issued.total == Decimal("13.860000")


async def test_an_invoice_is_issued_once_and_announced(adapter: Adapter) -> None:
    issued = invoice("acme", JANUARY, [], issued_at=FEBRUARY.start)
    closing = Closing(requested=True, caller=Caller("alice", "", "tok-1"))
    async with adapter.uow.begin() as unit:
        await unit.invoices.record_invoice(issued, closing)
    with pytest.raises(LedgerConflict):
        async with adapter.uow.begin() as unit:
            await unit.invoices.record_invoice(issued)
    outbox = await adapter.store.pending_outbox()
    assert [(r.topic, r.key, r.event_name) for r in outbox] == [("billing.events", b"acme", "InvoiceIssued")]
    [event] = await adapter.store.read("billing-acme")
    record = decode(event.payload)[1]
    # Who closed the period travels with the invoice (the audit trail's "close period").
    assert (event.event_name, record["closed_by"]) == ("InvoiceIssued", "request")
    assert record["principal"] == {"subject": "alice", "tenant": "", "token_id": "tok-1"}


async def test_unbilled_periods_are_those_ended_with_charges_and_no_invoice(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        await charge(unit, 1, "globex")
        await charge(unit, 2, "acme")
        await charge(unit, 3, "acme")
        await charge(unit, 4, "acme", start=FEBRUARY.start)
    async with adapter.uow.begin() as unit:
        assert await unit.invoices.unbilled_periods(JANUARY.end - timedelta(seconds=1)) == []
        assert await unit.invoices.unbilled_periods(JANUARY.end) == [
            ("acme", JANUARY.start),
            ("globex", JANUARY.start),
        ]
        await unit.invoices.record_invoice(invoice("acme", JANUARY, [], issued_at=FEBRUARY.start))
    async with adapter.uow.begin() as unit:
        assert await unit.invoices.unbilled_periods(FEBRUARY.end) == [
            ("globex", JANUARY.start),
            ("acme", FEBRUARY.start),
        ]


async def test_invoiced_periods_of_several_tenants_at_once(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        await unit.invoices.record_invoice(invoice("acme", JANUARY, [], issued_at=FEBRUARY.start))
    async with adapter.uow.begin() as unit:
        asked = {("acme", JANUARY), ("acme", FEBRUARY), ("globex", JANUARY)}
        assert await unit.invoices.invoiced_of(asked) == {("acme", JANUARY)}
        assert await unit.invoices.invoiced_of(set()) == set()
