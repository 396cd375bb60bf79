"""The consumer handler's lookups over the in-memory adapter: a fetch's records named by job id are looked up
in one query (the bus's `Prepare` hook), and a lookup made before an effect ran is not trusted after it."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from opentelemetry.context import Context
from test_serving_services import POLICY, SPEC

from suanli.bus import ConsumedEvent
from suanli.clock import ManualClock
from suanli.jobspec.ids import job_id_of_request
from suanli.resources.catalogue import default_catalogue
from suanli.serving.adapters.memory import InMemoryServing
from suanli.serving.entrypoints.consumer import INPUTS, ServingHandler
from suanli.serving.service_layer.serving import ServingService

_offsets = itertools.count()


class CountedQueries:
    """The adapter's queries, counting the job lookups: one by one and several at once."""

    def __init__(self, inner: InMemoryServing) -> None:
        self._inner = inner
        self.one = 0
        self.many = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def knows_job(self, job_id: str) -> bool:
        self.one += 1
        return await self._inner.knows_job(job_id)

    async def known_jobs(self, job_ids: Collection[str]) -> set[str]:
        self.many += 1
        return await self._inner.known_jobs(job_ids)


def started(job_id: str) -> ConsumedEvent:
    record = {"event_id": str(uuid.uuid4()), "job_id": job_id, "node_id": "n1", "attempt": 1}
    return ConsumedEvent("tasks.lifecycle", 0, next(_offsets), None, "TaskStarted", record, (), Context(), 0)


async def _serving() -> tuple[InMemoryServing, ServingHandler, CountedQueries, str]:
    counter = itertools.count(1)
    store = InMemoryServing(
        ManualClock(datetime(2026, 12, 1, tzinfo=UTC)), lambda: uuid.UUID(int=next(counter))
    )
    service = ServingService(default_catalogue(), POLICY, lambda: "svc-1")
    async with store.begin() as unit:
        await service.create(
            unit, "acme/nlp", {**SPEC, "min_replicas": 1, "regions": ["cn-east"]}, 0, "alice@acme"
        )
    queries = CountedQueries(store)
    handler = ServingHandler(service, store, queries, "serving", {name: name for name in INPUTS})  # type: ignore[arg-type]
    return store, handler, queries, job_id_of_request("acme", "serving-svc-1-r1")


async def test_a_fetchs_records_about_other_jobs_cost_one_lookup() -> None:
    _, handler, queries, _ = await _serving()
    batch = [started(f"job-{n}") for n in range(20)]
    await handler.prepare(batch)
    for event in batch:
        await handler(event)
    assert (queries.many, queries.one) == (1, 0)
    await handler(started("job-not-shown"))  # not in the lookup: asked on its own
    assert queries.one == 1


async def test_a_lookup_made_before_an_effect_is_asked_again_after_it() -> None:
    store, handler, queries, replica_job = await _serving()
    batch = [started(replica_job), started("job-1")]
    await handler.prepare(batch)
    await handler(batch[0])  # the replica's job: its effect runs
    assert queries.one == 0
    stored = await store.get("acme", "chat")
    assert stored is not None and stored.service.replicas["svc-1-r1"].job_id == replica_job
    await handler(batch[1])  # the effect may have made a job ours: looked up again
    assert (queries.many, queries.one) == (1, 1)
