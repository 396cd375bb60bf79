"""Ledger port contract: usage claimed once, charges recorded once with balanced entries and their
ChargeRecorded events, reversals at most once, totals per device class and usage period."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from decimal import Decimal

import pytest
from billing_contract_kit import CALENDAR, FEBRUARY, JAN, JANUARY, Adapter, billed, invoice, usage

from suanli.billing.domain.invoices import ChargeTotal
from suanli.billing.domain.ledger import BilledCharge
from suanli.billing.service_layer.ports import LedgerConflict, LedgerUnit


async def record(unit: LedgerUnit, charges: list[BilledCharge]) -> list[BilledCharge]:
    for usage_event_id in {b.charge.usage_event_id for b in charges if b.charge.usage_event_id}:
        await unit.ledger.claim_usage(usage_event_id)
    await unit.ledger.record_charges(charges)
    return charges


async def test_usage_is_claimed_once(adapter: Adapter) -> None:
    u = usage(1)
    async with adapter.uow.begin() as unit:
        assert await unit.ledger.claim_usage(u.event_id) is True
        assert await unit.ledger.claim_usage(u.event_id) is False
    async with adapter.uow.begin() as unit:
        assert await unit.ledger.claim_usage(u.event_id) is False
        assert await unit.ledger.claim_usage(usage(2).event_id) is True


async def test_a_recorded_charge_reads_back_as_it_was_billed(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        [charge] = await record(unit, billed(usage(1)))
    async with adapter.uow.begin() as unit:
        assert await unit.ledger.billed_charge(charge.charge.charge_id) == charge
        assert await unit.ledger.billed_charge(usage(9).event_id) is None
    assert charge.charge.amount == Decimal("6.000000")  # 6000 CU-s at 3.60 per CU-hour


async def test_entries_balance_per_charge(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        charges = await record(unit, billed(usage(1, h200="6000", cpu="3600")))
    total = sum(b.charge.amount for b in charges)
    assert await adapter.queries.balance("tenant:acme:receivable") == total == Decimal("7.800000")
    assert await adapter.queries.balance("revenue:compute:cn-east:h200") == Decimal("-6.000000")
    assert await adapter.queries.balance("revenue:compute:cn-east:cpu") == Decimal("-1.800000")


async def test_each_charge_is_announced_on_the_tenants_stream_through_the_outbox(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        first = await record(unit, billed(usage(1, h200="6000", cpu="3600")))
        # A second record in the same unit continues the stream (versions chain inside a unit).
        second = await record(unit, billed(usage(2)))
    async with adapter.uow.begin() as unit:
        third = await record(unit, billed(usage(3, tenant="globex")))
    events = await adapter.store.read("billing-acme")
    assert [(e.version, e.event_name) for e in events] == [
        (1, "ChargeRecorded"),
        (2, "ChargeRecorded"),
        (3, "ChargeRecorded"),
    ]
    assert [e.event_name for e in await adapter.store.read("billing-globex")] == ["ChargeRecorded"]
    outbox = await adapter.store.pending_outbox()
    assert [(r.topic, r.key, r.event_name) for r in outbox] == [
        ("billing.events", b"acme", "ChargeRecorded"),
        ("billing.events", b"acme", "ChargeRecorded"),
        ("billing.events", b"acme", "ChargeRecorded"),
        ("billing.events", b"globex", "ChargeRecorded"),
    ]
    assert len(first) + len(second) + len(third) == 4


async def test_a_charge_is_recorded_once(adapter: Adapter) -> None:
    charges = billed(usage(1))
    async with adapter.uow.begin() as unit:
        await record(unit, charges)
    with pytest.raises(LedgerConflict):
        async with adapter.uow.begin() as unit:
            await unit.ledger.record_charges(charges)
    assert await adapter.queries.balance("tenant:acme:receivable") == Decimal("6.000000")


async def test_a_charge_needs_its_usage_claimed(adapter: Adapter) -> None:
    with pytest.raises(LedgerConflict):
        async with adapter.uow.begin() as unit:
            await unit.ledger.record_charges(billed(usage(1)))


async def test_a_charge_is_reversed_at_most_once(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        [original] = await record(unit, billed(usage(1)))
        assert await unit.ledger.reversed(original.charge.charge_id) is False
    reversal = BilledCharge(original.charge.reversal(), original.usage_period, original.billing_period)
    async with adapter.uow.begin() as unit:
        await unit.ledger.record_charges([reversal])
    async with adapter.uow.begin() as unit:
        assert await unit.ledger.reversed(original.charge.charge_id) is True
        assert await unit.ledger.billed_charge(reversal.charge.charge_id) == reversal
    # A second reversal under another id is refused all the same.
    again = replace(reversal, charge=replace(reversal.charge, charge_id=usage(7).event_id))
    with pytest.raises(LedgerConflict):
        async with adapter.uow.begin() as unit:
            await unit.ledger.record_charges([again])
    assert await adapter.queries.balance("tenant:acme:receivable") == 0


async def test_no_charge_is_billed_into_an_invoiced_period(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        await unit.invoices.record_invoice(invoice("acme", JANUARY, [], issued_at=FEBRUARY.start))
    with pytest.raises(LedgerConflict):
        async with adapter.uow.begin() as unit:
            await record(unit, billed(usage(1), billing_period=JANUARY))
    async with adapter.uow.begin() as unit:
        # Late January usage goes to February (the use case picks the period; the ledger only refuses).
        await record(unit, billed(usage(1), billing_period=FEBRUARY))


async def test_totals_per_device_class_and_usage_period_of_one_billing_period(adapter: Adapter) -> None:
    async with adapter.uow.begin() as unit:
        await record(unit, billed(usage(1, h200="6000", cpu="3600")))
        await record(unit, billed(usage(2, start=JAN + timedelta(minutes=1))))
        await record(unit, billed(usage(3, start=JAN - timedelta(days=31)), billing_period=JANUARY))  # late
        await record(unit, billed(usage(4, start=FEBRUARY.start)))  # another billing period
        await record(unit, billed(usage(5, tenant="globex")))  # another tenant
    async with adapter.uow.begin() as unit:
        totals = await unit.ledger.charge_totals("acme", JANUARY)
    december = CALENDAR.period_of(JAN - timedelta(days=31))
    assert sorted(totals, key=lambda t: (t.usage_period.start, t.device_class)) == [
        ChargeTotal("h200", december, Decimal("6000.000000"), Decimal("6.000000")),
        ChargeTotal("cpu", JANUARY, Decimal("3600.000000"), Decimal("1.800000")),
        ChargeTotal("h200", JANUARY, Decimal("12000.000000"), Decimal("12.000000")),
    ]


async def test_usage_claimed_several_at_once_is_claimed_once(adapter: Adapter) -> None:
    ids = [usage(n).event_id for n in range(4)]
    async with adapter.uow.begin() as unit:
        assert await unit.ledger.claim_usage(ids[0]) is True
        assert await unit.ledger.claim_usages([ids[0], ids[1], ids[2], ids[1]]) == {ids[1], ids[2]}
        assert await unit.ledger.claim_usages([]) == set()
    async with adapter.uow.begin() as unit:
        assert await unit.ledger.claim_usages(ids) == {ids[3]}
        assert await unit.ledger.claim_usage(ids[2]) is False


async def test_each_charge_event_continues_the_trace_given_for_it(adapter: Adapter) -> None:
    traced = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    async with adapter.uow.begin() as unit:
        first, second = billed(usage(1)), billed(usage(2, tenant="globex"))
        for u in (usage(1), usage(2)):
            await unit.ledger.claim_usage(u.event_id)
        await unit.ledger.record_charges([*first, *second], {first[0].charge.charge_id: traced})
    outbox = await adapter.store.pending_outbox()
    assert [(r.key, r.traceparent) for r in outbox] == [(b"acme", traced), (b"globex", None)]
