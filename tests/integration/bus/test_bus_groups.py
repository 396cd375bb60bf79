"""Committed offsets survive a consumer restart; stop finishes the record in hand; topics are idempotent."""

from __future__ import annotations

import asyncio
import secrets

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from bus_testkit import FAST_CONSUMER, BusTopics, sample_event, wait_until

from suanli.bus import ConsumedEvent, EventConsumer, EventPublisher, TopicSpec, ensure_topics, topics
from suanli.bus.topics import CleanupPolicy


async def test_restart_resumes_after_the_last_committed_offset(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    group = f"g-{secrets.token_hex(3)}"
    sent = [sample_event("JobCancelled", reason=str(n)) for n in range(10)]
    await _publish(publisher, bus_topics.events, sent)
    first: list[int] = []
    release = asyncio.Event()
    in_hand = asyncio.Event()

    async def handle_first(event: ConsumedEvent) -> None:
        n = int(event.record["reason"])
        if n == 5:
            in_hand.set()
            await release.wait()
        first.append(n)

    consumer = EventConsumer(
        bus_topics.bootstrap, group, [bus_topics.events], handle_first, settings=FAST_CONSUMER
    )
    await consumer.__aenter__()
    await asyncio.wait_for(in_hand.wait(), 30)
    stopping = asyncio.create_task(consumer.stop())
    await wait_until(lambda: consumer._stopping.is_set(), what="stop requested")
    release.set()
    await stopping
    assert first == [0, 1, 2, 3, 4, 5], "stop lets the record in hand finish and handles no more"

    later = [sample_event("JobCancelled", reason=str(n)) for n in range(10, 13)]
    await _publish(publisher, bus_topics.events, later)
    second: list[int] = []

    async def handle_second(event: ConsumedEvent) -> None:
        second.append(int(event.record["reason"]))

    async with EventConsumer(
        bus_topics.bootstrap, group, [bus_topics.events], handle_second, settings=FAST_CONSUMER
    ):
        await wait_until(lambda: 12 in second, what="the records after the restart")

    assert second == [6, 7, 8, 9, 10, 11, 12]


async def test_a_consumer_from_start_reads_past_positions_committed_in_an_old_log(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    """After the broker started over, the group may hold positions a consumer of the old logs committed
    (past the new logs' end): one built ``from_start`` reads every partition from its beginning and
    commits that beginning, so the group's next member starts there too."""
    group = f"g-{secrets.token_hex(3)}"
    sent = [sample_event("JobCancelled", reason=str(n)) for n in range(5)]
    await _publish(publisher, bus_topics.events, sent)
    partitions = [TopicPartition(bus_topics.events, p) for p in range(4)]
    await _commit_outside_the_group(bus_topics.bootstrap, group, {tp: 100 for tp in partitions})
    got: list[int] = []

    async def handle(event: ConsumedEvent) -> None:
        got.append(int(event.record["reason"]))

    consumer = EventConsumer(
        bus_topics.bootstrap, group, [bus_topics.events], handle, settings=FAST_CONSUMER, from_start=True
    )
    async with consumer:
        await wait_until(lambda: len(got) == 5, what="the records before the stale positions")
        assert not consumer.rewind_pending
    assert got == [0, 1, 2, 3, 4]
    committed = await _committed(bus_topics.bootstrap, group, partitions)
    assert sorted(o for o in committed.values() if o is not None) == [0, 0, 0, 5]


async def _commit_outside_the_group(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    # No member id, no generation: a group with no members accepts it, as Tansu accepts a stale
    # member's commit after a restart.
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(list(offsets))
        await consumer.commit(offsets)
    finally:
        await consumer.stop()


async def _committed(
    bootstrap: str, group: str, partitions: list[TopicPartition]
) -> dict[TopicPartition, int | None]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(partitions)
        return {tp: await consumer.committed(tp) for tp in partitions}
    finally:
        await consumer.stop()


async def _publish(publisher: EventPublisher, topic: str, records: list[dict[str, object]]) -> None:
    await publisher.publish_many([publisher.encode(topic, "job-1", "JobCancelled", r) for r in records])


async def _publish_by_job(publisher: EventPublisher, topic: str, records: list[dict[str, object]]) -> None:
    outgoing = [publisher.encode(topic, str(r["job_id"]), "JobCancelled", r) for r in records]
    await publisher.publish_many(outgoing)


async def test_ensure_topics_is_idempotent_and_creates_dead_letter_topics(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    first = await ensure_topics(kafka_bootstrap, topics.CATALOGUE, prefix=topic_prefix)
    second = await ensure_topics(kafka_bootstrap, topics.CATALOGUE, prefix=topic_prefix)

    expected = {f"{topic_prefix}.{t.name}" for t in topics.CATALOGUE}
    expected |= {f"{name}.dlq" for name in expected}
    assert set(first.created) == expected and not first.existing
    assert set(second.existing) == expected and not second.created

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        described = {t["topic"]: t for t in await admin.describe_topics(sorted(expected))}
    finally:
        await admin.close()
    for spec in topics.CATALOGUE:
        name = f"{topic_prefix}.{spec.name}"
        assert len(described[name]["partitions"]) == spec.partitions, name
        assert len(described[f"{name}.dlq"]["partitions"]) == 1


async def test_ensure_topics_reads_the_prefix_from_the_environment(
    kafka_bootstrap: str, topic_prefix: str, monkeypatch: object
) -> None:
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv(topics.TOPIC_PREFIX_ENV, topic_prefix)
    spec = TopicSpec("views", 2, "node id", CleanupPolicy.COMPACT, topics.FOREVER_MS)
    result = await ensure_topics(kafka_bootstrap, [spec], with_dlq=False)
    assert result.created == (f"{topic_prefix}.views",)


async def test_a_second_member_shares_partitions_without_rehandling_committed_records(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    group = f"g-{secrets.token_hex(3)}"
    keys = [f"node-{n}" for n in range(16)]
    early = [sample_event("JobCancelled", job_id=k, reason=f"early-{k}") for k in keys]
    await _publish_by_job(publisher, bus_topics.events, early)
    handled_a: list[str] = []
    handled_b: list[str] = []

    async def handle_a(event: ConsumedEvent) -> None:
        handled_a.append(event.record["reason"])

    async def handle_b(event: ConsumedEvent) -> None:
        handled_b.append(event.record["reason"])

    source = [bus_topics.events]
    member_a = EventConsumer(bus_topics.bootstrap, group, source, handle_a, settings=FAST_CONSUMER)
    member_b = EventConsumer(bus_topics.bootstrap, group, source, handle_b, settings=FAST_CONSUMER)
    async with member_a:
        await wait_until(lambda: len(handled_a) == len(early), what="member A handling the early records")
        async with member_b:
            # The rebalance revokes A's partitions (A commits in the listener) and splits them.
            await member_b.wait_assigned(60)
            await wait_until(lambda: 0 < len(member_a._running().assignment()) < 4, what="a split")
            late = [sample_event("JobCancelled", job_id=k, reason=f"late-{k}") for k in keys]
            await _publish_by_job(publisher, bus_topics.events, late)
            await wait_until(lambda: len(handled_a) + len(handled_b) >= 2 * len(keys), what="late records")

    assert sorted(handled_a + handled_b) == sorted([r["reason"] for r in early + late]), "each record once"
    assert handled_b and all(r.startswith("late-") for r in handled_b)
