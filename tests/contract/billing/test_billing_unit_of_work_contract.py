"""Unit-of-work contract: the four ports commit together with the tracked offset, or not at all."""

from __future__ import annotations

from decimal import Decimal

import pytest
from billing_contract_kit import STANDARD, Adapter, billed, usage

from suanli.eventstore import AlreadyProcessed


async def test_a_unit_that_raises_leaves_nothing(adapter: Adapter) -> None:
    parked, rated = usage(1), usage(2)
    with pytest.raises(RuntimeError):
        async with adapter.uow.begin() as unit:
            await unit.terms.record_job_terms("job-1", "acme", STANDARD)
            await unit.parking.park(parked)
            await unit.ledger.claim_usage(rated.event_id)
            await unit.ledger.record_charges(billed(rated))
            raise RuntimeError("effect failed")
    async with adapter.uow.begin() as unit:
        assert await unit.terms.job_terms("job-1") is None
        assert await unit.parking.parked(job_id="job-1") == []
        assert await unit.ledger.claim_usage(rated.event_id) is True  # the claim rolled back too
    assert await adapter.queries.balance("tenant:acme:receivable") == Decimal(0)
    assert await adapter.store.pending_outbox() == []


async def test_a_tracked_record_is_applied_once(adapter: Adapter) -> None:
    async with adapter.uow.tracked("billing", "usage.metered", 0, 5) as unit:
        await unit.parking.park(usage(1))
    with pytest.raises(AlreadyProcessed):
        async with adapter.uow.tracked("billing", "usage.metered", 0, 5) as unit:
            await unit.parking.park(usage(2))
    async with adapter.uow.begin() as unit:
        assert await unit.parking.parked(job_id="job-1") == [usage(1)]


async def test_a_tracked_record_is_recognised_by_its_event_id(adapter: Adapter) -> None:
    event_id = usage(1).event_id
    async with adapter.uow.tracked("billing", "usage.metered", 0, 7, event_id=event_id) as unit:
        await unit.parking.park(usage(1))
    # The broker restarted and numbers offsets from 0 again: the id still tells the redelivery.
    with pytest.raises(AlreadyProcessed):
        async with adapter.uow.tracked("billing", "usage.metered", 0, 0, event_id=event_id):
            pass


async def test_the_offset_of_a_failed_effect_is_not_claimed(adapter: Adapter) -> None:
    with pytest.raises(RuntimeError):
        async with adapter.uow.tracked("billing", "usage.metered", 0, 5) as unit:
            await unit.parking.park(usage(1))
            raise RuntimeError("effect failed")
    async with adapter.uow.tracked("billing", "usage.metered", 0, 5) as unit:
        assert await unit.parking.parked(job_id="job-1") == []


async def test_a_tracked_batch_commits_its_records_together_and_sees_its_own_writes(adapter: Adapter) -> None:
    first, second = usage(1), usage(2)
    async with adapter.uow.tracked_batch("billing") as batch:
        assert await batch.tracking.claim("jobs.events", 0, 3, event_id="submitted-1")
        await batch.unit.terms.record_job_terms("job-1", "acme", STANDARD)
        for n, u in enumerate((first, second)):
            assert await batch.tracking.claim("usage.metered", 0, n, event_id=u.event_id)
            assert await batch.unit.terms.job_terms("job-1") == STANDARD  # written earlier in the batch
            assert await batch.unit.ledger.claim_usage(u.event_id)
            await batch.unit.ledger.record_charges(billed(u))  # one tenant stream, versions chained
        assert not await batch.tracking.claim("usage.metered", 1, 9, event_id=first.event_id)
    assert await adapter.queries.balance("tenant:acme:receivable") > Decimal(0)
    assert len(await adapter.store.pending_outbox()) == 2
    with pytest.raises(AlreadyProcessed):
        async with adapter.uow.tracked("billing", "usage.metered", 0, 0, event_id=second.event_id):
            pass


async def test_a_tracked_batch_that_raises_leaves_nothing(adapter: Adapter) -> None:
    rated = usage(1)
    with pytest.raises(RuntimeError):
        async with adapter.uow.tracked_batch("billing") as batch:
            assert await batch.tracking.claim("usage.metered", 0, 0, event_id=rated.event_id)
            await batch.unit.terms.record_job_terms("job-1", "acme", STANDARD)
            await batch.unit.ledger.claim_usage(rated.event_id)
            await batch.unit.ledger.record_charges(billed(rated))
            raise RuntimeError("a later record's effect failed")
    assert await adapter.queries.balance("tenant:acme:receivable") == Decimal(0)
    assert await adapter.store.pending_outbox() == []
    async with adapter.uow.tracked("billing", "usage.metered", 0, 0, event_id=rated.event_id) as unit:
        assert await unit.terms.job_terms("job-1") is None
