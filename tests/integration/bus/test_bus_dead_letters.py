"""Bad records go to the topic's DLQ with the reason in headers; good ones after them are still handled."""

from __future__ import annotations

import os
import secrets
from typing import Any

from bus_testkit import FAST_CONSUMER, FAST_RETRY, BusTopics, dlq_size, read_topic, sample_event, wait_until

from suanli.bus import ConsumedEvent, EventConsumer, EventPublisher, RetriableError
from suanli.bus.headers import (
    DLQ_ATTEMPTS,
    DLQ_ERROR_CLASS,
    DLQ_ERROR_MESSAGE,
    DLQ_ORIGINAL_OFFSET,
    DLQ_ORIGINAL_PARTITION,
    DLQ_ORIGINAL_TOPIC,
    EVENT_ID,
    header,
)


class QuotaRejected(Exception):
    """A business error: retrying the same record cannot help."""


async def test_corrupt_record_is_dead_lettered_and_the_next_record_handled(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    garbage = os.urandom(64)
    bad = await publisher.publish_raw(bus_topics.events, b"node-7", garbage, [("origin", b"fuzzer")])
    good = sample_event("JobCancelled")
    await publisher.publish(bus_topics.events, "node-7", "JobCancelled", good)
    handled: list[ConsumedEvent] = []

    async def handle(event: ConsumedEvent) -> None:
        handled.append(event)

    async with EventConsumer(
        bus_topics.bootstrap, f"g-{secrets.token_hex(3)}", [bus_topics.events], handle, settings=FAST_CONSUMER
    ):
        await wait_until(lambda: len(handled) == 1, what="the good record")
        [dead] = await read_topic(bus_topics.bootstrap, bus_topics.dlq, 1)

    assert handled[0].record == good
    assert dead.key == b"node-7"
    assert dead.value == garbage
    h = dead.headers
    assert header(h, DLQ_ERROR_CLASS) is not None
    assert "EventDecodeError" in header(h, DLQ_ERROR_CLASS) or "Error" in header(h, DLQ_ERROR_CLASS)
    assert header(h, DLQ_ERROR_MESSAGE)
    assert header(h, DLQ_ORIGINAL_TOPIC) == bus_topics.events
    assert header(h, DLQ_ORIGINAL_PARTITION) == str(bad.partition)
    assert header(h, DLQ_ORIGINAL_OFFSET) == str(bad.offset)
    assert header(h, DLQ_ATTEMPTS) == "0"
    assert header(h, "origin") == "fuzzer", "original headers travel with the dead letter"


async def test_non_retriable_handler_error_is_dead_lettered_once(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    rejected = sample_event("JobCancelled", reason="reject")
    fine = sample_event("JobCancelled", reason="ok")
    first = await publisher.publish(bus_topics.events, "job-9", "JobCancelled", rejected)
    await publisher.publish(bus_topics.events, "job-9", "JobCancelled", fine)
    calls: list[str] = []

    async def handle(event: ConsumedEvent) -> None:
        calls.append(event.record["reason"])
        if event.record["reason"] == "reject":
            raise QuotaRejected("tenant t-3 is over its GPU quota")

    async with EventConsumer(
        bus_topics.bootstrap,
        f"g-{secrets.token_hex(3)}",
        [bus_topics.events],
        handle,
        settings=FAST_CONSUMER,
        retry=FAST_RETRY,
    ):
        await wait_until(lambda: "ok" in calls, what="the record after the rejected one")
        [dead] = await read_topic(bus_topics.bootstrap, bus_topics.dlq, 1)

    assert calls == ["reject", "ok"], "a non-retriable error is not retried"
    assert header(dead.headers, DLQ_ERROR_CLASS).endswith("QuotaRejected")
    assert header(dead.headers, DLQ_ERROR_MESSAGE) == "tenant t-3 is over its GPU quota"
    assert header(dead.headers, DLQ_ORIGINAL_OFFSET) == str(first.offset)
    assert header(dead.headers, DLQ_ORIGINAL_PARTITION) == str(first.partition)
    assert header(dead.headers, DLQ_ATTEMPTS) == "1"
    assert header(dead.headers, EVENT_ID) == rejected["event_id"]
    assert dead.key == b"job-9"


async def test_retriable_error_succeeding_on_third_try_is_handled_once(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    flaky = sample_event("JobCancelled", reason="flaky")
    await publisher.publish(bus_topics.events, "job-1", "JobCancelled", flaky)
    after = sample_event("JobCancelled", reason="next")
    await publisher.publish(bus_topics.events, "job-1", "JobCancelled", after)
    attempts: list[str] = []
    done: list[str] = []

    async def handle(event: ConsumedEvent) -> None:
        attempts.append(event.record["reason"])
        if event.record["reason"] == "flaky" and attempts.count("flaky") < 3:
            raise RetriableError("ledger database restarting")
        done.append(event.record["reason"])

    async with EventConsumer(
        bus_topics.bootstrap,
        f"g-{secrets.token_hex(3)}",
        [bus_topics.events],
        handle,
        settings=FAST_CONSUMER,
        retry=FAST_RETRY,
    ):
        await wait_until(lambda: "next" in done, what="the record after the flaky one")

    assert attempts == ["flaky", "flaky", "flaky", "next"]
    assert done == ["flaky", "next"]
    assert await dlq_size(bus_topics) == 0


async def test_retriable_error_dead_letters_after_the_last_attempt(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    await publisher.publish(bus_topics.events, "job-2", "JobCancelled", sample_event("JobCancelled"))
    attempts: list[int] = []

    async def handle(event: ConsumedEvent) -> None:
        attempts.append(event.offset)
        raise RetriableError("pricing service unavailable")

    async with EventConsumer(
        bus_topics.bootstrap,
        f"g-{secrets.token_hex(3)}",
        [bus_topics.events],
        handle,
        settings=FAST_CONSUMER,
        retry=FAST_RETRY,
    ):
        [dead] = await read_topic(bus_topics.bootstrap, bus_topics.dlq, 1)

    assert len(attempts) == FAST_RETRY.max_attempts
    assert header(dead.headers, DLQ_ATTEMPTS) == str(FAST_RETRY.max_attempts)
    # RetriableError is the kernel's one transient classification (suanli.bus re-exports it).
    assert header(dead.headers, DLQ_ERROR_CLASS) == "suanli.infra.transient.RetriableError"


async def test_on_dead_letter_hears_of_each_dead_letter_after_its_copy(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    garbage = os.urandom(32)
    await publisher.publish_raw(bus_topics.events, b"req-1", garbage, [])
    rejected = sample_event("JobCancelled", reason="reject")
    await publisher.publish(bus_topics.events, "req-2", "JobCancelled", rejected)
    await publisher.publish(
        bus_topics.events, "req-3", "JobCancelled", sample_event("JobCancelled", reason="ok")
    )
    heard: list[tuple[bytes | None, str, str, int]] = []
    handled: list[str] = []

    async def handle(event: ConsumedEvent) -> None:
        if event.record["reason"] == "reject":
            raise QuotaRejected("over quota")
        handled.append(event.record["reason"])

    async def on_dead_letter(record: Any, error: BaseException, reason: str) -> None:
        # Called once the copy is acknowledged: the dead-letter topic already holds it.
        copies = await dlq_size(bus_topics)
        heard.append((record.key, type(error).__name__, reason, copies))

    async with EventConsumer(
        bus_topics.bootstrap,
        f"g-{secrets.token_hex(3)}",
        [bus_topics.events],
        handle,
        settings=FAST_CONSUMER,
        retry=FAST_RETRY,
        on_dead_letter=on_dead_letter,
    ):
        # The three keys may sit on different partitions: no order between them is promised.
        await wait_until(lambda: handled == ["ok"] and len(heard) == 2, what="the good record, two letters")

    assert sorted((key, name, reason) for key, name, reason, _ in heard) == [
        (b"req-1", "CorruptEventError", "decode"),
        (b"req-2", "QuotaRejected", "handler"),
    ]
    # Each was heard after its own copy reached the dead-letter topic: the first saw one, the second two.
    assert [copies for *_, copies in heard] == [1, 2]
