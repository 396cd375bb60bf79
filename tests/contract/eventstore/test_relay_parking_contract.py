"""Parking poison rows, over each adapter's feed with a recording sink that refuses chosen rows.

A row refused as a record is parked at once; a row failing with another non-transient error is parked
after `ParkingPolicy.max_attempts`; a transient failure is retried however long it lasts and never counted.
"""

from __future__ import annotations

import uuid
from collections import Counter

from aiokafka.errors import KafkaTimeoutError
from contract_adapters import Adapter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from test_relay_contract import eventually, values

from suanli.eventstore import NewEvent, OutboxMessage, OutboxRecord, OutboxRelay, RecordingOutboxSink
from suanli.eventstore.errors import RecordRefused
from suanli.eventstore.parking import ParkingPolicy
from suanli.eventstore.relay import OutboxMetrics
from suanli.telemetry.names import OUTBOX_PARKED

POISON = b"poison"


async def write_around_poison(adapter: Adapter, before: int, after: int) -> list[bytes]:
    """``before`` good rows, the poison row, ``after`` good rows, all of one key: the good values."""
    payloads = [f"good-{i}".encode() for i in range(before)] + [POISON]
    payloads += [f"good-{i}".encode() for i in range(before, before + after)]
    events = [NewEvent(uuid.uuid4(), "JobQueued", p) for p in payloads]
    await adapter.store.append(
        "s", 0, events, outbox=[OutboxMessage.for_event("jobs.events", b"k", e) for e in events]
    )
    return [p for p in payloads if p != POISON]


def parked_counts(reader: InMemoryMetricReader) -> Counter[str]:
    data = reader.get_metrics_data()
    counts: Counter[str] = Counter()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == OUTBOX_PARKED:
                    for point in m.data.data_points:
                        counts[str(point.attributes["topic"])] += int(point.value)
    return counts


def meter_reader() -> tuple[OutboxMetrics, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    return OutboxMetrics(MeterProvider(metric_readers=[reader]).get_meter("test")), reader


async def test_a_row_refused_as_a_record_is_parked_and_later_rows_flow(adapter: Adapter) -> None:
    good = await write_around_poison(adapter, before=3, after=4)

    def reject(record: OutboxRecord) -> BaseException | None:
        return RecordRefused("jobs.events: too large") if record.value == POISON else None

    sink = RecordingOutboxSink(reject=reject)
    metrics, reader = meter_reader()
    async with OutboxRelay(adapter.feed, sink, batch_size=5, poll_interval=30, metrics=metrics) as relay:

        async def drained() -> bool:
            return len(sink.records) == len(good) and await adapter.store.pending_outbox() == []

        await eventually(drained, "good rows published around the poison row")
    assert values(sink.records) == good  # every good row once, in order: nothing re-sent around the park
    (row,) = await adapter.store.parked_outbox()
    assert (row.topic, row.event_name, row.size, row.attempts) == ("jobs.events", "JobQueued", len(POISON), 1)
    assert row.reason == "RecordRefused: jobs.events: too large"
    assert relay.parked == 1 and relay.failures == 0
    assert parked_counts(reader) == {"jobs.events": 1}


async def test_a_row_failing_non_transiently_is_parked_after_max_attempts(adapter: Adapter) -> None:
    good = await write_around_poison(adapter, before=1, after=2)
    tries: Counter[bytes] = Counter()

    def reject(record: OutboxRecord) -> BaseException | None:
        tries[record.value] += 1
        return ValueError("schema registry says no") if record.value == POISON else None

    sink = RecordingOutboxSink(reject=reject)
    relay = OutboxRelay(adapter.feed, sink, poll_interval=30, min_backoff=0.01, parking=ParkingPolicy(3))
    async with relay:

        async def parked() -> bool:
            return (
                len(await adapter.store.parked_outbox()) == 1 and await adapter.store.pending_outbox() == []
            )

        await eventually(parked, "poison row parked after three attempts")
    (row,) = await adapter.store.parked_outbox()
    assert row.attempts == 3 and row.reason == "ValueError: schema registry says no"
    assert tries[POISON] == 3
    assert relay.failures == 2  # two batches failed as a whole; the third parked the row
    # Good rows before it were re-sent with each failed batch (at least once); those after it too.
    assert set(values(sink.records)) == set(good) and values(sink.records)[-len(good) :] == good


async def test_transient_failures_are_retried_and_never_parked(adapter: Adapter) -> None:
    good = await write_around_poison(adapter, before=2, after=2)
    outage = {"left": 6}

    def reject(record: OutboxRecord) -> BaseException | None:
        # Far more failed attempts than max_attempts: a broker outage must be waited out, not parked.
        if record.value == POISON and outage["left"] > 0:
            outage["left"] -= 1
            return KafkaTimeoutError("broker unavailable")
        return None

    sink = RecordingOutboxSink(reject=reject)
    relay = OutboxRelay(
        adapter.feed, sink, poll_interval=30, min_backoff=0.01, max_backoff=0.02, parking=ParkingPolicy(2)
    )
    async with relay:

        async def delivered() -> bool:
            return POISON in values(sink.records) and await adapter.store.pending_outbox() == []

        await eventually(delivered, "row delivered once the outage is over")
    assert await adapter.store.parked_outbox() == []
    assert relay.parked == 0 and relay.failures == 6
    # Order is kept: the good rows after the poison row reach the sink after it.
    sent = values(sink.records)
    assert sent[-3:] == [POISON, *good[2:]]


async def test_an_unparked_row_is_sent_again(adapter: Adapter) -> None:
    await write_around_poison(adapter, before=0, after=1)
    refusing = {"on": True}

    def reject(record: OutboxRecord) -> BaseException | None:
        return RecordRefused("too large") if record.value == POISON and refusing["on"] else None

    sink = RecordingOutboxSink(reject=reject)
    async with OutboxRelay(adapter.feed, sink, poll_interval=0.05):

        async def parked() -> bool:
            return len(await adapter.store.parked_outbox()) == 1

        await eventually(parked, "poison row parked")
        (row,) = await adapter.store.parked_outbox()
        refusing["on"] = False  # the operator raised the limit
        assert await adapter.store.unpark_outbox([row.id, 999_999]) == [row.id]

        async def resent() -> bool:
            return POISON in values(sink.records) and await adapter.store.pending_outbox() == []

        await eventually(resent, "unparked row published")
    assert await adapter.store.parked_outbox() == []
    assert await adapter.store.unpark_outbox([row.id]) == []
