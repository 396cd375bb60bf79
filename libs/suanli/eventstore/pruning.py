"""Pruning of the event store's bookkeeping tables: published outbox rows and processed-event records.

Both tables only ever grew. Each is pruned by the process that owns it, in bounded statements (at most
``prune_batch`` rows each, its own short transaction), so no statement holds many row locks or runs long:

- the outbox by its relay (`suanli.eventstore.relay`), while it holds the relay lease and between its
  batches: rows published longer than ``SUANLI_OUTBOX_RETENTION_S`` ago. Rows still pending and parked
  rows are never pruned (parked rows wait for an operator: ``suanli outbox parked``).
- ``processed_events`` by the service that consumes (`ProcessedEventsPruner`): records older than
  ``SUANLI_PROCESSED_EVENTS_RETENTION_S``.

The de-duplication window. A processed-event record is what refuses a redelivered event; once it is gone,
the same event delivered again is applied again. So the retention must exceed the longest time after its
first application that an event can still be delivered: the input topics' retention (7 days in the
catalogue), a dead-letter replay (dead-letter topics keep records 30 days, `suanli.contracts.catalogue`),
plus the longest consumer lag tolerated. The default, 37 days, is the dead-letter retention plus a week;
a shorter setting is allowed (a deployment with shorter topic retention) but logged as a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import timedelta
from types import TracebackType
from typing import Self

from opentelemetry import metrics as otel_metrics
from opentelemetry.metrics import Meter
from pydantic import Field

from suanli.contracts.catalogue import DLQ_RETENTION_MS
from suanli.eventstore.ports import ProcessedPruning
from suanli.settings import ServiceSettings, SettingsConfigDict
from suanli.telemetry.names import PRUNED_ROWS, described

log = logging.getLogger(__name__)

DAY_S = 86_400.0
OUTBOX_TABLE = "outbox"
PROCESSED_TABLE = "processed_events"


class RetentionSettings(ServiceSettings):
    """How long the event store keeps published outbox rows and processed-event records (``SUANLI_*``)."""

    model_config = SettingsConfigDict(env_prefix="SUANLI_")

    # Published rows are on Kafka already; kept a week for audit (`suanli outbox` and SQL).
    outbox_retention_s: float = Field(7 * DAY_S, gt=0, description="Keep published outbox rows (s).")
    processed_events_retention_s: float = Field(
        DLQ_RETENTION_MS / 1000 + 7 * DAY_S,
        gt=0,
        description="Keep processed-event records, the de-duplication window (s).",
    )
    prune_interval_s: float = Field(300.0, gt=0, description="Seconds between pruning rounds.")
    prune_batch: int = Field(1000, gt=0, description="Most rows one pruning statement deletes.")

    @property
    def outbox_retention(self) -> timedelta:
        """``outbox_retention_s`` as a timedelta."""
        return timedelta(seconds=self.outbox_retention_s)

    @property
    def processed_events_retention(self) -> timedelta:
        """``processed_events_retention_s`` as a timedelta."""
        return timedelta(seconds=self.processed_events_retention_s)


class PruneMetrics:
    """The pruning jobs' metric: rows pruned, by table."""

    def __init__(self, meter: Meter | None = None, *, tables: tuple[str, ...] = ()) -> None:
        meter = meter or otel_metrics.get_meter("suanli.eventstore")
        self._pruned = meter.create_counter(PRUNED_ROWS, **described(PRUNED_ROWS))
        # Served at 0 from the start, so an alert on "nothing pruned for a day" sees the series.
        for table in tables:
            self._pruned.add(0, {"table": table})

    def pruned(self, table: str, rows: int) -> None:
        """Count ``rows`` pruned from ``table``."""
        if rows:
            self._pruned.add(rows, {"table": table})


async def prune_all(delete: Callable[[int], Awaitable[int]], batch: int) -> int:
    """Call ``delete(batch)`` until it deletes fewer than ``batch`` rows; the rows deleted in all.

    Each call is one bounded statement in its own transaction, so locks last one batch only.
    """
    total = 0
    while True:
        deleted = await delete(batch)
        total += deleted
        if deleted < batch:
            return total


class ProcessedEventsPruner:
    """Prunes a consumer's ``processed_events`` every ``prune_interval_s``, in bounded statements.

    Run by the service that consumes (it owns the records); ``async with`` starts and stops it.
    """

    def __init__(
        self,
        store: ProcessedPruning,
        settings: RetentionSettings | None = None,
        *,
        metrics: PruneMetrics | None = None,
        schema: str = "",
    ) -> None:
        self._store = store
        self._settings = settings or RetentionSettings.load()
        self._metrics = metrics or PruneMetrics(tables=(PROCESSED_TABLE,))
        self._schema = schema
        self._task: asyncio.Task[None] | None = None
        self.pruned = 0
        window_s = self._settings.processed_events_retention_s
        if window_s * 1000 < DLQ_RETENTION_MS:
            log.warning(
                "SUANLI_PROCESSED_EVENTS_RETENTION_S=%.0f is shorter than the dead-letter retention (%d s):"
                " a record replayed from a dead-letter topic after its id was pruned is applied again",
                window_s,
                DLQ_RETENTION_MS // 1000,
            )

    async def prune_once(self) -> int:
        """One round: every record past the retention, in bounded statements; the rows pruned."""
        retention = self._settings.processed_events_retention

        async def delete(limit: int) -> int:
            return await self._store.prune_processed(retention, limit)

        rows = await prune_all(delete, self._settings.prune_batch)
        self.pruned += rows
        self._metrics.pruned(PROCESSED_TABLE, rows)
        if rows:
            log.info(
                "pruned %d processed-event records older than %.0f s%s",
                rows,
                retention.total_seconds(),
                f" in schema {self._schema}" if self._schema else "",
            )
        return rows

    async def run(self) -> None:
        """Prune every interval until cancelled; a failed round is logged and tried at the next one."""
        while True:
            try:
                await self.prune_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("pruning processed-event records failed; next round in %.0f s", self._interval)
            await asyncio.sleep(self._interval)

    @property
    def _interval(self) -> float:
        return self._settings.prune_interval_s

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self.run(), name="processed-events-pruner")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
