"""Consumed records → use cases, each in a tracked unit of work (effect and offset commit together)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span

from suanli.billing.adapters import records
from suanli.billing.adapters.metrics import BillingMetrics
from suanli.billing.domain.usage import Usage
from suanli.billing.service_layer.billing import BillingService, Charged, Submission
from suanli.billing.service_layer.ports import LedgerUnit, UnitOfWork
from suanli.bus import ConsumedEvent
from suanli.eventstore import ClaimedRecord
from suanli.infra.transient import RetriableError, is_transient
from suanli.telemetry.tracing import current_traceparent, tracer

log = logging.getLogger(__name__)

Effect = Callable[[LedgerUnit], Awaitable[Charged]]
# Records per group commit. Larger batches save little more, hold the writer lock (which the period
# closer and admin calls wait for) longer, and repeat more work when one record fails and the rest run
# again without it.
MAX_BATCH = 100


class UnexpectedEvent(ValueError):
    """An event that does not belong on the topic it arrived on (dead-lettered)."""


@dataclass(slots=True)
class _Pending:
    """A record waiting for the next group commit, with the trace it arrived in."""

    event: ConsumedEvent
    effect: Effect
    # What `BillingService.apply_batch` takes for it; None: it is applied on its own (`effect`).
    input: Usage | Submission | None
    trace: Context
    # What it charged once committed; None when it had been applied before.
    outcome: asyncio.Future[Charged | None]


class _RecordFailed(Exception):
    def __init__(self, pending: _Pending, error: Exception) -> None:
        self.pending = pending
        self.error = error


def _retrieved(future: asyncio.Future[Charged | None]) -> None:
    if not future.cancelled():
        future.exception()


class BillingHandler:
    """The `EventConsumer` handler of billing's three inputs.

    usage.metered → rate (or park); jobs.events JobSubmitted → job terms; capacity.nodes → node region.
    Domain errors (invalid or unpriced usage) propagate as they are and the bus dead-letters the record;
    transient database trouble (`suanli.infra.transient`) becomes `RetriableError`, so the bus retries it
    in place.

    Group commit: records that arrive while a commit is running (the consumer starts a fetch's records
    together, `ConsumerSettings.pipelined`) are claimed and applied in one transaction, under one writer
    lock. One transaction per usage event had billing waiting on PostgreSQL round trips and commits for
    most of its time under load. A batch of usage and job terms only is applied together, in a fixed
    number of statements (`_apply_together`); any other batch, or one that fails so, record by record. A
    record whose effect fails is left out and the others are applied again without it: a transaction
    cannot drop one record's writes and keep the rest.
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
        self._queue: list[_Pending] = []
        self._committer: asyncio.Task[None] | None = None

    async def __call__(self, event: ConsumedEvent) -> None:
        found = self._effect(event)
        if found is None:
            return
        effect, input_ = found
        # Queued before the first await, so the records of one fetch share a batch.
        pending = _Pending(
            event, effect, input_, otel_context.get_current(), asyncio.get_running_loop().create_future()
        )
        pending.outcome.add_done_callback(_retrieved)
        self._queue.append(pending)
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._commit_queued(), name="billing-group-commit")
        # Shielded: a consumer that stops while waiting must not cancel the batch other records share.
        charged = await asyncio.shield(pending.outcome)
        if charged is None:
            log.debug("%s[%d]@%d already applied", event.topic, event.partition, event.offset)
        else:
            self._metrics.charged(charged)  # committed with the offset: a replay counts nothing twice
        if event.topic == self._nodes:
            # Only once committed (or found applied): a cached region that never reached the table would
            # keep usage parked for that node.
            self._regions[event.record["node_id"]] = event.record["region"]

    async def _commit_queued(self) -> None:
        # No await between the last emptiness check and returning, so a record queued meanwhile always
        # finds this task done and starts another.
        while self._queue:
            batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            await self._commit(batch)

    async def _commit(self, batch: list[_Pending]) -> None:
        if len(batch) > 1 and all(p.input is not None for p in batch):
            try:
                together = await self._apply_together(batch)
            except Exception as exc:
                if is_transient(exc):
                    retriable = RetriableError(f"database: {exc!r}")
                    for pending in batch:
                        pending.outcome.set_exception(retriable)
                    return
                # Nothing of it was written: one by one, the failing record is found and left out.
                log.info(
                    "a batch of %d records failed together (%r): applying them one by one", len(batch), exc
                )
            else:
                for pending, outcome in zip(batch, together, strict=True):
                    pending.outcome.set_result(outcome)
                return
        while batch:
            try:
                outcomes = await self._apply(batch)
            except _RecordFailed as failed:
                failed.pending.outcome.set_exception(failed.error)
                batch = [p for p in batch if p is not failed.pending]
                continue
            except Exception as exc:  # the transaction as a whole: the lock, a claim, the commit
                error = RetriableError(f"database: {exc!r}") if is_transient(exc) else exc
                for pending in batch:
                    pending.outcome.set_exception(error)
                return
            for pending, outcome in zip(batch, outcomes, strict=True):
                pending.outcome.set_result(outcome)
            return

    async def _apply(self, batch: list[_Pending]) -> list[Charged | None]:
        outcomes: list[Charged | None] = []
        async with self._uow.tracked_batch(self._group) as tracked:
            for pending in batch:
                event = pending.event
                if not await tracked.tracking.claim(
                    event.topic, event.partition, event.offset, event_id=event.event_id
                ):
                    outcomes.append(None)
                    continue
                try:
                    outcomes.append(await self._traced(pending, tracked.unit))
                except Exception as exc:
                    if is_transient(exc):
                        raise
                    raise _RecordFailed(pending, exc) from exc
        return outcomes

    async def _apply_together(self, batch: list[_Pending]) -> list[Charged | None]:
        """The batch's usage and job terms in a fixed number of statements (`BillingService.apply_batch`).

        One record at a time cost billing and PostgreSQL a round trip per statement, ten for a usage:
        most of both processes' CPU at bench/latency.py's load. Each record still gets its own span in
        its own trace, spanning the batch, and its charges' events continue it.
        """
        async with self._uow.tracked_batch(self._group) as tracked:
            claims = await tracked.tracking.claim_many(
                [
                    ClaimedRecord(p.event.topic, p.event.partition, p.event.offset, p.event.event_id)
                    for p in batch
                ]
            )
            chosen = [p for p, claimed in zip(batch, claims, strict=True) if claimed]
            spans = [self._span(p) for p in chosen]
            try:
                charged = await self._service.apply_batch(
                    tracked.unit,
                    [cast(Usage | Submission, p.input) for p in chosen],
                    [current_traceparent(trace.set_span_in_context(span)) for span in spans],
                )
            finally:
                for span in spans:
                    span.end()
        outcomes: dict[int, Charged] = {id(p): c for p, c in zip(chosen, charged, strict=True)}
        return [outcomes.get(id(p)) for p in batch]

    def _span(self, pending: _Pending) -> Span:
        """The record's span in its own trace, as `_traced` opens it."""
        name, ids = self._span_of(pending.event)
        return tracer("suanli.billing").start_span(name, context=pending.trace, attributes=ids)

    def _span_of(self, event: ConsumedEvent) -> tuple[str, dict[str, str]]:
        name = "billing.charge" if event.topic == self._usage else "billing.record"
        ids: dict[str, str] = {
            k: str(event.record[k]) for k in ("job_id", "task_id", "node_id") if k in event.record
        }
        return name, ids

    async def _traced(self, pending: _Pending, unit: LedgerUnit) -> Charged:
        # In the record's own trace (a child of its consumer span): the ChargeRecorded outbox rows its
        # effect writes keep that context, so the relayed records continue the producer's trace.
        name, ids = self._span_of(pending.event)
        token = otel_context.attach(pending.trace)
        try:
            with tracer("suanli.billing").start_as_current_span(name, attributes=ids):
                return await pending.effect(unit)
        finally:
            otel_context.detach(token)

    def _effect(self, event: ConsumedEvent) -> tuple[Effect, Usage | Submission | None] | None:
        service = self._service
        if event.topic == self._usage:
            if event.event_name != "UsageMetered":
                raise UnexpectedEvent(f"{event.event_name or 'tombstone'} on {event.topic}")
            usage = records.usage_from_record(event.record)
            return (lambda unit: service.usage_metered(unit, usage)), usage
        if event.topic == self._jobs:
            if event.event_name != "JobSubmitted":
                return None  # other job events do not change prices
            job_id, tenant, terms = records.terms_from_job_submitted(event.record)
            self._metrics.tenant_known(tenant)
            submitted = Submission(job_id, tenant, terms)
            return (lambda unit: service.job_submitted(unit, job_id, tenant, terms)), submitted
        if event.topic == self._nodes:
            if event.tombstone or event.event_name != "NodeCapacityChanged":
                return None
            node_id, region = event.record["node_id"], event.record["region"]
            if self._regions.get(node_id) == region:
                return None
            return (lambda unit: service.node_located(unit, node_id, region)), None
        raise UnexpectedEvent(f"billing does not consume {event.topic}")
