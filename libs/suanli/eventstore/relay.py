"""`OutboxRelay`: publishes outbox rows to Kafka, at least once, in order per key.

Loop: take the lease (only one relay publishes), read up to `batch_size` unpublished rows in id order,
publish them all and wait for every acknowledgement, then mark them published in one statement. A crash
anywhere before the mark leaves the rows unpublished and they are sent again: duplicates are possible,
losses are not; consumers de-duplicate by event id. When a batch comes back short the relay sleeps until
the outbox trigger's NOTIFY or `poll_interval`, whichever comes first (the poll covers a lost notification).

Each record is sent with the ``traceparent`` stored with its row (the span that appended it), so its
consumers continue that trace; the relay's own ``outbox.publish`` span per batch links to those spans.

A row the broker refuses for good is parked (`suanli.eventstore.parking`): set aside with its reason and
attempts, counted in ``suanli_outbox_parked_total``, and the rows after it flow on; without that, one
oversize row would be retried forever in front of every later row.

Published rows are pruned by the relay too (`suanli.eventstore.pruning`): every ``prune_interval_s`` it
deletes those published more than ``outbox_retention_s`` ago, one bounded statement between two batches,
so publishing never waits for more than one short delete. Pending and parked rows are never pruned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Self

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.metrics import Meter

from suanli.eventstore import relay_metrics
from suanli.eventstore.errors import PublishFailed
from suanli.eventstore.parking import ParkingPolicy
from suanli.eventstore.ports import OutboxFeed, OutboxLease, OutboxSink
from suanli.eventstore.pruning import OUTBOX_TABLE, PruneMetrics, RetentionSettings
from suanli.eventstore.values import OutboxRecord
from suanli.telemetry.names import OUTBOX_PARKED
from suanli.telemetry.tracing import batch_span

log = logging.getLogger(__name__)


class OutboxMetrics:
    """The relay's metric: rows parked, by topic."""

    def __init__(self, meter: Meter | None = None, *, topics: Iterable[str] = ()) -> None:
        meter = meter or otel_metrics.get_meter("suanli.eventstore")
        self._parked = meter.create_counter(
            OUTBOX_PARKED,
            unit="1",
            description="Outbox rows the relay parked because the broker refused them.",
        )
        # Served at 0 from the start for the topics the relay is known to publish, so a dashboard or an
        # alert sees the series before the first row is ever parked.
        for topic in topics:
            self._parked.add(0, {"topic": topic})

    def parked(self, topic: str) -> None:
        """Count one parked row of ``topic``."""
        self._parked.add(1, {"topic": topic})


