"""The consumer's handler on the in-memory unit of work: routing, once-only effects, what is retried."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

import pytest
from billing_unit_kit import JAN, Billing, billing
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli.billing.adapters.memory import InMemoryUnitOfWork
from suanli.billing.adapters.metrics import BillingMetrics
from suanli.billing.domain.errors import InvalidUsage
from suanli.billing.domain.usage import JobTerms
from suanli.billing.entrypoints.consumer import MAX_BATCH, BillingHandler, UnexpectedEvent
from suanli.billing.service_layer.ports import LedgerUnit, TrackedBatch
from suanli.bus import ConsumedEvent
from suanli.infra.transient import RetriableError
from suanli.telemetry.names import BILLING_CHARGES

TOPICS = {"usage.metered": "u", "jobs.events": "j", "capacity.nodes": "c"}


def event(
    topic: str, offset: int, name: str, record: dict[str, Any], tombstone: bool = False
) -> ConsumedEvent:
    return ConsumedEvent(topic, 0, offset, None, name, record, (), Context(), 0, tombstone)


def usage_record(n: int, **changes: Any) -> dict[str, Any]:
    return {
        "event_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"usage/{n}")),
        "tenant": "acme",
        "job_id": "job-1",
        "task_id": "job-1/t0",
        "node_id": "n-east",
        "window_start": JAN,
        "window_end": JAN + timedelta(seconds=60),
        "cu_seconds": {"h200": 6000.0},
    } | changes


def job_submitted(offset: int) -> ConsumedEvent:
    record = {
        "event_id": str(uuid.uuid4()),
        "job_id": "job-1",
        "tenant": "acme",
        "priority": 10,
        "preemptible": False,
    }
    return event("j", offset, "JobSubmitted", record)


def node_capacity(offset: int, region: str = "cn-east") -> ConsumedEvent:
    record = {"event_id": str(uuid.uuid4()), "node_id": "n-east", "region": region}
    return event("c", offset, "NodeCapacityChanged", record)


def handler(b: Billing) -> BillingHandler:
    return BillingHandler(b.service, b.uow, "billing", TOPICS)


async def test_usage_facts_and_redeliveries_end_in_one_charge() -> None:
    b = billing()
    handle = handler(b)
    await handle(event("u", 0, "UsageMetered", usage_record(1)))
    await handle(job_submitted(0))
    await handle(node_capacity(0))
    await handle(event("u", 0, "UsageMetered", usage_record(1)))  # the same record again
    await handle(event("u", 1, "UsageMetered", usage_record(1)))  # re-published at a new offset
    assert len(b.uow.tables.charges) == 1
    assert str(await b.receivable("acme")) == "6.000000"


async def test_a_repeated_region_needs_no_transaction_but_a_new_one_does() -> None:
    b = billing()
    handle = handler(b)
    await handle(node_capacity(0))
    before = await b.uow.store.read_all()
    await handle(node_capacity(1))
    assert b.uow.tables.node_regions == {"n-east": "cn-east"}
    await handle(node_capacity(2, "cn-west"))
    assert b.uow.tables.node_regions == {"n-east": "cn-west"}
    assert await b.uow.store.read_all() == before  # facts are state, not events


async def test_other_job_events_and_tombstones_are_ignored() -> None:
    b = billing()
    handle = handler(b)
    await handle(event("j", 0, "JobCompleted", {"job_id": "job-1"}))
    await handle(event("c", 0, "", {}, tombstone=True))
    assert b.uow.tables.job_terms == {} and b.uow.tables.node_regions == {}


async def test_what_cannot_be_billed_is_raised_as_it_is_for_the_dead_letter_topic() -> None:
    b = billing()
    handle = handler(b)
    with pytest.raises(UnexpectedEvent):
        await handle(event("u", 0, "JobSubmitted", {}))
    with pytest.raises(UnexpectedEvent):
        await handle(event("elsewhere", 0, "UsageMetered", usage_record(1)))
    with pytest.raises(InvalidUsage):
        await handle(event("u", 1, "UsageMetered", usage_record(1, window_end=JAN)))


async def test_charges_are_counted_per_tenant_from_zero_once_and_after_their_commit() -> None:
    reader = InMemoryMetricReader()
    b = billing()
    metrics = BillingMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    handle = BillingHandler(b.service, b.uow, "billing", TOPICS, metrics)

    def charges() -> dict[tuple[tuple[str, Any], ...], Any]:
        data = reader.get_metrics_data()
        return {
            tuple(sorted(p.attributes.items())): p.value
            for rm in (data.resource_metrics if data else ())
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == BILLING_CHARGES
            for p in m.data.data_points
        }

    await handle(event("u", 0, "UsageMetered", usage_record(1)))  # parked: its job is not known yet
    await handle(job_submitted(0))
    assert charges() == {(("tenant", "acme"),): 0}  # served before the tenant's first charge
    await handle(node_capacity(0))  # releases the parked usage
    await handle(event("u", 1, "UsageMetered", usage_record(2)))
    await handle(event("u", 1, "UsageMetered", usage_record(2)))  # redelivered: counted once
    assert charges() == {(("tenant", "acme"),): 2}


@dataclass
class SpiedUnitOfWork:
    """The in-memory unit of work, counting group commits; a job's terms can be made to fail."""

    inner: InMemoryUnitOfWork
    batches: int = 0
    failing_job: str | None = None
    down: bool = False

    def tracked(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.tracked(*args, **kwargs)

    def begin(self) -> Any:
        return self.inner.begin()

    @asynccontextmanager
    async def tracked_batch(self, group: str) -> AsyncIterator[TrackedBatch]:
        if self.down:
            raise ConnectionResetError("the database went away")
        self.batches += 1
        async with self.inner.tracked_batch(group) as batch:
            yield replace(batch, unit=self._failing(batch.unit))

    def _failing(self, unit: LedgerUnit) -> LedgerUnit:
        terms, failing = unit.terms, self.failing_job

        class Terms:
            def __getattr__(self, name: str) -> Any:
                return getattr(terms, name)

            async def job_terms(self, job_id: str) -> JobTerms | None:
                if job_id == failing:
                    raise UnexpectedEvent(f"{job_id}: cannot be priced")
                return await terms.job_terms(job_id)

            async def job_terms_of(self, job_ids: Collection[str]) -> dict[str, JobTerms]:
                if failing in job_ids:
                    raise UnexpectedEvent(f"{failing}: cannot be priced")
                return await terms.job_terms_of(job_ids)

        return replace(unit, terms=Terms())  # type: ignore[arg-type]


def spied(b: Billing, **changes: Any) -> tuple[BillingHandler, SpiedUnitOfWork]:
    uow = SpiedUnitOfWork(b.uow, **changes)
    return BillingHandler(b.service, uow, "billing", TOPICS), uow


async def test_records_that_arrive_together_share_one_commit() -> None:
    b = billing()
    handle, uow = spied(b)
    await handle(job_submitted(0))
    await handle(node_capacity(0))
    assert uow.batches == 2
    # As the consumer starts a fetch's records (pipelined): all at once, in offset order.
    records = [event("u", n, "UsageMetered", usage_record(n)) for n in range(20)]
    await asyncio.gather(*(handle(r) for r in records), handle(records[3]))  # and one redelivered
    assert uow.batches == 3
    assert len(b.uow.tables.charges) == 20
    assert str(await b.receivable("acme")) == "120.000000"
    more = [event("u", n, "UsageMetered", usage_record(n)) for n in range(20, 20 + MAX_BATCH + 1)]
    await asyncio.gather(*(handle(r) for r in more))
    assert uow.batches == 3 + 2  # at most MAX_BATCH records per commit
    assert len(b.uow.tables.charges) == 20 + MAX_BATCH + 1


async def test_a_record_that_fails_leaves_the_batch_and_the_others_commit_without_it() -> None:
    b = billing()
    handle, uow = spied(b, failing_job="job-bad")
    await handle(job_submitted(0))
    await handle(node_capacity(0))
    bad = event("u", 1, "UsageMetered", usage_record(1, job_id="job-bad"))
    good = [event("u", n, "UsageMetered", usage_record(n)) for n in (0, 2, 3)]
    outcomes = await asyncio.gather(*(handle(r) for r in (good[0], bad, *good[1:])), return_exceptions=True)
    assert [type(o).__name__ for o in outcomes] == ["NoneType", "UnexpectedEvent", "NoneType", "NoneType"]
    assert len(b.uow.tables.charges) == 3  # the good ones, once each, after the batch ran again
    # Applied together, then one by one: the first pass meets the failing record, the second leaves it out.
    assert uow.batches == 2 + 1 + 2
    assert b.uow.tables.parked == {}


async def test_a_database_outage_fails_the_whole_batch_as_retriable_and_commits_nothing() -> None:
    b = billing()
    handle, uow = spied(b, down=True)
    records = [event("u", n, "UsageMetered", usage_record(n)) for n in range(3)]
    outcomes = await asyncio.gather(*(handle(r) for r in records), return_exceptions=True)
    assert all(isinstance(o, RetriableError) for o in outcomes)
    assert b.uow.tables.parked == {} and b.uow.tables.charges == []
    uow.down = False  # the bus retries each record in place: applied once the database is back
    await asyncio.gather(*(handle(r) for r in records))
    assert len(b.uow.tables.parked) == 3
