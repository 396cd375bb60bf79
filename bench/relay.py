"""Outbox relay throughput: rows written to a PostgreSQL outbox, published to a real broker (not a test).

Fills the outbox with `--rows` events (Avro-encoded TaskPlaced records, keyed over `--keys` streams, written
through `PostgresEventStore.append` before the clock starts), then starts one `OutboxRelay` and times until
every row is marked published, which the relay does only after Kafka acknowledged it (acks=all). So the
figure covers the SELECT of each batch, produce + acknowledgement, and the UPDATE marking the batch.

    .venv/bin/python bench/relay.py                         # starts its own Tansu and finds PostgreSQL
    .venv/bin/python bench/relay.py --rows 50000 --batch-size 500 --dsn postgresql://... --bootstrap HOST:PORT
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

from suanli.bus import EventPublisher, TopicSpec, ensure_topics
from suanli.contracts import default_registry, encode, sample_records
from suanli.eventstore import NewEvent, OutboxMessage, OutboxRelay, PostgresEventStore, PostgresOutboxFeed
from suanli.eventstore.kafka_sink import KafkaOutboxSink
from suanli.infra.broker import BrokerProcess
from suanli.infra.postgres import resolve_postgres

EVENT = "TaskPlaced"
TARGET_EVENTS_PER_S = 5_000


async def fill(store: PostgresEventStore, topic: str, rows: int, keys: int, chunk: int = 500) -> None:
    template = dict(sample_records(default_registry().current(EVENT))[0])
    versions = [0] * keys
    written = 0
    while written < rows:
        k = (written // chunk) % keys
        count = min(chunk, rows - written)
        events = []
        for _ in range(count):
            record = {**template, "event_id": str(uuid.uuid4())}
            events.append(NewEvent(uuid.UUID(record["event_id"]), EVENT, encode(EVENT, record)))
        outbox = [OutboxMessage.for_event(topic, f"node-{k:04d}".encode(), e) for e in events]
        versions[k] = await store.append(f"node-{k:04d}", versions[k], events, outbox=outbox)
        written += count


async def run(dsn: str, bootstrap: str, rows: int, keys: int, partitions: int, batch_size: int) -> float:
    suffix = secrets.token_hex(3)
    schema = f"bench_relay_{suffix}"
    spec = TopicSpec("relay", partitions, "node id")
    await ensure_topics(bootstrap, [spec], prefix=f"bench-{suffix}", with_dlq=False)
    topic = spec.prefixed(f"bench-{suffix}").name
    store = await PostgresEventStore.connect(dsn, schema=schema, max_size=2)
    try:
        await fill(store, topic, rows, keys)
        unpublished = f"SELECT count(*) FROM {schema}.outbox WHERE published_at IS NULL"
        async with EventPublisher(bootstrap) as publisher:
            relay = OutboxRelay(
                PostgresOutboxFeed(dsn, schema=schema), KafkaOutboxSink(publisher), batch_size=batch_size
            )
            started = time.perf_counter()
            async with relay:
                while await store.pool.fetchval(unpublished):
                    await asyncio.sleep(0.01)
                elapsed = time.perf_counter() - started
        assert relay.published == rows, f"relay published {relay.published} of {rows}"
        return rows / elapsed
    finally:
        async with store.pool.acquire() as conn:
            await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await store.close()


async def _check_dsn(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=64)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--dsn", default=None, help="PostgreSQL (default: SUANLI_PG_DSN, :5432, embedded)")
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap (default: start Tansu)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="suanli-bench-relay-") as tmp:
        endpoint = None
        pg_source = "--dsn"
        dsn = args.dsn
        if dsn is None:
            endpoint = resolve_postgres(data_dir=Path(tmp) / "pg")
            dsn = endpoint.dsn
            pg_source = endpoint.source
        broker = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker = BrokerProcess(log_path=Path(tmp) / "tansu.log")
            bootstrap = broker.start()
        try:
            asyncio.run(_check_dsn(dsn))
            rate = asyncio.run(run(dsn, bootstrap, args.rows, args.keys, args.partitions, args.batch_size))
        finally:
            if broker is not None:
                broker.stop()
            if endpoint is not None:
                endpoint.stop()

    print(
        f"outbox relay: {args.rows} rows, batch {args.batch_size}, {args.partitions} partitions, "
        f"{args.keys} keys, PostgreSQL {pg_source}: {rate:,.0f} events/s (target {TARGET_EVENTS_PER_S:,}) on "
        f"{os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}"
    )
    return 0 if rate >= TARGET_EVENTS_PER_S else 1


if __name__ == "__main__":
    sys.exit(main())