class OutboxRelay:
    """Publishes outbox rows to a sink at least once, in order per key, while it holds the feed's lease."""

    def __init__(
        self,
        feed: OutboxFeed,
        sink: OutboxSink,
        *,
        batch_size: int = 500,
        poll_interval: float = 1.0,
        min_backoff: float = 0.1,
        max_backoff: float = 5.0,
        parking: ParkingPolicy | None = None,
        metrics: OutboxMetrics | None = None,
        progress: relay_metrics.OutboxProgress = relay_metrics.PROGRESS,
        retention: RetentionSettings | None = None,
        prune_metrics: PruneMetrics | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._feed = feed
        self._sink = sink
        self._batch_size = batch_size
        self._poll_interval = poll_interval
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._parking = parking or ParkingPolicy()
        self._metrics = metrics or OutboxMetrics()
        self._progress = progress
        relay_metrics.export(progress)
        # Read from the environment (SUANLI_OUTBOX_RETENTION_S, ...) when not given, so every service's
        # relay prunes by the deployment's settings without wiring of its own.
        self._retention = retention or RetentionSettings.load()
        self._prune_metrics = prune_metrics or PruneMetrics(tables=(OUTBOX_TABLE,))
        self._prune_at = 0.0  # event-loop time of the next pruning round: the first comes at once
        self._round_pruned = 0
        self._stopping = False
        # True while a batch is between "read" and "marked": stop() must not cancel then, or the batch
        # would be published without being marked (harmless, but a needless duplicate on restart).
        self._busy = False
        self._task: asyncio.Task[None] | None = None
        self.polls = 0
        self.published = 0
        self.batches = 0
        self.failures = 0
        self.parked = 0
        self.pruned = 0

    async def start(self) -> None:
        """Run the relay in a background task; a second call does nothing."""
        if self._task is None:
            self._stopping = False
            self._task = asyncio.create_task(self.run(), name="outbox-relay")

    async def stop(self, grace_s: float = 30.0) -> None:
        """Finish the batch in flight (up to `grace_s`), release the lease and return.

        A batch cut short by the grace period is simply published again by the next relay.
        """
        self._stopping = True
        task, self._task = self._task, None
        if task is None:
            return
        if not self._busy:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError):
            await asyncio.wait_for(task, grace_s)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def run(self) -> None:
        """Relay until `stop()`; database and broker failures are retried with exponential backoff."""
        backoff = self._min_backoff
        while not self._stopping:
            try:
                async with self._feed.lease() as lease:
                    backoff = self._min_backoff
                    await self._pump(lease)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                log.exception("outbox relay failed; retrying in %.1fs", backoff)
                if self._stopping:
                    return
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)

    async def _pump(self, lease: OutboxLease) -> None:
        while not self._stopping:
            self._busy = True
            try:
                rows = await lease.pending(self._batch_size)
                self.polls += 1
                self._progress.read(rows)
                if rows:
                    with self._batch_span(rows):
                        try:
                            await self._sink.publish_batch(rows)
                            delivered = [r.id for r in rows]
                        except PublishFailed as failed:
                            delivered = await self._set_aside(lease, rows, failed)
                    await lease.mark_published(delivered)
                    self.published += len(delivered)
                    self.batches += 1
                    if len(rows) < self._batch_size:
                        self._progress.caught_up()
            finally:
                self._busy = False
            more = await self._prune_step(lease)
            if len(rows) == self._batch_size or more or self._stopping:
                continue
            await lease.wait_for_new(self._poll_interval)

    def _batch_span(self, rows: list[OutboxRecord]) -> AbstractContextManager[object]:
        """One span per published batch, in its rows' trace when they share one, else linked to each.

        Each record carries its own row's ``traceparent`` either way, so a consumer continues the writing
        command's trace; a span per row would cost more than the send.
        """
        return batch_span(
            "outbox.publish",
            (r.traceparent for r in rows),
            {
                "outbox.rows": len(rows),
                "outbox.first_id": rows[0].id,
                "outbox.last_id": rows[-1].id,
                "messaging.system": "kafka",
                "messaging.destination.names": sorted({r.topic for r in rows}),
            },
            tracer_name="suanli.eventstore",
            kind=trace.SpanKind.PRODUCER,
        )

    async def _prune_step(self, lease: OutboxLease) -> bool:
        """One bounded pruning statement when a round is due; True while the round has more to delete."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._prune_at:
            return False
        retention, batch = self._retention.outbox_retention, self._retention.prune_batch
        rows = await lease.prune_published(retention, batch)
        self._round_pruned += rows
        self.pruned += rows
        self._prune_metrics.pruned(OUTBOX_TABLE, rows)
        if rows == batch:
            return True
        if self._round_pruned:
            log.info(
                "pruned %d published outbox rows older than %.0f s",
                self._round_pruned,
                retention.total_seconds(),
            )
        self._round_pruned = 0
        self._prune_at = loop.time() + self._retention.prune_interval_s
        return False

    async def _set_aside(
        self, lease: OutboxLease, rows: list[OutboxRecord], failed: PublishFailed
    ) -> list[int]:
        """Record the batch's failures and park the rows that cannot be delivered.

        Returns the rows to mark published when every failure was parked (all others were acknowledged);
        re-raises otherwise, so the batch is retried after the backoff, like any failed batch.
        """
        verdicts = self._parking.judge(failed, rows)
        if verdicts:
            await lease.record_failures(verdicts)
        topics = {r.id: r.topic for r in rows}
        parked = {v.id for v in verdicts if v.park}
        for verdict in verdicts:
            if verdict.park:
                log.error("outbox row %d to %s parked: %s", verdict.id, topics[verdict.id], verdict.error)
                self._metrics.parked(topics[verdict.id])
        self.parked += len(parked)
        if parked != set(failed.failures):
            raise failed
        return [r.id for r in rows if r.id not in parked]
