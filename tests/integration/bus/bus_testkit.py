"""Helpers for bus tests against the session's real broker: fast consumer settings and topic readers.

A plain module (the tests folders are not packages), imported by this folder's conftest and tests.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from suanli.bus import ConsumerSettings, RetryPolicy
from suanli.contracts import default_registry, sample_records

# Short timeouts keep a test's group join and shutdown well under a few seconds on Tansu.
FAST_CONSUMER = ConsumerSettings(
    fetch_max_wait_ms=100, poll_timeout_ms=100, session_timeout_ms=6_000, heartbeat_interval_ms=300
)
FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.02, max_backoff_s=0.1)
DEADLINE_S = 30.0


async def wait_until(predicate: Callable[[], bool], *, timeout_s: float = DEADLINE_S, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what or predicate}")
        await asyncio.sleep(0.02)


async def read_topic(
    bootstrap: str, topic: str, count: int, *, partitions: int = 1, timeout_s: float = DEADLINE_S
) -> list[ConsumerRecord[bytes, bytes]]:
    """The first ``count`` records of ``topic`` (no group, from the beginning), or fail at the deadline."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: {len(got)} of {count} records within {timeout_s}s")
            for records in (await consumer.getmany(timeout_ms=100)).values():
                got.extend(records)
        return got
    finally:
        await consumer.stop()


def sample_event(event_name: str, *, index: int = 0, **overrides: Any) -> dict[str, Any]:
    """A valid record of ``event_name`` built from its schema, with a fresh event id."""
    samples = sample_records(default_registry().current(event_name))
    record = dict(samples[index % len(samples)])
    record["event_id"] = str(uuid.uuid4())
    record.update(overrides)
    return record


@dataclass(frozen=True)
class BusTopics:
    bootstrap: str
    prefix: str
    events: str
    dlq: str


async def dlq_size(topics: BusTopics) -> int:
    """Records in the DLQ of ``topics`` (its one partition)."""
    # Every dead letter is its own batch (the DLQ producer does not linger), so Tansu's end offset is exact.
    consumer = AIOKafkaConsumer(bootstrap_servers=topics.bootstrap)
    await consumer.start()
    try:
        tp = TopicPartition(topics.dlq, 0)
        return (await consumer.end_offsets([tp]))[tp]
    finally:
        await consumer.stop()
