"""Billing's rating throughput and cost (not a test): `suanli serve billing` against a real broker and
PostgreSQL, fed UsageMetered records until every one is charged.

Starts billing as its own process (the shipped price book), publishes the facts usage is priced by (the
jobs' terms, the nodes' regions) and waits until billing holds them, then publishes `--usage` records:
- backlog (default): all at once, as after a restart or an outage; the figure is usage rated per second
  from the first publish to the last charge committed;
- `--rate R`: R records a second for `--seconds`, as in steady operation; the figures are the delay from
  a record's publish to its charge's commit (p50/p99) and billing's CPU per 1,000 records.
Both print billing's CPU seconds (user + system, from /proc) per 1,000 records.

    .venv/bin/python bench/billing.py                      # 5,000 usage records as one backlog
    .venv/bin/python bench/billing.py --rate 100 --seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import psutil

from suanli.bus import EventPublisher, ensure_topics, topic_name, topics
from suanli.contracts import default_registry, sample_records
from suanli.data import data_path
from suanli.infra.broker import BrokerProcess
from suanli.infra.postgres import resolve_postgres

PRICEBOOK = data_path("deploy/billing/pricebook.yaml")
START = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
NODES = {f"node-{i:02d}": ("cn-east", "cn-west", "eu-central")[i % 3] for i in range(30)}
JOBS = [f"job-{i:03d}" for i in range(200)]


def fact(event: str, **fields: Any) -> dict[str, Any]:
    base = sample_records(default_registry().current(event))[0]
    return {**base, "event_id": str(uuid.uuid4()), **fields}


def usage(n: int) -> dict[str, Any]:
    """Usage record n: a job and node by turn, one minute of one GPU (and two CPU CU every other one)."""
    job, node = JOBS[n % len(JOBS)], list(NODES)[n % len(NODES)]
    start = START + timedelta(minutes=n // len(JOBS))
    end = start + timedelta(seconds=60)
    cu = {"h200": 989.0 * 60} | ({"cpu": 2.0 * 60} if n % 2 else {})
    return {
        "event_id": str(uuid.uuid4()),
        "occurred_at": end,
        "producer": "bench/metering",
        "subject_id": f"{job}/t{n % 4}",
        "task_id": f"{job}/t{n % 4}",
        "job_id": job,
        "tenant": ("acme", "globex", "initech")[n % 3],
        "queue": "default",
        "node_id": node,
        "window_start": start,
        "window_end": end,
        "cu_seconds": cu,
        "gpu_milli_seconds": 60_000,
        "cpu_milli_seconds": 0,
        "attempt": 1,
        "efficiency": None,
    }


def start_billing(bootstrap: str, dsn: str, prefix: str, schema: str, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "SUANLI_KAFKA_BOOTSTRAP": bootstrap,
        "SUANLI_PG_DSN": dsn,
        "SUANLI_TOPIC_PREFIX": prefix,
        "SUANLI_BILLING_SCHEMA": schema,
        "SUANLI_BILLING_PRICEBOOK": str(PRICEBOOK),
        "SUANLI_BILLING_LISTEN": "127.0.0.1:0",
        "SUANLI_BILLING_CLOSE_CHECK_S": "3600",
    }
    env.pop("SUANLI_METRICS_PORT", None)
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "suanli.cli.main", "serve", "billing"], env=env, stdout=out, stderr=out
        )


async def count(conn: asyncpg.Connection, sql: str) -> int:
    try:
        return int(await conn.fetchval(sql))
    except asyncpg.UndefinedTableError:  # not migrated yet
        return 0


async def until(conn: asyncpg.Connection, sql: str, target: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while await count(conn, sql) < target:
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {sql} < {target}")
        await asyncio.sleep(0.01)


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


async def run(args: argparse.Namespace, dsn: str, bootstrap: str, log: Path) -> dict[str, float]:
    suffix = secrets.token_hex(3)
    prefix, schema = f"bench-{suffix}", f"bench_billing_{suffix}"
    names = ("usage.metered", "jobs.events", "capacity.nodes", "billing.events")
    await ensure_topics(bootstrap, [topics.spec(n) for n in names], prefix=prefix)
    process = start_billing(bootstrap, dsn, prefix, schema, log)
    conn = await asyncpg.connect(dsn)
    try:
        async with EventPublisher(bootstrap) as publisher:
            facts = [
                publisher.encode(
                    topic_name("capacity.nodes", prefix),
                    node,
                    "NodeCapacityChanged",
                    fact("NodeCapacityChanged", subject_id=node, node_id=node, region=region),
                )
                for node, region in NODES.items()
            ] + [
                publisher.encode(
                    topic_name("jobs.events", prefix),
                    job,
                    "JobSubmitted",
                    fact(
                        "JobSubmitted",
                        subject_id=job,
                        job_id=job,
                        tenant=("acme", "globex", "initech")[i % 3],
                        priority=10,
                        preemptible=False,
                        occurred_at=START - timedelta(days=1),
                    ),
                )
                for i, job in enumerate(JOBS)
            ]
            await publisher.publish_many(facts)
            known = (
                f"SELECT (SELECT count(*) FROM {schema}.job_terms)"
                f" + (SELECT count(*) FROM {schema}.node_regions)"
            )
            await until(conn, known, len(facts), 120)
            records = [usage(n) for n in range(args.usage)]
            charges = sum(len(r["cu_seconds"]) for r in records)
            topic = topic_name("usage.metered", prefix)
            billing = psutil.Process(process.pid)
            cpu_before = cpu_s(billing)
            published: dict[str, float] = {}
            started = time.time()
            if args.rate is None:
                await publisher.publish_many(
                    [publisher.encode(topic, r["task_id"], "UsageMetered", r) for r in records]
                )
                published = dict.fromkeys((r["event_id"] for r in records), started)
            else:
                for i, r in enumerate(records):
                    delay = started + i / args.rate - time.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    published[r["event_id"]] = time.time()
                    await publisher.publish(topic, r["task_id"], "UsageMetered", r)
            await until(conn, f"SELECT count(*) FROM {schema}.charges", charges, 600)
            elapsed = time.time() - started
            cpu = cpu_s(billing) - cpu_before
            rows = await conn.fetch(
                f"SELECT usage_event_id, max(recorded_at) AS at FROM {schema}.charges GROUP BY usage_event_id"
            )
        delays = sorted(1000 * (r["at"].timestamp() - published[str(r["usage_event_id"])]) for r in rows)
        return {
            "rated_per_s": args.usage / elapsed,
            "cpu_per_1000": 1000 * cpu / args.usage,
            "p50_ms": statistics.median(delays),
            "p99_ms": delays[min(len(delays) - 1, int(0.99 * len(delays)))],
        }
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        await conn.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--usage", type=int, default=None, help="records (default 5,000; rate x seconds)")
    parser.add_argument("--rate", type=float, default=None, help="records/s (default: one backlog)")
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    if args.usage is None:
        args.usage = 5_000 if args.rate is None else int(args.rate * args.seconds)
    with tempfile.TemporaryDirectory(prefix="suanli-bench-billing-") as tmp:
        endpoint = resolve_postgres(data_dir=Path(tmp) / "pg")
        broker = BrokerProcess(log_path=Path(tmp) / "tansu.log")
        try:
            figures = asyncio.run(run(args, endpoint.dsn, broker.start(), Path(tmp) / "billing.log"))
        finally:
            broker.stop()
            endpoint.stop()
    mode = "backlog" if args.rate is None else f"{args.rate:g}/s for {args.seconds:g} s"
    print(
        f"billing, {args.usage} usage records ({mode}), PostgreSQL {endpoint.source}, "
        f"{os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}:\n"
        f"  rated {figures['rated_per_s']:,.0f} usage/s; "
        f"billing CPU {figures['cpu_per_1000']:.2f} s per 1,000;"
        f" publish -> charge committed p50 {figures['p50_ms']:,.0f} ms, p99 {figures['p99_ms']:,.0f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
