"""The use cases on the in-memory adapters: parking and release, once-only rating, periods and reversals."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from billing_unit_kit import CHEAP, JAN, STANDARD, Billing, billing, usage

from suanli.billing.domain.errors import UnpricedUsage
from suanli.billing.domain.periods import Calendar
from suanli.billing.domain.usage import Usage
from suanli.billing.service_layer.billing import Submission
from suanli.billing.service_layer.errors import AlreadyReversed, ChargeNotFound, PeriodNotEnded
from suanli.errors import FailedPrecondition, NotFound

JANUARY = Calendar().period_of(JAN)


async def facts(b: Billing) -> None:
    async with b.uow.begin() as unit:
        await b.service.job_submitted(unit, "job-1", "acme", STANDARD)
        await b.service.node_located(unit, "n-east", "cn-east")


async def metered(b: Billing, *usages: Usage) -> Counter[str]:
    """Charges recorded per tenant."""
    recorded: Counter[str] = Counter()
    for u in usages:
        async with b.uow.begin() as unit:
            recorded += await b.service.usage_metered(unit, u)
    return recorded


async def test_usage_before_its_facts_is_parked_then_rated_when_they_arrive() -> None:
    b = billing()
    assert await metered(b, usage(1), usage(2, start=JAN + timedelta(minutes=1))) == Counter()
    assert len(b.uow.tables.parked) == 2
    async with b.uow.begin() as unit:
        # The job is known but not the node: still parked.
        assert await b.service.job_submitted(unit, "job-1", "acme", STANDARD) == Counter()
    async with b.uow.begin() as unit:
        assert await b.service.node_located(unit, "n-east", "cn-east") == Counter(acme=2)
    assert b.uow.tables.parked == {}
    assert await b.receivable("acme") == Decimal("12.000000")


async def test_usage_is_rated_once_whatever_the_redeliveries() -> None:
    b = billing()
    await facts(b)
    assert await metered(b, usage(1)) == Counter(acme=1)
    assert await metered(b, usage(1)) == Counter()
    assert await b.receivable("acme") == Decimal("6.000000")


async def test_a_job_submitted_again_keeps_its_first_terms() -> None:
    b = billing()
    await facts(b)
    async with b.uow.begin() as unit:
        await b.service.job_submitted(unit, "job-1", "acme", CHEAP)
    await metered(b, usage(1))
    assert await b.receivable("acme") == Decimal("6.000000")  # standard, not best-effort


async def test_a_window_across_a_period_boundary_is_billed_in_both_periods() -> None:
    b = billing()
    await facts(b)
    await metered(b, usage(1, start=JANUARY.end - timedelta(seconds=30)))
    billed = b.uow.tables.charges
    assert [(c.usage_period.label, c.billing_period.label, c.charge.amount) for c in billed] == [
        ("2025-01", "2025-01", Decimal("3.000000")),
        ("2025-02", "2025-02", Decimal("3.000000")),
    ]


async def test_closing_a_period_issues_one_invoice_and_late_usage_becomes_an_adjustment() -> None:
    b = billing()
    await facts(b)
    await metered(b, usage(1))
    running = datetime(2025, 1, 31, tzinfo=UTC)
    with pytest.raises(PeriodNotEnded) as early:
        async with b.uow.begin() as unit:
            await b.service.close_period(unit, "acme", JANUARY, running)
    assert isinstance(early.value, FailedPrecondition)
    assert str(early.value) == "period: period 2025-01 runs until 2025-02-01T00:00:00+00:00"

    closed = JANUARY.end + timedelta(minutes=20)
    async with b.uow.begin() as unit:
        assert await b.service.periods_due(unit, JANUARY.end + timedelta(minutes=10)) == []
        assert await b.service.periods_due(unit, closed) == [("acme", JANUARY)]
    async with b.uow.begin() as unit:
        issued = await b.service.close_period(unit, "acme", JANUARY, closed)
    async with b.uow.begin() as unit:
        assert await b.service.close_period(unit, "acme", JANUARY, closed + timedelta(days=1)) == issued
        assert await b.service.periods_due(unit, closed) == []
    assert issued.total == Decimal("6.000000")

    await metered(b, usage(2, start=JAN + timedelta(hours=1)))
    late = b.uow.tables.charges[-1]
    assert (late.usage_period.label, late.billing_period.label, late.adjustment) == (
        "2025-01",
        "2025-02",
        True,
    )
    february = Calendar().next(JANUARY)
    async with b.uow.begin() as unit:
        invoice = await b.service.close_period(unit, "acme", february, february.end)
    assert [(ln.description, ln.adjustment_of, ln.amount) for ln in invoice.lines] == [
        ("adjustment: late h200 usage of 2025-01", "2025-01", Decimal("6.000000"))
    ]


async def test_a_period_with_no_charges_closes_to_a_zero_invoice() -> None:
    b = billing()
    async with b.uow.begin() as unit:
        invoice = await b.service.close_period(unit, "acme", JANUARY, JANUARY.end)
    assert (invoice.lines, invoice.total) == ((), Decimal(0))


async def test_a_reversal_negates_the_charge_once_in_the_first_open_period() -> None:
    b = billing()
    await facts(b)
    await metered(b, usage(1))
    [original] = b.uow.tables.charges
    async with b.uow.begin() as unit:
        await b.service.close_period(unit, "acme", JANUARY, JANUARY.end)
    async with b.uow.begin() as unit:
        reversal = await b.service.reverse_charge(unit, original.charge.charge_id)
    assert (reversal.amount, reversal.reverses) == (Decimal("-6.000000"), original.charge.charge_id)
    assert b.uow.tables.charges[-1].billing_period.label == "2025-02"
    assert await b.receivable("acme") == 0
    for charge_id in (original.charge.charge_id, reversal.charge_id):
        with pytest.raises(AlreadyReversed):
            async with b.uow.begin() as unit:
                await b.service.reverse_charge(unit, charge_id)
    with pytest.raises(ChargeNotFound) as missing:
        async with b.uow.begin() as unit:
            await b.service.reverse_charge(unit, "00000000-0000-0000-0000-000000000000")
    assert isinstance(missing.value, NotFound)


def _mixed_inputs(seed: int) -> list[Usage | Submission]:
    """Usage of three jobs on two nodes (one never located), the jobs' submissions among them, repeats."""
    rng = random.Random(seed)
    starts = [JAN, JANUARY.end - timedelta(seconds=30), JANUARY.end + timedelta(hours=2)]
    inputs: list[Usage | Submission] = []
    for _ in range(40):
        j, n, s = rng.randrange(3), rng.choice([0, 0, 1]), rng.randrange(3)
        job, node = f"job-{j + 1}", ["n-east", "n-lost"][n]
        # Usage events of the same job, node and window are one event: a repeat is a redelivery.
        inputs.append(usage(200 + 9 * j + 3 * n + s, job=job, node=node, start=starts[s]))
        if rng.random() < 0.1:
            inputs.append(Submission(job, "acme", rng.choice([STANDARD, CHEAP])))
    return inputs


