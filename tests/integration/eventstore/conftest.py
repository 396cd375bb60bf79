"""Fixtures for the event store against the real broker and PostgreSQL.

Isolation: each test gets its own schema (`esi_<random>`) in the session database and its own topic
(`<topic_prefix>.relay.events`), so tests can count whole tables and whole topics.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from suanli.bus.admin import ensure_topics
from suanli.bus.topics import TopicSpec
from suanli.eventstore import PostgresEventStore

PARTITIONS = 4
RELAY_TOPIC = TopicSpec("relay.events", PARTITIONS, "stream id", doc="outbox relay integration tests")


@pytest.fixture
def schema() -> str:
    return f"esi_{secrets.token_hex(4)}"


@pytest.fixture
async def pg_store(pg_dsn: str, schema: str) -> AsyncIterator[PostgresEventStore]:
    store = await PostgresEventStore.connect(pg_dsn, schema=schema, max_size=4)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def relay_topic(kafka_bootstrap: str, topic_prefix: str) -> str:
    await ensure_topics(kafka_bootstrap, [RELAY_TOPIC], prefix=topic_prefix, with_dlq=False)
    return RELAY_TOPIC.prefixed(topic_prefix).name
