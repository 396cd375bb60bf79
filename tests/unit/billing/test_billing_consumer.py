"""The consumer's handler on the in-memory unit of work: routing, once-only effects, what is retried."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from billing_unit_kit import JAN, Billing, billing
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli.billing.adapters.metrics import BillingMetrics
from suanli.billing.domain.errors import InvalidUsage
from suanli.billing.entrypoints.consumer import BillingHandler, UnexpectedEvent
from suanli.bus import ConsumedEvent
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
