"""A poison outbox row on the real broker and PostgreSQL: parked with its reason, counted, listed by the
CLI, and the rows after it delivered in order within seconds."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
from click.testing import Result
from conftest import PARTITIONS, RELAY_TOPIC
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pagekit import assert_pages, assert_refuses_garbage, follow
from relay_testkit import eventually, read_topic
from typer.testing import CliRunner

from suanli.bus.admin import ensure_topics
from suanli.bus.publisher import EventPublisher
from suanli.cli.main import app
from suanli.eventstore import NewEvent, OutboxMessage, OutboxRelay, PostgresEventStore, PostgresOutboxFeed
from suanli.eventstore.kafka_sink import RELAY_PRODUCER, KafkaOutboxSink
from suanli.eventstore.parking import ParkingPolicy
from suanli.eventstore.relay import OutboxMetrics
from suanli.infra.broker import BrokerProcess
from suanli.telemetry.names import OUTBOX_PARKED

# Later rows must flow within seconds of the relay meeting the poison row, not after retries.
FLOW_DEADLINE_S = 10.0


async def append(store: PostgresEventStore, topic: str, stream: str, payloads: list[bytes]) -> list[str]:
    events = [NewEvent(uuid.uuid4(), "RelayProbe", p) for p in payloads]
    version = await store.stream_version(stream)
    outbox = [OutboxMessage.for_event(topic, stream.encode(), e) for e in events]
    await store.append(stream, version, events, outbox=outbox)
    return [str(e.event_id) for e in events]


def parked_total(reader: InMemoryMetricReader) -> float:
    data = reader.get_metrics_data()
    return sum(
        point.value
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == OUTBOX_PARKED
        for point in m.data.data_points
    )


async def test_an_oversize_row_is_parked_and_later_rows_flow_in_order(
    pg_dsn: str, pg_store: PostgresEventStore, kafka_bootstrap: str, relay_topic: str
) -> None:
    before = [f"before-{i}".encode() for i in range(20)]
    after = [f"after-{i}".encode() for i in range(20)]
    good_ids = await append(pg_store, relay_topic, "s", before)
    # One byte over what the relay's producer may send (the broker's limit on Apache Kafka is the same
    # message.max.bytes the producer's max_request_size mirrors).
    (poison_id,) = await append(pg_store, relay_topic, "s", [b"x" * (RELAY_PRODUCER.max_request_size + 1)])
    good_ids += await append(pg_store, relay_topic, "s", after)
    # Another key behind the poison row, in a later transaction, must not wait either.
    good_ids += await append(pg_store, relay_topic, "other", [b"other-0"])

    reader = InMemoryMetricReader()
    metrics = OutboxMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    pending = (
        f"SELECT count(*) FROM {pg_store.schema}.outbox WHERE published_at IS NULL AND parked_at IS NULL"
    )
    started = time.monotonic()
    async with (
        EventPublisher(kafka_bootstrap, settings=RELAY_PRODUCER) as publisher,
        OutboxRelay(
            PostgresOutboxFeed(pg_dsn, schema=pg_store.schema),
            KafkaOutboxSink(publisher),
            batch_size=10,
            poll_interval=0.2,
            metrics=metrics,
        ) as relay,
    ):

        async def flowed() -> bool:
            return await pg_store.pool.fetchval(pending) == 0

        await eventually(flowed, "every good row published around the poison row", timeout_s=FLOW_DEADLINE_S)
        flow_s = time.monotonic() - started
    assert flow_s < FLOW_DEADLINE_S
    assert relay.parked == 1 and relay.failures == 0

    contents = await read_topic(kafka_bootstrap, relay_topic, PARTITIONS, set(good_ids))
    assert contents.duplicates() == 0
    assert poison_id not in contents.event_ids()
    assert contents.first_seen_by_key() == {b"s": before + after, b"other": [b"other-0"]}

    (row,) = await pg_store.parked_outbox()
    assert (row.topic, row.size, row.attempts) == (relay_topic, RELAY_PRODUCER.max_request_size + 1, 1)
    assert row.reason.startswith("MessageSizeTooLargeError")
    assert parked_total(reader) == 1

    # The operator's view: the CLI lists it with its reason, without migrating or changing anything.
    result = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        [
            "outbox",
            "parked",
            "--dsn",
            pg_dsn,
            "--schema",
            pg_store.schema,
            "--schema",
            "nosuch",
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [(r["id"], r["topic"], r["attempts"]) for r in listed["parked"]] == [(row.id, relay_topic, 1)]
    assert listed["parked"][0]["reason"].startswith("MessageSizeTooLargeError")
    assert listed["schemas_without_outbox"] == ["nosuch"]

    refused = await asyncio.to_thread(
        CliRunner().invoke, app, ["outbox", "unpark", "999999", "--dsn", pg_dsn, "--schema", pg_store.schema]
    )
    assert refused.exit_code == 2 and "not parked: 999999" in refused.output


async def test_a_broker_outage_is_waited_out_and_nothing_is_parked(
    pg_dsn: str, pg_store: PostgresEventStore, service_home: Path
) -> None:
    """The errors a real outage produces are transient: with parking after a single non-transient
    failure, a broker frozen (SIGSTOP) under the relay parks nothing and counts no attempt, and every
    row arrives in order once it answers again."""
    broker = BrokerProcess(log_path=service_home / "tansu.log")
    bootstrap = broker.start()
    assert broker.pid is not None
    try:
        await ensure_topics(bootstrap, [RELAY_TOPIC], prefix="outage", with_dlq=False)
        topic = RELAY_TOPIC.prefixed("outage").name
        ids = await append(pg_store, topic, "s", [b"before"])
        settings = replace(RELAY_PRODUCER, request_timeout_ms=1_000)
        pending = f"SELECT count(*) FROM {pg_store.schema}.outbox WHERE published_at IS NULL"

        async def drained() -> bool:
            return await pg_store.pool.fetchval(pending) == 0

        async with (
            EventPublisher(bootstrap, settings=settings) as publisher,
            OutboxRelay(
                PostgresOutboxFeed(pg_dsn, schema=pg_store.schema),
                KafkaOutboxSink(publisher),
                poll_interval=0.1,
                min_backoff=0.05,
                max_backoff=0.2,
                parking=ParkingPolicy(max_attempts=1),
            ) as relay,
        ):
            await eventually(drained, "the first row published")
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                ids += await append(pg_store, topic, "s", [f"during-{i}".encode() for i in range(10)])

                async def failing() -> bool:
                    return relay.failures >= 2

                await eventually(failing, "the relay failing against the frozen broker")
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            await eventually(drained, "every row published after the outage")
        assert relay.parked == 0
        assert await pg_store.parked_outbox() == []
        assert await pg_store.pool.fetchval(f"SELECT max(attempts) FROM {pg_store.schema}.outbox") == 0
        contents = await read_topic(bootstrap, topic, PARTITIONS, set(ids))
        assert contents.first_seen_by_key() == {
            b"s": [b"before", *(f"during-{i}".encode() for i in range(10))]
        }
    finally:
        broker.stop()


async def test_outbox_parked_pages_newest_first_across_schemas(
    pg_store: PostgresEventStore, pg_dsn: str, schema: str
) -> None:
    # Rows of both schemas parked at the same instants, so that pages must order ties by schema and id.
    at = [datetime(2026, 12, 1, 10, tzinfo=UTC) + timedelta(seconds=s) for s in (0, 1, 1, 2)]
    other = f"{schema}_b"
    async with await PostgresEventStore.connect(pg_dsn, schema=other, max_size=1) as second:
        for store in (pg_store, second):
            await append(store, "t", "s", [b"x"] * len(at))
    conn = await asyncpg.connect(pg_dsn)
    try:
        for name in (schema, other):
            await conn.execute(
                f"UPDATE {name}.outbox AS o SET parked_at = p.at, last_error = 'refused'"
                " FROM unnest($1::timestamptz[]) WITH ORDINALITY AS p(at, n) WHERE o.id = p.n",
                at,
            )
    finally:
        await conn.close()
    argv = ["outbox", "parked", "--dsn", pg_dsn, "--schema", schema, "--schema", other, "-o", "json"]

    def run(extra: Sequence[str]) -> Result:
        return CliRunner().invoke(app, [*argv, *extra])

    def parse(stdout: str) -> list[tuple[str, str, int]]:
        return [(r["parked_at"], r["schema"], r["id"]) for r in json.loads(stdout)["parked"]]

    everything = parse((await asyncio.to_thread(run, ["--limit", "0"])).stdout)
    assert len(everything) == 2 * len(at)
    pages = await asyncio.to_thread(follow, run, parse, 3)
    assert_pages(pages, everything, newest=lambda row: row)
    await asyncio.to_thread(assert_refuses_garbage, run)
