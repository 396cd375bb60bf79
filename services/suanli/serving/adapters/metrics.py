"""Serving's instruments of the telemetry catalogue (suanli.telemetry.names), via OpenTelemetry.

Counters count what a unit of work committed (`MeteredServing` wraps the unit of work), so a decision
rolled back (a record already applied, a database error retried) is not counted twice. The gauges are
set from a periodic read of the live services and the load view (`ServingMetrics.observe`), so every
instance exports the whole platform's services: dashboards take the max over instances, not the sum.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from opentelemetry import metrics

from suanli.contracts.load import ReplicaLoad
from suanli.serving.domain.service import (
    SCALE_REASONS,
    Decision,
    ReplicaState,
    ReplicaStopped,
    Service,
    ServiceScaled,
)
from suanli.serving.service_layer.ports import ExplainedDecision, Services, UnitOfWork
from suanli.serving.service_layer.serving import ENDED_CAUSES
from suanli.telemetry.names import (
    SERVING_IN_FLIGHT,
    SERVING_LOAD_REPORTS,
    SERVING_QUEUED,
    SERVING_REPLICAS,
    SERVING_REPLICAS_DESIRED,
    SERVING_REPLICAS_STOPPED,
    SERVING_SCALE_DECISIONS,
    SERVING_SERVICES,
    described,
)

# ReplicaStopped.cause: a job's end, the scheduler's refusal, or a requeue (not final).
STOP_CAUSES = (*ENDED_CAUSES.values(), "refused", "requeued")
LOAD_OUTCOMES = ("kept", "outdated")


class ServingMetrics:
    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.serving")
        self._scaled = meter.create_counter(SERVING_SCALE_DECISIONS, **described(SERVING_SCALE_DECISIONS))
        self._stopped = meter.create_counter(SERVING_REPLICAS_STOPPED, **described(SERVING_REPLICAS_STOPPED))
        self._reports = meter.create_counter(SERVING_LOAD_REPORTS, **described(SERVING_LOAD_REPORTS))
        # Every label value of the counters is known: served from 0, a rate panel has data (0) before
        # the first event instead of no series.
        for reason in SCALE_REASONS:
            self._scaled.add(0, {"reason": reason})
        for cause in STOP_CAUSES:
            self._stopped.add(0, {"cause": cause})
        for outcome in LOAD_OUTCOMES:
            self._reports.add(0, {"outcome": outcome})
        self._services = meter.create_gauge(SERVING_SERVICES, **described(SERVING_SERVICES))
        self._desired = meter.create_gauge(SERVING_REPLICAS_DESIRED, **described(SERVING_REPLICAS_DESIRED))
        self._replicas = meter.create_gauge(SERVING_REPLICAS, **described(SERVING_REPLICAS))
        self._in_flight = meter.create_gauge(SERVING_IN_FLIGHT, **described(SERVING_IN_FLIGHT))
        self._queued = meter.create_gauge(SERVING_QUEUED, **described(SERVING_QUEUED))
        self._models: set[str] = set()

    def decided(self, decision: Decision) -> None:
        """Count a committed decision's replica-count changes and stopped replicas."""
        for event in decision.events:
            if isinstance(event, ServiceScaled):
                self._scaled.add(1, {"reason": event.reason})
            elif isinstance(event, ReplicaStopped):
                self._stopped.add(1, {"cause": event.cause})

    def load_reported(self, kept: bool) -> None:
        self._reports.add(1, {"outcome": LOAD_OUTCOMES[0] if kept else LOAD_OUTCOMES[1]})

    def observe(self, services: Iterable[Service], loads: Iterable[ReplicaLoad]) -> None:
        """Set the gauges from every live service and the fresh load reports; a model whose last
        service went away reports 0, so a panel does not keep showing its stale count."""
        count: Counter[str] = Counter()
        desired: Counter[str] = Counter()
        replicas: Counter[tuple[str, str]] = Counter()
        model_of: dict[str, str] = {}
        for service in services:
            model = model_of[service.service_id] = service.spec.model
            count[model] += 1
            desired[model] += service.desired
            replicas.update((model, r.state.value) for r in service.replicas.values())
        in_flight: Counter[str] = Counter()
        queued: Counter[str] = Counter()
        for load in loads:
            of = model_of.get(load.service_id)
            if of is not None:  # else a report of a service deleted since (or not read yet)
                in_flight[of] += load.in_flight
                queued[of] += load.queued
        self._models |= count.keys()
        for model in self._models:
            labels = {"model": model}
            self._services.set(count[model], labels)
            self._desired.set(desired[model], labels)
            self._in_flight.set(in_flight[model], labels)
            self._queued.set(queued[model], labels)
            for state in ReplicaState:
                self._replicas.set(replicas[(model, state.value)], {"model": model, "state": state.value})


class _Recording:
    """The `Services` of one unit of work, keeping the decisions it records."""

    def __init__(self, inner: Services) -> None:
        self._inner = inner
        self.decisions: list[Decision] = []

    async def named(self, tenant: str, name: str) -> Service | None:
        return await self._inner.named(tenant, name)

    async def of_request(self, request_id: str) -> Service | None:
        return await self._inner.of_request(request_id)

    async def of_job(self, job_id: str) -> Service | None:
        return await self._inner.of_job(job_id)

    async def of_replica(self, replica_id: str) -> Service | None:
        return await self._inner.of_replica(replica_id)

    async def record(self, service: Service, decision: Decision) -> None:
        await self._inner.record(service, decision)
        self.decisions.append(decision)

    async def explained(self, entries: Sequence[ExplainedDecision], keep: int) -> None:
        await self._inner.explained(entries, keep)


class MeteredServing:
    """A `UnitOfWork` that counts each unit's decisions once it has committed."""

    def __init__(self, inner: UnitOfWork, metrics: ServingMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    @asynccontextmanager
    async def tracked(
        self, group: str, topic: str, partition: int, offset: int, event_id: str | None = None
    ) -> AsyncIterator[Services]:
        async with self._counted(self._inner.tracked(group, topic, partition, offset, event_id)) as unit:
            yield unit

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[Services]:
        async with self._counted(self._inner.begin()) as unit:
            yield unit

    @asynccontextmanager
    async def _counted(self, unit_of_work: AbstractAsyncContextManager[Services]) -> AsyncIterator[Services]:
        async with unit_of_work as inner:
            recording = _Recording(inner)
            yield recording
        for decision in recording.decisions:
            self._metrics.decided(decision)
