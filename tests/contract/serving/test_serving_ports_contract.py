"""The serving ports' contract, each test run against the in-memory and the PostgreSQL adapter.

Isolation: each PostgreSQL-backed test gets its own schema (`srvc_<random>`), migrated like the
service's, so tests can assert on the whole stream and outbox.
"""

from __future__ import annotations

import itertools
import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from suanli.clock import SteppingClock
from suanli.contracts import decode
from suanli.eventstore import AlreadyProcessed, EventStore, PostgresEventStore
from suanli.resources.catalogue import default_catalogue
from suanli.serving.adapters.memory import InMemoryServing
from suanli.serving.adapters.postgres import PostgresServing, PostgresServingQueries, migrate_serving
from suanli.serving.domain.autoscaling import ScaleDecision, ScalerInputs
from suanli.serving.domain.service import ReplicaPolicy
from suanli.serving.service_layer.errors import ServiceExists
from suanli.serving.service_layer.ports import ExplainedDecision, ServingQueries, UnitOfWork
from suanli.serving.service_layer.serving import ServingService

START = datetime(2026, 12, 1, tzinfo=UTC)
TOPICS = ("services.events", "jobs.commands")
SPEC: dict[str, Any] = {
    "name": "chat",
    "model": "llama-2-7b",
    "resources": {"gpu": 0.5, "gpu_models": ["A100 80GB SXM"]},
    "min_replicas": 1,
    "max_replicas": 3,
    "target": {"concurrency": 4},
}


@dataclass
class Adapter:
    name: str
    uow: UnitOfWork
    queries: ServingQueries
    store: EventStore


def _ids() -> Any:
    counter = itertools.count(1)
    return lambda: uuid.UUID(int=next(counter))


@pytest.fixture(params=["memory", "postgres"])
async def adapter(request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[Adapter]:
    clock = SteppingClock(START)
    if request.param == "memory":
        memory = InMemoryServing(clock, _ids(), *TOPICS)
        yield Adapter("memory", memory, memory, memory.store)
        return
    store = await PostgresEventStore.connect(
        pg_dsn, schema=f"srvc_{secrets.token_hex(4)}", clock=clock, max_size=4
    )
    try:
        await migrate_serving(store)
        uow = PostgresServing(store, TOPICS, _ids(), clock)
        yield Adapter("postgres", uow, PostgresServingQueries(store.pool, store.schema), store)
    finally:
        await store.close()


def _service() -> ServingService:
    serial = itertools.count(1)
    return ServingService(default_catalogue(), ReplicaPolicy(), lambda: f"svc-{next(serial)}")


async def test_a_recorded_service_is_found_by_name_request_job_and_replica(adapter: Adapter) -> None:
    service = _service()
    async with adapter.uow.begin() as unit:
        await service.create(unit, "acme", SPEC, 2, "alice")
    async with adapter.uow.begin() as unit:
        await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "")
        for found in (
            await unit.named("acme", "chat"),
            await unit.of_request("serving-svc-1-r2"),
            await unit.of_job("job-1"),
            await unit.of_replica("svc-1-r2"),
        ):
            assert found is not None and found.service_id == "svc-1" and found.desired == 2
        assert await unit.named("globex", "chat") is None and await unit.of_job("job-x") is None
    assert await adapter.queries.knows_job("job-1") and not await adapter.queries.knows_job("job-x")
    assert await adapter.queries.known_jobs(["job-1", "job-x"]) == {"job-1"}
    assert await adapter.queries.known_jobs(set()) == set()
    stream = await adapter.store.read("service-svc-1")
    assert [e.event_name for e in stream] == [
        "ServiceCreated",
        "ServiceScaled",
        "ReplicaRequested",
        "ReplicaRequested",
        "ReplicaSubmitted",
    ]
    outbox = await adapter.store.pending_outbox()
    assert [(r.topic, decode(r.value)[0]) for r in outbox][-3:] == [
        ("jobs.commands", "JobSubmissionRequested"),
        ("jobs.commands", "JobSubmissionRequested"),
        ("services.events", "ReplicaSubmitted"),
    ]


