"""Fixtures for bus tests: a fresh 4-partition topic (and its DLQ) per test, and a started publisher."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from bus_testkit import BusTopics

from suanli.bus import EventPublisher, TopicSpec, ensure_topics


@pytest.fixture
async def bus_topics(kafka_bootstrap: str, topic_prefix: str) -> BusTopics:
    spec = TopicSpec("events", 4, "subject id")
    await ensure_topics(kafka_bootstrap, [spec], prefix=topic_prefix)
    physical = spec.prefixed(topic_prefix)
    return BusTopics(kafka_bootstrap, topic_prefix, physical.name, physical.dlq)


@pytest.fixture
async def publisher(kafka_bootstrap: str) -> AsyncIterator[EventPublisher]:
    async with EventPublisher(kafka_bootstrap) as bus:
        yield bus
