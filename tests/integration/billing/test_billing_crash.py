"""`suanli serve billing` SIGKILLed mid-way and restarted: totals equal the single-pass totals."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable
from datetime import timedelta
from decimal import Decimal

import asyncpg
from billing_testkit import JAN, REGIONS, TERMS, Env, Window, eventually, expected_amount

from suanli.bus import EventPublisher, ensure_topics, topics

USAGE_EVENTS = 400


def start(env: Env) -> subprocess.Popen[bytes]:
    environ = {
        **os.environ,
        "SUANLI_KAFKA_BOOTSTRAP": env.bootstrap,
        "SUANLI_PG_DSN": env.dsn,
        "SUANLI_TOPIC_PREFIX": env.prefix,
        "SUANLI_BILLING_SCHEMA": env.schema,
        "SUANLI_BILLING_PRICEBOOK": str(env.pricebook),
        "SUANLI_BILLING_LISTEN": "127.0.0.1:0",
        "SUANLI_BILLING_CLOSE_CHECK_S": "3600",
        # The killed member's partitions move after this; Tansu makes the restart wait for it.
        "SUANLI_BILLING_SESSION_TIMEOUT_MS": "6000",
    }
    environ.pop("SUANLI_METRICS_PORT", None)
    return subprocess.Popen(
        [sys.executable, "-m", "suanli.cli.main", "serve", "billing"],
        env=environ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def test_sigkilled_consumer_restarts_to_single_pass_totals(env: Env) -> None:
    ws = [
        Window(
            "job-std",
            f"job-std/t{i % 8}",
            "n-east" if i % 2 else "n-west",
            JAN + timedelta(minutes=i // 8),
            60,
            h200_cu=100 + i,
            cpu_cu=i % 3,
        )
        for i in range(USAGE_EVENTS)
    ]
    expected_charges = sum((w.h200_cu > 0) + (w.cpu_cu > 0) for w in ws)
    expected_total = sum(expected_amount(w, TERMS, REGIONS) for w in ws)
    names = ("usage.metered", "jobs.events", "capacity.nodes", "billing.events")
    await ensure_topics(env.bootstrap, [topics.spec(n) for n in names], prefix=env.prefix)
    count = "SELECT count(*) FROM {s}.charges"
    process = start(env)
    try:
        async with EventPublisher(env.bootstrap) as publisher:
            # Facts first, so usage is rated in group commits of at most MAX_BATCH records (none parked):
            # the kill then lands between the commits of a long run instead of inside one big release.
            await env.publish_facts(publisher)
            facts = "SELECT (SELECT count(*) FROM {s}.job_terms) + (SELECT count(*) FROM {s}.node_regions)"
            await eventually(lambda: _or_zero(env.fetchval(facts)), lambda n: n == 5, timeout_s=60)
            await env.publish_usage(publisher, ws)
        # Kill as soon as the first charges land, while most usage is still unrated.
        await _first_charges(env, process)
        process.wait(10)
        at_kill = await env.fetchval(count)
        assert 0 < at_kill < expected_charges, "the kill must land mid-way for this test to mean anything"
        print(f"killed after {at_kill} of {expected_charges} charges")

        process = start(env)
        await eventually(lambda: env.fetchval(count), lambda n: n >= expected_charges, timeout_s=60)
        assert await env.fetchval(count) == expected_charges
        assert await env.fetchval("SELECT count(*) FROM {s}.rated_usage") == USAGE_EVENTS
        receivable = "SELECT sum(amount) FROM {s}.ledger_entries WHERE account = 'tenant:acme:receivable'"
        assert await env.fetchval(receivable) == expected_total
        assert await env.fetchval("SELECT sum(amount) FROM {s}.ledger_entries") == 0
        # Every charge announced once in the outbox, whatever the relay re-sends. (The closer also
        # invoices January at start-up: the wall clock is long past it.)
        announced = "SELECT count(*) FROM {s}.outbox WHERE event_name = 'ChargeRecorded'"
        assert await env.fetchval(announced) == expected_charges
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    assert expected_total > Decimal(0)


async def _or_zero(query: Awaitable[int]) -> int:
    try:
        return await query
    except asyncpg.UndefinedTableError:  # not migrated yet
        return 0


async def _first_charges(env: Env, process: subprocess.Popen[bytes]) -> None:
    """SIGKILL `process` within milliseconds of its first committed charge (one connection, tight poll)."""
    conn = await asyncpg.connect(env.dsn)
    try:
        deadline = asyncio.get_running_loop().time() + 60
        while asyncio.get_running_loop().time() < deadline:
            try:
                if await conn.fetchval(f"SELECT count(*) FROM {env.schema}.charges"):
                    process.send_signal(signal.SIGKILL)
                    return
            except asyncpg.UndefinedTableError:
                pass  # not migrated yet
            await asyncio.sleep(0.005)
        raise AssertionError("no charge within 60 s")
    finally:
        await conn.close()
