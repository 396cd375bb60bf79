"""Consumed records → use cases, each in a tracked unit of work (effect and offset commit together)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from suanli.billing.adapters import records
from suanli.billing.adapters.metrics import BillingMetrics
from suanli.billing.service_layer.billing import BillingService, Charged
from suanli.billing.service_layer.ports import LedgerUnit, UnitOfWork
from suanli.bus import ConsumedEvent
from suanli.eventstore import AlreadyProcessed
from suanli.infra.transient import RetriableError, is_transient
from suanli.telemetry.tracing import tracer

log = logging.getLogger(__name__)

Effect = Callable[[LedgerUnit], Awaitable[Charged]]


class UnexpectedEvent(ValueError):
    """An event that does not belong on the topic it arrived on (dead-lettered)."""


class BillingHandler:
    """The `EventConsumer` handler of billing's three inputs.

    usage.metered → rate (or park); jobs.events JobSubmitted → job terms; capacity.nodes → node region.
    Domain errors (invalid or unpriced usage) propagate as they are and the bus dead-letters the record;
    transient database trouble (`suanli.infra.transient`) becomes `RetriableError`, so the bus retries it
    in place.
    """

    def __init__(
        self,
        service: BillingService,
        uow: UnitOfWork,
        group: str,
        topics: dict[str, str],
        metrics: BillingMetrics | None = None,
    ) -> None:
        self._service = service
        self._metrics = metrics or BillingMetrics()
        self._uow = uow
        self._group = group
        self._usage, self._jobs, self._nodes = (
            topics["usage.metered"],
            topics["jobs.events"],
            topics["capacity.nodes"],
        )
        # Capacity views repeat every minute per node; a region already recorded needs no transaction.
        self._regions: dict[str, str] = {}

    async def __call__(self, event: ConsumedEvent) -> None:
        effect = self._effect(event)
        if effect is None:
            return
        # A child of the consumer span (the producer's trace); the ChargeRecorded outbox rows written in
        # it keep its context, so the relayed records continue the trace.
        name = "billing.charge" if event.topic == self._usage else "billing.record"
        ids: dict[str, str] = {
            k: str(event.record[k]) for k in ("job_id", "task_id", "node_id") if k in event.record
        }
        try:
            with tracer("suanli.billing").start_as_current_span(name, attributes=ids):
                async with self._uow.tracked(
                    self._group, event.topic, event.partition, event.offset, event.event_id
                ) as unit:
                    charged = await effect(unit)
        except AlreadyProcessed:
            log.debug("%s[%d]@%d already applied", event.topic, event.partition, event.offset)
        except Exception as exc:
            if is_transient(exc):
                raise RetriableError(f"database: {exc!r}") from exc
            raise
        else:
            self._metrics.charged(charged)  # committed with the offset: a replay counts nothing twice
        if event.topic == self._nodes:
            # Only once committed (or found applied): a cached region that never reached the table would
            # keep usage parked for that node.
            self._regions[event.record["node_id"]] = event.record["region"]

    def _effect(self, event: ConsumedEvent) -> Effect | None:
        service = self._service
        if event.topic == self._usage:
            if event.event_name != "UsageMetered":
                raise UnexpectedEvent(f"{event.event_name or 'tombstone'} on {event.topic}")
            usage = records.usage_from_record(event.record)
            return lambda unit: service.usage_metered(unit, usage)
        if event.topic == self._jobs:
            if event.event_name != "JobSubmitted":
                return None  # other job events do not change prices
            job_id, tenant, terms = records.terms_from_job_submitted(event.record)
            self._metrics.tenant_known(tenant)
            return lambda unit: service.job_submitted(unit, job_id, tenant, terms)
        if event.topic == self._nodes:
            if event.tombstone or event.event_name != "NodeCapacityChanged":
                return None
            node_id, region = event.record["node_id"], event.record["region"]
            if self._regions.get(node_id) == region:
                return None
            return lambda unit: service.node_located(unit, node_id, region)
        raise UnexpectedEvent(f"billing does not consume {event.topic}")