async def _prepared() -> Billing:
    """Facts before the batch: job-1 and n-east known, January invoiced, usage of job-2 parked."""
    b = billing()
    await facts(b)
    async with b.uow.begin() as unit:
        await b.service.close_period(unit, "acme", JANUARY, JANUARY.end + timedelta(hours=1))
    await metered(b, usage(100, job="job-2"), usage(101, job="job-3", node="n-lost"))
    return b


@pytest.mark.parametrize("seed", range(5))
async def test_a_batch_charges_what_its_inputs_charge_one_by_one(seed: int) -> None:
    inputs = _mixed_inputs(seed)
    alone, together = await _prepared(), await _prepared()
    one_by_one: Counter[str] = Counter()
    for x in inputs:
        async with alone.uow.begin() as unit:
            if isinstance(x, Submission):
                one_by_one += await alone.service.job_submitted(unit, x.job_id, x.tenant, x.terms)
            else:
                one_by_one += await alone.service.usage_metered(unit, x)
    async with together.uow.begin() as unit:
        charged = await together.service.apply_batch(unit, inputs, [None] * len(inputs))
    assert sum(charged, Counter()) == one_by_one

    def ledger(b: Billing) -> list[tuple[str, str, str, Decimal]]:
        return sorted(
            (c.charge.charge_id, c.usage_period.label, c.billing_period.label, c.charge.amount)
            for c in b.uow.tables.charges
        )

    assert ledger(together) == ledger(alone)
    assert set(together.uow.tables.parked) == set(alone.uow.tables.parked)
    assert together.uow.tables.rated == alone.uow.tables.rated
    assert together.uow.tables.job_terms == alone.uow.tables.job_terms


async def test_a_batch_with_an_input_that_cannot_be_rated_writes_nothing() -> None:
    b = await _prepared()
    unpriced = usage(7, start=datetime(2024, 12, 1, tzinfo=UTC))  # before the price book's first version
    before = (list(b.uow.tables.charges), set(b.uow.tables.rated), dict(b.uow.tables.parked))
    with pytest.raises(UnpricedUsage):
        async with b.uow.begin() as unit:
            await b.service.apply_batch(unit, [usage(6), unpriced], [None, None])
    assert (b.uow.tables.charges, b.uow.tables.rated, b.uow.tables.parked) == before
