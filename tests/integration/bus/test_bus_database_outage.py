"""A consumer whose handler writes to PostgreSQL rides out the database being stopped and started again.

The server is an embedded PostgreSQL of the test's own (the shared one must stay up for everything else),
stopped with ``pg_ctl stop -m fast`` while records keep arriving and started again on the same socket.
Every record must be written exactly once and none dead-lettered: a valid record sent to the DLQ because
the database blinked is a record lost (the scheduler would miss a task's end and run it again).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import asyncpg
import pytest
from bus_testkit import FAST_CONSUMER, BusTopics, dlq_size, sample_event, wait_until

from suanli.bus import SERVICE_RETRY, ConsumedEvent, EventConsumer, EventPublisher
from suanli.infra.polling import until
from suanli.infra.postgres import PostgresEndpoint, resume_embedded, start_embedded, stop_embedded

OUTAGE_S = 8.0
RECORDS_BEFORE, RECORDS_DURING = 10, 10


@pytest.fixture
def own_postgres(service_home: Path) -> Iterator[PostgresEndpoint]:
    endpoint = start_embedded(service_home / "pg")
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture
async def ledger(own_postgres: PostgresEndpoint) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(own_postgres.dsn, min_size=1, max_size=2, command_timeout=5)
    await pool.execute("CREATE TABLE handled (event_id text PRIMARY KEY, reason text NOT NULL)")
    try:
        yield pool
    finally:
        await pool.close()


async def test_records_arriving_while_postgres_is_down_are_handled_once_it_is_back(
    bus_topics: BusTopics, publisher: EventPublisher, own_postgres: PostgresEndpoint, ledger: asyncpg.Pool
) -> None:
    assert own_postgres.data_dir is not None
    failures: list[str] = []

    async def handle(event: ConsumedEvent) -> None:
        try:
            await ledger.execute(
                "INSERT INTO handled VALUES ($1, $2) ON CONFLICT DO NOTHING",
                event.record["event_id"],
                event.record["reason"],
            )
        except Exception as exc:
            failures.append(type(exc).__name__)
            raise

    async def publish(reason: str) -> None:
        record = sample_event("JobCancelled", reason=reason)
        await publisher.publish(bus_topics.events, f"job-{secrets.token_hex(2)}", "JobCancelled", record)

    async def rows() -> int:
        return int(await ledger.fetchval("SELECT count(*) FROM handled"))

    async with EventConsumer(
        bus_topics.bootstrap,
        f"g-{secrets.token_hex(3)}",
        [bus_topics.events],
        handle,
        settings=FAST_CONSUMER,
        retry=SERVICE_RETRY,
    ):
        for i in range(RECORDS_BEFORE):
            await publish(f"before-{i}")
        await _until_rows(rows, RECORDS_BEFORE)

        stop_embedded(own_postgres.data_dir)
        for i in range(RECORDS_DURING):
            await publish(f"during-{i}")
        await wait_until(lambda: len(failures) >= 2, what="the handler failing against the stopped server")
        await asyncio.sleep(OUTAGE_S)  # the outage itself: what the test is about, not a wait for an outcome
        resume_embedded(own_postgres)

        await _until_rows(rows, RECORDS_BEFORE + RECORDS_DURING, timeout_s=SERVICE_RETRY.max_backoff_s + 20)

    reasons = {r["reason"] for r in await ledger.fetch("SELECT reason FROM handled")}
    assert reasons == {f"before-{i}" for i in range(RECORDS_BEFORE)} | {
        f"during-{i}" for i in range(RECORDS_DURING)
    }
    assert await dlq_size(bus_topics) == 0


async def _until_rows(rows: Callable[[], Awaitable[int]], n: int, *, timeout_s: float = 30.0) -> None:
    async def written() -> bool:
        try:
            return await rows() >= n
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            return False  # the server is still coming back

    await until(written, timeout_s, f"{n} records written", every=0.1)
