"""The outbox relay against the real broker: order per key, and no loss when the relay is SIGKILLed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

from conftest import PARTITIONS
from relay_testkit import eventually, fill_outbox, published, read_topic, until_drained

from suanli.bus.publisher import EventPublisher
from suanli.eventstore import OutboxRelay, PostgresEventStore, PostgresOutboxFeed
from suanli.eventstore.kafka_sink import KafkaOutboxSink


async def test_relay_publishes_every_row_in_order_per_key(
    pg_dsn: str, pg_store: PostgresEventStore, kafka_bootstrap: str, relay_topic: str
) -> None:
    written = await fill_outbox(pg_store, relay_topic, 2_000, keys=8, chunk=25)

    async with (
        EventPublisher(kafka_bootstrap) as publisher,
        OutboxRelay(
            PostgresOutboxFeed(pg_dsn, schema=pg_store.schema), KafkaOutboxSink(publisher), batch_size=300
        ),
    ):
        await until_drained(pg_store, "every outbox row marked published")

    contents = await read_topic(kafka_bootstrap, relay_topic, PARTITIONS, written.event_ids)
    assert contents.duplicates() == 0  # no crash, so exactly once
    assert set(contents.event_ids()) == written.event_ids
    assert contents.first_seen_by_key() == written.by_key


def _start_relay(pg_dsn: str, bootstrap: str, schema: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "suanli.eventstore.relay_main",
            "--dsn",
            pg_dsn,
            "--bootstrap",
            bootstrap,
            "--schema",
            schema,
            "--batch-size",
            "100",
            "--log-level",
            "WARNING",
            *extra,
        ],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


async def _restart_relay_until_drained(pg_dsn: str, bootstrap: str, pg_store: PostgresEventStore) -> int:
    """Start a fresh relay, let it publish the rest, then SIGTERM it; its exit code."""
    relay = _start_relay(pg_dsn, bootstrap, pg_store.schema)
    try:
        await until_drained(pg_store, "the restarted relay to publish the rest")
    finally:
        relay.send_signal(signal.SIGTERM)
        returncode = await asyncio.to_thread(relay.wait, 30)
    return returncode


async def test_relay_killed_mid_way_and_restarted_delivers_every_event(
    pg_dsn: str, pg_store: PostgresEventStore, kafka_bootstrap: str, relay_topic: str
) -> None:
    total = 5_000
    written = await fill_outbox(pg_store, relay_topic, total, keys=8, chunk=50)

    first = _start_relay(pg_dsn, kafka_bootstrap, pg_store.schema)
    try:

        async def under_way() -> bool:
            return await published(pg_store) >= 1_000

        await eventually(under_way, "the first relay to publish 1,000 rows")
    finally:
        first.send_signal(signal.SIGKILL)
        await asyncio.to_thread(first.wait, 30)
    marked_at_kill = await published(pg_store)
    assert marked_at_kill < total, "the relay finished before it was killed: the test proved nothing"

    returncode = await _restart_relay_until_drained(pg_dsn, kafka_bootstrap, pg_store)
    assert returncode == 0  # SIGTERM is a graceful stop

    contents = await read_topic(kafka_bootstrap, relay_topic, PARTITIONS, written.event_ids)
    assert set(contents.event_ids()) == written.event_ids  # none missing
    assert len(contents.records) == total + contents.duplicates()
    assert contents.first_seen_by_key() == written.by_key
    print(
        f"\nrelay SIGKILLed after {marked_at_kill}/{total} rows marked; topic holds {len(contents.records)} "
        f"records for {total} events: {contents.duplicates()} duplicates (at-least-once)"
    )


async def test_relay_killed_between_ack_and_mark_resends_that_batch(
    pg_dsn: str, pg_store: PostgresEventStore, kafka_bootstrap: str, relay_topic: str
) -> None:
    """The worst moment, hit on purpose: Kafka has the batch, PostgreSQL does not know it yet."""
    total = 1_000
    written = await fill_outbox(pg_store, relay_topic, total, keys=8, chunk=50)

    crashing = _start_relay(pg_dsn, kafka_bootstrap, pg_store.schema, "--kill-after-batches", "3")
    returncode = await asyncio.to_thread(crashing.wait, 60)
    assert returncode == -signal.SIGKILL
    assert await published(pg_store) == 200  # batches 1-2 marked; batch 3 acknowledged, not marked

    await _restart_relay_until_drained(pg_dsn, kafka_bootstrap, pg_store)

    contents = await read_topic(kafka_bootstrap, relay_topic, PARTITIONS, written.event_ids)
    assert set(contents.event_ids()) == written.event_ids
    assert contents.duplicates() == 100  # exactly the unmarked batch, sent twice
    assert contents.first_seen_by_key() == written.by_key
