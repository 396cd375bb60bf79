"""Helpers for the event store's integration tests: filling an outbox, reading a topic back, waiting.

A plain module (test folders are not packages), imported by this folder's conftest and tests.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from suanli.bus.headers import EVENT_ID, header
from suanli.eventstore import NewEvent, OutboxMessage, PostgresEventStore
from suanli.infra.polling import until

DEADLINE_S = 60.0
EVENT_NAME = "RelayProbe"


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = DEADLINE_S) -> None:
    await until(check, timeout_s, what, every=0.02)


@dataclass
class Written:
    """What went into the outbox: every event id, and each key's values in the order written."""

    event_ids: set[str] = field(default_factory=set)
    by_key: dict[bytes, list[bytes]] = field(default_factory=dict)


async def fill_outbox(
    store: PostgresEventStore, topic: str, total: int, *, keys: int = 8, chunk: int = 50
) -> Written:
    """`total` events over `keys` streams, appended in round-robin chunks so keys interleave by outbox id."""
    written = Written()
    versions = [0] * keys
    sent = 0
    async with store.transaction() as tx:
        while sent < total:
            k = (sent // chunk) % keys
            key = f"stream-{k}".encode()
            count = min(chunk, total - sent)
            events = [
                NewEvent(uuid.uuid4(), EVENT_NAME, f"stream-{k}:{versions[k] + i + 1}".encode())
                for i in range(count)
            ]
            outbox = [OutboxMessage.for_event(topic, key, e) for e in events]
            versions[k] = await tx.append(f"stream-{k}", versions[k], events, outbox=outbox)
            written.event_ids.update(str(e.event_id) for e in events)
            written.by_key.setdefault(key, []).extend(e.payload for e in events)
            sent += count
    return written


async def unpublished(store: PostgresEventStore) -> int:
    return await store.pool.fetchval(f"SELECT count(*) FROM {store.schema}.outbox WHERE published_at IS NULL")


async def published(store: PostgresEventStore) -> int:
    return await store.pool.fetchval(
        f"SELECT count(*) FROM {store.schema}.outbox WHERE published_at IS NOT NULL"
    )


async def until_drained(store: PostgresEventStore, what: str) -> None:
    """Wait until a relay has marked every outbox row published."""

    async def drained() -> bool:
        return await unpublished(store) == 0

    await eventually(drained, what)


@dataclass
class TopicContents:
    records: list[ConsumerRecord[bytes, bytes]]

    def event_ids(self) -> list[str]:
        return [header(r.headers, EVENT_ID) or "" for r in self.records]

    def duplicates(self) -> int:
        return len(self.records) - len(set(self.event_ids()))

    def first_seen_by_key(self) -> dict[bytes, list[bytes]]:
        """Each key's values in topic order, keeping only the first delivery of each event."""
        seen: set[str] = set()
        by_key: dict[bytes, list[bytes]] = {}
        for record, event_id in zip(self.records, self.event_ids(), strict=True):
            if event_id in seen:
                continue
            seen.add(event_id)
            by_key.setdefault(record.key or b"", []).append(record.value or b"")
        return by_key

    def counts(self) -> Counter[str]:
        return Counter(self.event_ids())


async def read_topic(
    bootstrap: str, topic: str, partitions: int, expected_ids: set[str], *, timeout_s: float = DEADLINE_S
) -> TopicContents:
    """Every record of `topic` from the beginning (no group), once all `expected_ids` were seen and two
    further fetches came back empty (Tansu's end offsets are unreliable, so empty fetches mark the end).
    """
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=200)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[ConsumerRecord[bytes, bytes]] = []
        seen: set[str] = set()
        empty_fetches = 0
        deadline = time.monotonic() + timeout_s
        while True:
            batch = await consumer.getmany(timeout_ms=500)
            fetched = [r for tp in sorted(batch, key=lambda tp: tp.partition) for r in batch[tp]]
            empty_fetches = 0 if fetched else empty_fetches + 1
            if empty_fetches >= 2 and expected_ids <= seen:
                return TopicContents(records)
            if time.monotonic() > deadline:
                missing = len(expected_ids - seen)
                raise AssertionError(f"{topic}: {missing} of {len(expected_ids)} missing after {timeout_s}s")
            records.extend(fetched)
            seen.update(header(r.headers, EVENT_ID) or "" for r in fetched)
    finally:
        await consumer.stop()
