"""What the pruning jobs cost on PostgreSQL: bounded deletes of published outbox rows and old
processed-event records, as the relay and the pruner run them (issue 11, "Retention and pruning").

    .venv/bin/python bench/pruning.py [--rows 200000] [--batch 1000]

A throw-away schema gets ``--rows`` published outbox rows and as many processed-event records, all older
than a week, plus 1,000 pending outbox rows that must survive. Each table is then pruned with the
production statements (`Statements.prune_published`, `Statements.prune_processed`), ``--batch`` rows per
statement, until a statement deletes less than a batch. Printed per table: rows, statements, wall time,
median and worst statement. PostgreSQL: the one on 127.0.0.1:5432 if it answers, else an embedded one.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg

from suanli.eventstore.migrator import migrate
from suanli.eventstore.postgres import Statements, deleted_rows
from suanli.infra.testing import PostgresMode, resolve_postgres

SCHEMA = "bench_pruning"
OLD = datetime(2024, 1, 1, tzinfo=UTC)
NOW = datetime(2024, 2, 1, tzinfo=UTC)
RETENTION = timedelta(days=7)
PENDING = 1000


async def fill(conn: asyncpg.Connection, rows: int) -> None:
    await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    await migrate(conn, SCHEMA)
    await conn.execute(
        f"INSERT INTO {SCHEMA}.outbox (topic, key, event_name, value, created_at, published_at) "
        "SELECT 't', 'k', 'E', repeat('x', 300)::bytea, $1, $1 FROM generate_series(1, $2)",
        OLD,
        rows,
    )
    await conn.execute(
        f"INSERT INTO {SCHEMA}.outbox (topic, key, event_name, value, created_at) "
        "SELECT 't', 'k', 'E', 'x'::bytea, $1 FROM generate_series(1, $2)",
        NOW,
        PENDING,
    )
    await conn.execute(
        f"INSERT INTO {SCHEMA}.processed_events SELECT 'g', 'e' || i, 't', 0, i, $1 "
        "FROM generate_series(1, $2) i",
        OLD,
        rows,
    )
    await conn.execute(f"ANALYZE {SCHEMA}.outbox; ANALYZE {SCHEMA}.processed_events")


async def prune(conn: asyncpg.Connection, name: str, statement: str, batch: int) -> None:
    times: list[float] = []
    total = 0
    started = time.perf_counter()
    while True:
        at = time.perf_counter()
        deleted = deleted_rows(await conn.execute(statement, NOW - RETENTION, batch))
        times.append(time.perf_counter() - at)
        total += deleted
        if deleted < batch:
            break
    elapsed = time.perf_counter() - started
    print(
        f"{name}: {total:,} rows in {len(times)} statements, {elapsed:.2f} s; per statement "
        f"median {statistics.median(times) * 1000:.1f} ms, worst {max(times) * 1000:.1f} ms"
    )


async def main(dsn: str, rows: int, batch: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await fill(conn, rows)
        sql = Statements(SCHEMA)
        await prune(conn, "outbox (published)", sql.prune_published, batch)
        await prune(conn, "processed_events", sql.prune_processed, batch)
        left = await conn.fetchval(f"SELECT count(*) FROM {SCHEMA}.outbox WHERE published_at IS NULL")
        print(f"pending outbox rows kept: {left} of {PENDING}")
        await conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=1000)
    args = parser.parse_args()
    endpoint = resolve_postgres(PostgresMode.AUTO, data_dir=Path(tempfile.mkdtemp()) / "pg")
    try:
        asyncio.run(main(endpoint.dsn, args.rows, args.batch))
    finally:
        endpoint.stop()