async def test_one_live_service_per_name_and_a_deleted_name_may_be_used_again(adapter: Adapter) -> None:
    service = _service()
    async with adapter.uow.begin() as unit:
        await service.create(unit, "acme", SPEC, 0, "")
    with pytest.raises(ServiceExists):
        async with adapter.uow.begin() as unit:
            await service.create(unit, "acme", SPEC, 0, "")
    assert await adapter.store.read("service-svc-2") == []  # rolled back whole
    async with adapter.uow.begin() as unit:
        await service.create(unit, "globex", SPEC, 0, "")  # another tenant: its own namespace
        await service.delete(unit, "acme", "chat", "")
        await service.create(unit, "acme", SPEC, 0, "")
    again = await adapter.queries.get("acme", "chat")
    assert again is not None and again.service.service_id == "svc-4" and again.service.state.value == "active"


async def test_pages_by_tenant_and_name(adapter: Adapter) -> None:
    service = _service()
    async with adapter.uow.begin() as unit:
        for tenant, name in (("acme", "b"), ("acme", "a"), ("globex", "c"), ("acme", "c")):
            await service.create(unit, tenant, {**SPEC, "name": name}, 0, "")
    first = await adapter.queries.page("acme", "", 2)
    assert [s.service.name for s in first.services] == ["a", "b"] and first.next_after == "acme/b"
    rest = await adapter.queries.page("acme", first.next_after, 2)
    assert [s.service.name for s in rest.services] == ["c"] and rest.next_after is None
    everyone = await adapter.queries.page(None, "", 10)
    assert [(s.service.tenant, s.service.name) for s in everyone.services] == [
        ("acme", "a"),
        ("acme", "b"),
        ("acme", "c"),
        ("globex", "c"),
    ]


async def test_a_tracked_record_is_applied_once(adapter: Adapter) -> None:
    service = _service()
    async with adapter.uow.begin() as unit:
        await service.create(unit, "acme", SPEC, 0, "")
    async with adapter.uow.tracked("serving", "jobs.replies", 0, 7, "ev-1") as unit:
        await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "")
    with pytest.raises(AlreadyProcessed):
        async with adapter.uow.tracked("serving", "jobs.replies", 0, 7, "ev-1") as unit:
            await service.job_answered(unit, "serving-svc-1-r1", True, "job-1", "OK", "")
    assert [e.event_name for e in await adapter.store.read("service-svc-1")][-1] == "ReplicaSubmitted"


def _decided(service_id: str, at_s: float, from_replicas: int, desired: int) -> ExplainedDecision:
    seen = ScalerInputs(at_s, 1, 0, 12.0, 2, 30, 2.0, 400.0, 150.0)
    decision = ScaleDecision(at_s, "kpa", 1, desired, "stable window", seen, (("stable_concurrency", 12.0),))
    return ExplainedDecision(service_id, START + timedelta(seconds=at_s), from_replicas, decision)


async def test_decisions_keep_the_last_changes_and_the_latest_hold_newest_first(adapter: Adapter) -> None:
    service = _service()
    async with adapter.uow.begin() as unit:
        await service.create(unit, "acme", SPEC, 0, "")
        await service.create(unit, "acme", {**SPEC, "name": "chat-2"}, 0, "")
    async with adapter.uow.begin() as unit:
        await unit.explained([_decided("svc-1", 1, 1, 2), _decided("svc-2", 1, 1, 1)], keep=2)
    async with adapter.uow.begin() as unit:
        await unit.explained([_decided("svc-1", 2, 2, 2)], keep=2)  # a hold
        await unit.explained([_decided("svc-1", 3, 2, 3)], keep=2)
        await unit.explained([_decided("svc-1", 4, 3, 3)], keep=2)  # the newer hold replaces the first
    with pytest.raises(RuntimeError):  # a unit that fails keeps nothing
        async with adapter.uow.begin() as unit:
            await unit.explained([_decided("svc-1", 5, 3, 1)], keep=2)
            raise RuntimeError("the transaction fails")
    async with adapter.uow.begin() as unit:
        await unit.explained([_decided("svc-1", 6, 3, 1)], keep=2)  # a third change: the first is dropped

    kept = await adapter.queries.decisions("svc-1", 10)
    assert [(d.decision.at_s, d.changed) for d in kept] == [(6, True), (4, False), (3, True)]
    assert kept[0] == _decided("svc-1", 6, 3, 1)  # inputs, figures and reason read back whole
    assert [d.decision.at_s for d in await adapter.queries.decisions("svc-1", 1)] == [6]
    assert [(d.decision.at_s, d.changed) for d in await adapter.queries.decisions("svc-2", 10)] == [
        (1, False)
    ]
