"""Pruning contract, for both adapters: published outbox rows and processed-event records past retention.

Each test has a store and a relay feed on one manual clock, so "older than the retention" is decided by
the test, not by how long it runs.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from test_relay_contract import eventually

from suanli.clock import ManualClock
from suanli.eventstore import (
    InMemoryEventStore,
    NewEvent,
    OutboxFeed,
    OutboxMessage,
    OutboxRelay,
    PostgresEventStore,
    PostgresOutboxFeed,
    ProcessedEventsPruner,
    PruneMetrics,
    RecordingOutboxSink,
    RetentionSettings,
    Transaction,
    apply_once,
)
from suanli.eventstore.errors import RecordRefused
from suanli.eventstore.values import RowFailure
from suanli.telemetry.names import PRUNED_ROWS

START = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


@dataclass
class Clocked:
    name: str
    store: InMemoryEventStore | PostgresEventStore
    feed: OutboxFeed
    clock: ManualClock


@pytest.fixture(params=["memory", "postgres"])
async def clocked(request: pytest.FixtureRequest, pg_dsn: str) -> AsyncIterator[Clocked]:
    clock = ManualClock(START)
    if request.param == "memory":
        memory = InMemoryEventStore(clock=clock)
        yield Clocked("memory", memory, memory.feed(), clock)
        return
    schema = f"es_{secrets.token_hex(4)}"
    store = await PostgresEventStore.connect(pg_dsn, schema=schema, clock=clock, max_size=4)
    try:
        feed = PostgresOutboxFeed(pg_dsn, schema=schema, clock=clock, standby_poll=0.02)
        yield Clocked("postgres", store, feed, clock)
    finally:
        await store.close()


async def write(clocked: Clocked, stream: str, payloads: list[bytes]) -> None:
    events = [NewEvent(uuid.uuid4(), "JobQueued", p) for p in payloads]
    version = await clocked.store.stream_version(stream)
    await clocked.store.append(
        stream, version, events, outbox=[OutboxMessage.for_event("jobs.events", b"k", e) for e in events]
    )


def pruned_counts(reader: InMemoryMetricReader) -> Counter[str]:
    data = reader.get_metrics_data()
    counts: Counter[str] = Counter()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == PRUNED_ROWS:
                    for point in m.data.data_points:
                        counts[str(point.attributes["table"])] += int(point.value)
    return counts


def prune_metrics() -> tuple[PruneMetrics, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return PruneMetrics(MeterProvider(metric_readers=[reader]).get_meter("test")), reader


async def test_published_rows_past_retention_are_pruned_in_bounded_batches(clocked: Clocked) -> None:
    await write(clocked, "old", [f"old-{i}".encode() for i in range(7)] + [b"poison", b"stuck"])
    async with clocked.feed.lease() as lease:
        rows = await lease.pending(100)
        by_value = {r.value: r.id for r in rows}
        await lease.mark_published([r.id for r in rows if r.value.startswith(b"old-")])
        await lease.record_failures([RowFailure(by_value[b"poison"], "RecordRefused: too large", True)])
        clocked.clock.advance(2 * HOUR)
        await write(clocked, "new", [b"new-0", b"new-1"])
        new_ids = [r.id for r in await lease.pending(100) if r.value.startswith(b"new-")]
        await lease.mark_published(new_ids)
        # Each statement deletes at most its limit, oldest first: 3 + 3 + 1 of the 7 old published rows.
        assert [await lease.prune_published(HOUR, 3) for _ in range(4)] == [3, 3, 1, 0]
    # Kept: the rows published within the hour, the parked row (for the operator) and the pending one.
    assert [r.value for r in await clocked.store.pending_outbox()] == [b"stuck"]
    assert [p.id for p in await clocked.store.parked_outbox()] == [by_value[b"poison"]]
    if isinstance(clocked.store, InMemoryEventStore):
        assert [r.id for r in clocked.store.published()] == new_ids
    else:
        left = await clocked.store.pool.fetch(f"SELECT id FROM {clocked.store.schema}.outbox ORDER BY id")
        assert [r["id"] for r in left] == sorted([by_value[b"poison"], by_value[b"stuck"], *new_ids])


async def test_a_pending_row_is_never_pruned_however_old(clocked: Clocked) -> None:
    await write(clocked, "s", [b"waiting"])
    clocked.clock.advance(1000 * HOUR)
    async with clocked.feed.lease() as lease:
        assert await lease.prune_published(HOUR, 100) == 0
    assert [r.value for r in await clocked.store.pending_outbox()] == [b"waiting"]


async def test_the_relay_prunes_published_rows_and_keeps_parked_ones(
    clocked: Clocked, caplog: pytest.LogCaptureFixture
) -> None:
    await write(clocked, "old", [b"a", b"b", b"poison", b"c"])

    def reject(record: object) -> BaseException | None:
        return RecordRefused("too large") if getattr(record, "value", None) == b"poison" else None

    sink = RecordingOutboxSink(reject=reject)
    retention = RetentionSettings.load({}, outbox_retention_s=3600, prune_interval_s=0.01, prune_batch=2)
    metrics, reader = prune_metrics()
    caplog.set_level(logging.INFO, logger="suanli.eventstore.relay")
    relay = OutboxRelay(clocked.feed, sink, poll_interval=0.02, retention=retention, prune_metrics=metrics)
    async with relay:

        async def published() -> bool:
            return len(sink.records) == 3 and await clocked.store.pending_outbox() == []

        await eventually(published, "three rows published, the poison row parked")
        clocked.clock.advance(2 * HOUR)
        await write(clocked, "new", [b"d"])

        async def pruned() -> bool:
            return relay.pruned == 3 and len(sink.records) == 4

        await eventually(pruned, "the three old published rows pruned, the new one published")
    assert [p.size for p in await clocked.store.parked_outbox()] == [len(b"poison")]
    assert pruned_counts(reader) == {"outbox": 3}
    assert any("pruned 3 published outbox rows" in r.getMessage() for r in caplog.records)


async def claim(clocked: Clocked, event_id: str, offset: int) -> bool:
    async def effect(_: Transaction) -> None:
        return None

    return await apply_once(clocked.store, "billing", "usage.metered", 0, offset, effect, event_id=event_id)


async def test_processed_records_are_pruned_past_the_window_and_never_inside_it(clocked: Clocked) -> None:
    old = [f"old-{i}" for i in range(5)]
    for offset, event_id in enumerate(old):
        assert await claim(clocked, event_id, offset)
    clocked.clock.advance(timedelta(days=10))
    recent = ["recent-0", "recent-1"]
    for offset, event_id in enumerate(recent, start=5):
        assert await claim(clocked, event_id, offset)
    clocked.clock.advance(timedelta(days=4))
    window = timedelta(days=5)
    assert [await clocked.store.prune_processed(window, 2) for _ in range(4)] == [2, 2, 1, 0]
    # Inside the window a redelivery is still refused, however often pruning runs.
    assert await clocked.store.prune_processed(window, 100) == 0
    assert [await claim(clocked, event_id, 99) for event_id in recent] == [False, False]
    # Past it the record is gone: that is why the window must outlast every redelivery.
    assert await claim(clocked, old[0], 99) is True


async def test_the_pruner_prunes_in_rounds_with_metric_and_log(
    clocked: Clocked, caplog: pytest.LogCaptureFixture
) -> None:
    for offset in range(5):
        assert await claim(clocked, f"e-{offset}", offset)
    clocked.clock.advance(timedelta(days=2))
    assert await claim(clocked, "fresh", 5)
    settings = RetentionSettings.load({}, processed_events_retention_s=86_400, prune_batch=2)
    metrics, reader = prune_metrics()
    caplog.set_level(logging.INFO, logger="suanli.eventstore.pruning")
    pruner = ProcessedEventsPruner(clocked.store, settings, metrics=metrics)
    assert await pruner.prune_once() == 5
    assert await pruner.prune_once() == 0
    assert pruned_counts(reader) == {"processed_events": 5}
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert lines == ["pruned 5 processed-event records older than 86400 s"]  # nothing pruned: no line
    assert await claim(clocked, "fresh", 6) is False


async def test_a_window_shorter_than_the_dead_letter_retention_is_warned_about(
    clocked: Clocked, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="suanli.eventstore.pruning")
    ProcessedEventsPruner(clocked.store, RetentionSettings.load({}, processed_events_retention_s=3600))
    assert any("shorter than the dead-letter retention" in r.getMessage() for r in caplog.records)
