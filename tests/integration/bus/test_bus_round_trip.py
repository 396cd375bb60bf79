"""Publish → broker → consume: order per key, headers, trace context and every contract event."""

from __future__ import annotations

import asyncio
import secrets
from collections import defaultdict
from dataclasses import replace
from typing import Any

from aiokafka.structs import RecordMetadata
from bus_testkit import FAST_CONSUMER, BusTopics, sample_event, wait_until
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from suanli.bus import EVENT_ID, EVENT_NAME, ConsumedEvent, EventConsumer, EventPublisher
from suanli.bus.headers import header
from suanli.contracts import EVENTS, default_registry, sample_records


async def publish_numbered(
    publisher: EventPublisher, topic: str, keys: list[str], count: int
) -> tuple[list[dict[str, Any]], list[RecordMetadata]]:
    """`count` JobCancelled per key, numbered 0.. in `reason`, interleaved across keys; (records, acks)."""
    sent = [
        sample_event("JobCancelled", job_id=key, subject_id=key, reason=str(seq))
        for seq in range(count)
        for key in keys
    ]
    acks = await publisher.publish_many(
        [publisher.encode(topic, r["job_id"], "JobCancelled", r) for r in sent]
    )
    return sent, acks


async def test_round_trip_keeps_key_order_per_partition(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    keys = [f"job-{n}" for n in range(6)]
    sent, acks = await publish_numbered(publisher, bus_topics.events, keys, 20)
    assert len(acks) == len(sent)

    got: list[ConsumedEvent] = []

    async def handle(event: ConsumedEvent) -> None:
        got.append(event)

    async with EventConsumer(
        bus_topics.bootstrap, f"g-{secrets.token_hex(3)}", [bus_topics.events], handle, settings=FAST_CONSUMER
    ):
        await wait_until(lambda: len(got) >= len(sent), what="all events consumed")

    assert len(got) == len(sent)
    by_key: dict[str, list[ConsumedEvent]] = defaultdict(list)
    for event in got:
        by_key[event.key_str or ""].append(event)
    assert set(by_key) == set(keys)
    for key, events in by_key.items():
        assert [int(e.record["reason"]) for e in events] == list(range(20)), key
        assert len({e.partition for e in events}) == 1, "one key, one partition"
        assert [e.offset for e in events] == sorted(e.offset for e in events)
    sent_by_id = {r["event_id"]: r for r in sent}
    for event in got:
        assert event.event_name == "JobCancelled"
        assert header(event.headers, EVENT_NAME) == "JobCancelled"
        assert event.event_id == header(event.headers, EVENT_ID) == event.record["event_id"]
        assert event.record == sent_by_id[event.event_id]
    # publish_many answers in input order with the partitions the events landed on.
    landed = {(a.partition, a.offset) for a in acks}
    assert landed == {(e.partition, e.offset) for e in got}


async def test_trace_context_crosses_the_broker(bus_topics: BusTopics, publisher: EventPublisher) -> None:
    tracer = TracerProvider().get_tracer("test")
    seen: list[int] = []

    async def handle(event: ConsumedEvent) -> None:
        seen.append(trace.get_current_span().get_span_context().trace_id)

    with tracer.start_as_current_span("submit job") as span:
        await publisher.publish(bus_topics.events, "job-1", "JobCancelled", sample_event("JobCancelled"))
        trace_id = span.get_span_context().trace_id
    assert trace.get_current_span().get_span_context().trace_id != trace_id

    async with EventConsumer(
        bus_topics.bootstrap, f"g-{secrets.token_hex(3)}", [bus_topics.events], handle, settings=FAST_CONSUMER
    ):
        await wait_until(lambda: len(seen) == 1, what="the traced event")

    assert seen == [trace_id]
    assert trace_id != 0


async def test_every_contract_event_round_trips_through_the_bus(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    registry = default_registry()
    sent = [(name, record) for name in sorted(EVENTS) for record in sample_records(registry.current(name))]
    assert {name for name, _ in sent} == set(EVENTS)
    # One key keeps them on one partition, so they come back in publish order.
    await publisher.publish_many(
        [publisher.encode(bus_topics.events, "all", name, record) for name, record in sent]
    )
    got: list[tuple[str, dict[str, object]]] = []

    async def handle(event: ConsumedEvent) -> None:
        got.append((event.event_name, event.record))

    async with EventConsumer(
        bus_topics.bootstrap, f"g-{secrets.token_hex(3)}", [bus_topics.events], handle, settings=FAST_CONSUMER
    ):
        await wait_until(lambda: len(got) >= len(sent), what="every contract event")

    assert got == sent


async def test_concurrent_partitions_overlap_handlers_and_keep_key_order(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    keys = [f"job-{n}" for n in range(8)]
    sent, _ = await publish_numbered(publisher, bus_topics.events, keys, 5)
    got: list[ConsumedEvent] = []
    in_flight: set[int] = set()
    most = 0

    async def handle(event: ConsumedEvent) -> None:
        nonlocal most
        in_flight.add(event.partition)
        most = max(most, len(in_flight))
        await asyncio.sleep(0.02)  # a handler that waits (a commit), which is what concurrency is for
        in_flight.discard(event.partition)
        got.append(event)

    settings = replace(FAST_CONSUMER, concurrent_partitions=True)
    async with EventConsumer(
        bus_topics.bootstrap, f"g-{secrets.token_hex(3)}", [bus_topics.events], handle, settings=settings
    ):
        await wait_until(lambda: len(got) >= len(sent), what="all events consumed")
    assert most > 1, "partitions were handled one after another"
    by_key: dict[str, list[int]] = defaultdict(list)
    for event in got:
        by_key[event.key_str or ""].append(int(event.record["reason"]))
    assert by_key == {key: list(range(5)) for key in keys}


async def test_pipelined_partitions_start_records_in_offset_order_and_overlap(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    key = "job-pipelined"
    sent, _ = await publish_numbered(publisher, bus_topics.events, [key], 30)
    started: list[int] = []
    finished: list[int] = []
    in_flight = 0
    most = 0

    async def handle(event: ConsumedEvent) -> None:
        nonlocal in_flight, most
        started.append(int(event.record["reason"]))  # before the first wait: the order work is queued in
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        finished.append(int(event.record["reason"]))

    group = f"g-{secrets.token_hex(3)}"
    settings = replace(FAST_CONSUMER, pipelined=True)
    async with EventConsumer(bus_topics.bootstrap, group, [bus_topics.events], handle, settings=settings):
        await wait_until(lambda: len(finished) >= len(sent), what="all events handled")
    assert started == list(range(30))  # one key, one partition: started in offset order
    assert most > 1, "one partition's records were handled one after another"
    assert sorted(finished) == list(range(30))
    # Everything handled was committed: a new member of the group sees nothing again.
    again: list[ConsumedEvent] = []

    async def collect(event: ConsumedEvent) -> None:
        again.append(event)

    async with EventConsumer(
        bus_topics.bootstrap, group, [bus_topics.events], collect, settings=FAST_CONSUMER
    ) as c:
        await c.wait_assigned()
        await publisher.publish(
            bus_topics.events,
            key,
            "JobCancelled",
            sample_event("JobCancelled", job_id=key, subject_id=key, reason="99"),
        )
        await wait_until(lambda: len(again) >= 1, what="the new record")
    assert [e.record["reason"] for e in again] == ["99"]
