"""What the use cases need from storage: the services of one unit of work, and the read side.

A unit of work is one transaction; a service read through `Services` is locked until it commits, so an
RPC and a consumed fact about the same service are decided one after the other. Both adapters
(`suanli.serving.adapters.memory`, `.postgres`) write the same records (`suanli.serving.adapters.records`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from suanli.serving.domain.autoscaling import ScaleDecision
from suanli.serving.domain.service import Decision, Service


@dataclass(frozen=True, slots=True)
class ExplainedDecision:
    """One autoscaler decision about a service, kept to explain it (`ExplainService`)."""

    service_id: str
    decided_at: datetime
    from_replicas: int  # the service's desired count when it was decided
    decision: ScaleDecision

    @property
    def changed(self) -> bool:
        return self.decision.desired != self.from_replicas


class Services(Protocol):
    """The services of one unit of work, found by name, by a replica's request id or job id."""

    async def named(self, tenant: str, name: str) -> Service | None:
        """The tenant's service of that name that is not deleted."""
        ...

    async def of_request(self, request_id: str) -> Service | None: ...

    async def of_job(self, job_id: str) -> Service | None: ...

    async def of_replica(self, replica_id: str) -> Service | None: ...

    async def record(self, service: Service, decision: Decision) -> None:
        """The decision's events (stream and outbox), its orders (outbox) and the service's new state.

        A new service (its first event in the decision is ServiceCreated) is inserted; `ServiceExists`
        when the tenant has a live service of that name.
        """
        ...

    async def explained(self, entries: Sequence[ExplainedDecision], keep: int) -> None:
        """Keep autoscaler decisions (at most one per service): per service the last `keep` that changed
        the count, and the latest that held it (replacing the hold kept before)."""
        ...


class UnitOfWork(Protocol):
    def tracked(
        self, group: str, topic: str, partition: int, offset: int, event_id: str | None = None
    ) -> AbstractAsyncContextManager[Services]:
        """Raises `suanli.eventstore.AlreadyProcessed` (nothing runs) when the record was applied."""
        ...

    def begin(self) -> AbstractAsyncContextManager[Services]: ...


@dataclass(frozen=True, slots=True)
class StoredService:
    """A service as the read side answers it: the aggregate and when it was created and last changed."""

    service: Service
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class ServicePage:
    services: list[StoredService]
    next_after: str | None  # "tenant/name" of the last one when more may follow


class ServingQueries(Protocol):
    """The read side the API answers from: committed rows, no lock."""

    async def get(self, tenant: str, name: str) -> StoredService | None:
        """The live service, or else the latest deleted one of that name."""
        ...

    async def page(self, tenant: str | None, after: str, limit: int) -> ServicePage:
        """Live services (of `tenant`, or all), ordered by tenant and name, after "tenant/name"."""
        ...

    async def knows_job(self, job_id: str) -> bool:
        """Whether the job is (or was) a replica's: most jobs of the scheduler's topics are not."""
        ...

    async def known_jobs(self, job_ids: Collection[str]) -> set[str]:
        """`knows_job` of several jobs at once: those that are (or were) a replica's."""
        ...

    async def decisions(self, service_id: str, limit: int) -> list[ExplainedDecision]:
        """The service's kept autoscaler decisions, newest first, at most `limit`."""
        ...
