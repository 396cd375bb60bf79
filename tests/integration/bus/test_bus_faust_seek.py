"""The faust worker's seek to committed offsets, against the real broker: a stream partition with no
committed offset goes back to its beginning too, not only those with one.

After a rebalance faust empties its stream buffers and counts on this seek to fetch again what they
held; aiokafka's own seek leaves a partition without a committed offset where its fetcher had got to.
In metering, records fetched before the restarted worker's recovery ended were then never handled (a
TaskStarted or TaskFinished written while no worker ran: its task was never charged). Changelog
partitions are left alone: faust positions those itself for recovery.
"""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata

from suanli.bus import TopicSpec, ensure_topics
from suanli.bus.faust import _ConsumerThread


def consumer_thread(consumer: AIOKafkaConsumer, changelogs: set[str]) -> Any:
    """The worker's consumer thread as its seek sees it: calls run here instead of in faust's thread."""
    thread: Any = _ConsumerThread.__new__(_ConsumerThread)

    async def call_thread(fun: Any, *args: Any, **kwargs: Any) -> Any:
        return await fun(*args, **kwargs)

    thread.app = SimpleNamespace(tables=SimpleNamespace(changelog_topics=changelogs))
    thread.call_thread = call_thread
    thread._ensure_consumer = lambda: consumer
    return thread


async def test_partitions_without_a_committed_offset_are_read_again_from_the_beginning(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    stream, changelog = TopicSpec("stream", 3, "key"), TopicSpec("store-changelog", 1, "key")
    await ensure_topics(kafka_bootstrap, [stream, changelog], prefix=topic_prefix, with_dlq=False)
    stream_name, changelog_name = stream.prefixed(topic_prefix).name, changelog.prefixed(topic_prefix).name
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for topic, partitions in ((stream_name, 3), (changelog_name, 1)):
            for partition in range(partitions):
                for i in range(4):
                    await producer.send_and_wait(topic, b"v", key=f"k{i}".encode(), partition=partition)
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=kafka_bootstrap,
        group_id=f"{topic_prefix}-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    await consumer.start()
    try:
        committed, bare, zero = (TopicPartition(stream_name, p) for p in range(3))
        log = TopicPartition(changelog_name, 0)
        consumer.assign([committed, bare, zero, log])
        await consumer.commit({committed: OffsetAndMetadata(2, ""), zero: OffsetAndMetadata(0, "")})
        # The fetcher got to the end of every partition (records faust then dropped from its buffers).
        for tp in (committed, bare, zero, log):
            consumer.seek(tp, 4)

        offsets = await consumer_thread(consumer, {changelog_name}).seek_to_committed()

        assert offsets == {committed: 2, bare: None, zero: 0, log: None}
        positions = {tp: await consumer.position(tp) for tp in (committed, bare, zero, log)}
        assert positions == {committed: 2, bare: 0, zero: 0, log: 4}
    finally:
        await consumer.stop()
