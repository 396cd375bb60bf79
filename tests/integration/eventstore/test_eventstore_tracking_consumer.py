"""A consumer whose effect lands in PostgreSQL applies each event exactly once despite redeliveries."""

from __future__ import annotations

import uuid

from aiokafka.structs import ConsumerRecord
from conftest import PARTITIONS
from relay_testkit import fill_outbox, read_topic, until_drained

from suanli.bus.headers import EVENT_ID, header
from suanli.bus.publisher import EventPublisher
from suanli.eventstore import OutboxRelay, PostgresEventStore, PostgresOutboxFeed, Transaction, apply_once
from suanli.eventstore.kafka_sink import KafkaOutboxSink

GROUP = "probe-projector"


async def _relay_until_drained(pg_dsn: str, store: PostgresEventStore, bootstrap: str) -> None:
    async with (
        EventPublisher(bootstrap) as publisher,
        OutboxRelay(PostgresOutboxFeed(pg_dsn, schema=store.schema), KafkaOutboxSink(publisher)),
    ):
        await until_drained(store, "outbox drained")


async def _apply_all(store: PostgresEventStore, records: list[ConsumerRecord[bytes, bytes]]) -> int:
    applied = 0
    for record in records:
        event_id = uuid.UUID(header(record.headers, EVENT_ID))

        async def effect(tx: Transaction, event_id: uuid.UUID = event_id) -> None:
            # The offset guards redelivery of this record; the key guards the relay's re-sends of the
            # same event at other offsets (at-least-once publishing).
            await tx.connection.execute(
                f"INSERT INTO {store.schema}.projected (event_id) VALUES ($1) ON CONFLICT DO NOTHING",
                event_id,
            )

        if await apply_once(store, GROUP, record.topic, record.partition, record.offset, effect):
            applied += 1
    return applied


async def test_tracking_consumer_applies_each_event_exactly_once(
    pg_dsn: str, pg_store: PostgresEventStore, kafka_bootstrap: str, relay_topic: str
) -> None:
    total = 1_000
    written = await fill_outbox(pg_store, relay_topic, total, keys=8, chunk=20)
    await pg_store.pool.execute(f"CREATE TABLE {pg_store.schema}.projected (event_id uuid PRIMARY KEY)")
    await _relay_until_drained(pg_dsn, pg_store, kafka_bootstrap)
    # Re-send the first 400 rows, as a relay killed before marking them would: the topic now holds
    # every one of those events twice, at different offsets.
    await pg_store.pool.execute(
        f"UPDATE {pg_store.schema}.outbox SET published_at = NULL WHERE id IN "
        f"(SELECT id FROM {pg_store.schema}.outbox ORDER BY id LIMIT 400)"
    )
    await _relay_until_drained(pg_dsn, pg_store, kafka_bootstrap)

    contents = await read_topic(kafka_bootstrap, relay_topic, PARTITIONS, written.event_ids)
    assert (len(contents.records), contents.duplicates()) == (1_400, 400)

    first_pass = await _apply_all(pg_store, contents.records)
    # A consumer of the same group starting over from the beginning (offsets reset, a rebalance replay).
    second_pass = await _apply_all(pg_store, contents.records)

    assert first_pass == 1_400  # every offset applied once...
    assert second_pass == 0  # ...and never again
    rows = await pg_store.pool.fetchval(f"SELECT count(*) FROM {pg_store.schema}.projected")
    assert rows == len(written.event_ids) == total
    tracked = await pg_store.pool.fetch(
        f"SELECT partition, last_offset FROM {pg_store.schema}.tracking WHERE group_id = $1", GROUP
    )
    last_offsets = {p: max(r.offset for r in contents.records if r.partition == p) for p in range(PARTITIONS)}
    assert {r["partition"]: r["last_offset"] for r in tracked} == {p: o for p, o in last_offsets.items()}
