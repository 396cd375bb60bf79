"""No platform client creates a topic by asking for it: a broker that restarted empty gets its topics back
from `ensure_topics` with the catalogue's partition counts, never from the first producer (Tansu's 4)."""

from __future__ import annotations

import asyncio

import aiokafka.client
import pytest
from aiokafka import AIOKafkaConsumer

from suanli.bus import EventPublisher, ensure_topics, topics
from suanli.bus.no_auto_create import MetadataRequestWithoutCreation
from suanli.bus.publisher import ProducerSettings
from suanli.infra.broker import BrokerProcess


async def partitions_of(bootstrap: str, topic: str) -> set[int] | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        await consumer.topics()
        return consumer.partitions_for_topic(topic)
    finally:
        await consumer.stop()


async def test_a_producer_waits_for_a_missing_topic_which_is_then_created_as_catalogued(
    broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What `no_auto_create.install()` does in a service's process, undone after the test.
    monkeypatch.setattr(aiokafka.client, "MetadataRequest", MetadataRequestWithoutCreation)
    snapshots = topics.NODE_SNAPSHOTS
    async with EventPublisher(broker.bootstrap, settings=ProducerSettings(request_timeout_ms=10_000)) as bus:
        sending = asyncio.create_task(bus.publish_raw(snapshots.name, b"node-1", b"value", []))
        await asyncio.sleep(1.0)  # its metadata requests have named the topic meanwhile
        assert not sending.done()
        assert await partitions_of(broker.bootstrap, snapshots.name) is None
        await ensure_topics(broker.bootstrap, [snapshots])
        await asyncio.wait_for(sending, 30)
    assert await partitions_of(broker.bootstrap, snapshots.name) == set(range(snapshots.partitions))
