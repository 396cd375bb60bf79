"""Serving's ports in memory, over the kernel's in-memory event store: for unit tests, never the wiring.

The states are JSON-like dicts (`records.state_of`), as PostgreSQL keeps them, so a unit reads back
what a committed unit wrote and nothing of a unit that raised.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from suanli.clock import Clock
from suanli.eventstore import InMemoryEventStore, Transaction
from suanli.serving.adapters import records
from suanli.serving.domain.service import Decision, Service, ServiceCreated, ServiceState
from suanli.serving.service_layer.errors import ServiceExists
from suanli.serving.service_layer.ports import ExplainedDecision, ServicePage, StoredService


class _Rows:
    """The state rows: service id -> (state, created, updated)."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[dict[str, Any], datetime, datetime]] = {}
        self.jobs: set[str] = set()  # every replica job ever recorded, as replica_keys keeps them
        self.decisions: list[ExplainedDecision] = []  # oldest first, as autoscaler_decisions keeps them


class InMemoryServices:
    def __init__(
        self,
        tx: Transaction,
        rows: _Rows,
        topics: tuple[str, str],
        new_id: Callable[[], uuid.UUID],
        clock: Clock,
    ) -> None:
        self._tx = tx
        self._rows = rows
        self._topics = topics
        self._new_id = new_id
        self._clock = clock

    def _find(self, match: Callable[[dict[str, Any]], bool]) -> Service | None:
        for state, _, _ in self._rows.rows.values():
            if match(state):
                return records.service_from(copy.deepcopy(state))
        return None

    async def named(self, tenant: str, name: str) -> Service | None:
        return self._find(
            lambda s: (s["tenant"], s["name"], s["state"]) == (tenant, name, ServiceState.ACTIVE.value)
        )

    async def of_request(self, request_id: str) -> Service | None:
        return self._find(lambda s: any(r["request_id"] == request_id for r in s["replicas"]))

    async def of_job(self, job_id: str) -> Service | None:
        # By the domain's own rule (`Service.job_of`): a replica's job id is known from its request.
        for state, _, _ in self._rows.rows.values():
            service = records.service_from(copy.deepcopy(state))
            if service.replica_of_job(job_id) is not None:
                return service
        return None

    async def of_replica(self, replica_id: str) -> Service | None:
        return self._find(lambda s: any(r["replica_id"] == replica_id for r in s["replicas"]))

    async def record(self, service: Service, decision: Decision) -> None:
        now = self._clock.now()
        new = bool(decision.events) and isinstance(decision.events[0], ServiceCreated)
        if new and await self.named(service.tenant, service.name) is not None:
            raise ServiceExists(service.tenant, service.name)
        told = records.announcement(decision, service.service_id, *self._topics, self._new_id, now)
        before = service.version - len(decision.events)
        await self._tx.append(records.stream_of(service.service_id), before, told.events, outbox=told.outbox)
        created = now if new else self._rows.rows[service.service_id][1]
        self._rows.rows[service.service_id] = (records.state_of(service), created, now)
        self._rows.jobs.update(service.job_of(r) for r in service.replicas.values())

    async def explained(self, entries: Sequence[ExplainedDecision], keep: int) -> None:
        held = {e.service_id for e in entries if not e.changed}
        kept = [d for d in self._rows.decisions if d.changed or d.service_id not in held] + list(entries)
        for service_id in {e.service_id for e in entries if e.changed}:
            changed = [d for d in kept if d.service_id == service_id and d.changed]
            dropped = {id(d) for d in changed[: max(0, len(changed) - keep)]}
            kept = [d for d in kept if id(d) not in dropped]
        self._rows.decisions = kept


class InMemoryServing:
    """`UnitOfWork` and `ServingQueries` over one in-memory event store."""

    def __init__(
        self,
        clock: Clock,
        new_id: Callable[[], uuid.UUID],
        events_topic: str = "services.events",
        commands_topic: str = "jobs.commands",
    ) -> None:
        self.store = InMemoryEventStore(clock=clock)
        self._rows = _Rows()
        self._topics = (events_topic, commands_topic)
        self._new_id = new_id
        self._clock = clock

    @asynccontextmanager
    async def tracked(
        self, group: str, topic: str, partition: int, offset: int, event_id: str | None = None
    ) -> AsyncIterator[InMemoryServices]:
        tracking = self.store.tracking_transaction(group, topic, partition, offset, event_id=event_id)
        async with tracking as tx, self._unit(tx) as unit:
            yield unit

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[InMemoryServices]:
        async with self.store.transaction() as tx, self._unit(tx) as unit:
            yield unit

    @asynccontextmanager
    async def _unit(self, tx: Transaction) -> AsyncIterator[InMemoryServices]:
        saved = copy.deepcopy(self._rows.rows), set(self._rows.jobs), list(self._rows.decisions)
        try:
            yield InMemoryServices(tx, self._rows, self._topics, self._new_id, self._clock)
        except BaseException:
            self._rows.rows, self._rows.jobs, self._rows.decisions = saved
            raise

    # -- ServingQueries -----------------------------------------------------------------------------

    async def get(self, tenant: str, name: str) -> StoredService | None:
        found = [
            (state["state"] == ServiceState.ACTIVE.value, updated, state, created)
            for state, created, updated in self._rows.rows.values()
            if (state["tenant"], state["name"]) == (tenant, name)
        ]
        if not found:
            return None
        _, updated, state, created = max(found, key=lambda f: (f[0], f[1]))
        return StoredService(records.service_from(copy.deepcopy(state)), created, updated)

    async def knows_job(self, job_id: str) -> bool:
        return job_id in self._rows.jobs

    async def known_jobs(self, job_ids: Collection[str]) -> set[str]:
        return {j for j in job_ids if j in self._rows.jobs}

    async def decisions(self, service_id: str, limit: int) -> list[ExplainedDecision]:
        return [d for d in reversed(self._rows.decisions) if d.service_id == service_id][:limit]

    async def page(self, tenant: str | None, after: str, limit: int) -> ServicePage:
        live = sorted(
            (f"{s['tenant']}/{s['name']}", s, c, u)
            for s, c, u in self._rows.rows.values()
            if s["state"] == ServiceState.ACTIVE.value and tenant in (None, s["tenant"])
        )
        rows = [r for r in live if r[0] > after]
        shown = rows[:limit]
        services = [StoredService(records.service_from(copy.deepcopy(s)), c, u) for _, s, c, u in shown]
        return ServicePage(services, shown[-1][0] if len(rows) > limit else None)
