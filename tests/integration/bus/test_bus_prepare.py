"""The consumer's `Prepare` hook on the real broker: shown a fetch's decoded events before the handler takes
them one by one, in order; a record that does not decode is still dead-lettered; a hook that fails
changes nothing of how the records are handled."""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence

import pytest
from bus_testkit import FAST_CONSUMER, BusTopics, read_topic, sample_event, wait_until

from suanli.bus import ConsumedEvent, EventConsumer, EventPublisher, Handler, Prepare


async def _publish(bus_topics: BusTopics, publisher: EventPublisher) -> list[str]:
    reasons = [f"r{n}" for n in range(5)]
    # One key, so one partition: the records arrive in this order, the garbage among them.
    for n, reason in enumerate(reasons):
        await publisher.publish(
            bus_topics.events, "job-1", "JobCancelled", sample_event("JobCancelled", reason=reason)
        )
        if n == 2:
            await publisher.publish_raw(bus_topics.events, b"job-1", os.urandom(48))
    return reasons


def _consumer(bus_topics: BusTopics, handle: Handler, prepare: Prepare) -> EventConsumer:
    group = f"g-{secrets.token_hex(3)}"
    return EventConsumer(
        bus_topics.bootstrap, group, [bus_topics.events], handle, settings=FAST_CONSUMER, prepare=prepare
    )


async def test_the_hook_sees_each_fetch_before_its_records_are_handled(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    reasons = await _publish(bus_topics, publisher)
    timeline: list[tuple[str, list[str]]] = []

    async def prepare(events: Sequence[ConsumedEvent]) -> None:
        timeline.append(("prepared", [e.record["reason"] for e in events]))

    async def handle(event: ConsumedEvent) -> None:
        timeline.append(("handled", [event.record["reason"]]))

    async with _consumer(bus_topics, handle, prepare):
        await wait_until(lambda: sum(kind == "handled" for kind, _ in timeline) == 5, what="five records")
        [dead] = await read_topic(bus_topics.bootstrap, bus_topics.dlq, 1)

    assert [r for kind, rs in timeline if kind == "handled" for r in rs] == reasons
    assert [r for kind, rs in timeline if kind == "prepared" for r in rs] == reasons
    # Every record was shown before it was handled, with the others of its fetch.
    shown: set[str] = set()
    for kind, rs in timeline:
        if kind == "prepared":
            shown.update(rs)
        else:
            assert rs[0] in shown
    assert dead.key == b"job-1"


async def test_a_failing_hook_leaves_every_record_handled(
    bus_topics: BusTopics, publisher: EventPublisher, caplog: pytest.LogCaptureFixture
) -> None:
    reasons = await _publish(bus_topics, publisher)
    handled: list[str] = []

    async def prepare(events: Sequence[ConsumedEvent]) -> None:
        raise ConnectionResetError("the lookup's database went away")

    async def handle(event: ConsumedEvent) -> None:
        handled.append(event.record["reason"])

    async with _consumer(bus_topics, handle, prepare):
        await wait_until(lambda: len(handled) == 5, what="five records")
        await read_topic(bus_topics.bootstrap, bus_topics.dlq, 1)

    assert handled == reasons
    assert "preparing" in caplog.text and "the lookup's database went away" in caplog.text
