"""Replaying billing's dead letters with `suanli dlq replay`: applied once, never twice.

A database outage makes billing's consumer dead-letter every usage window (retries exhausted). After the
outage the operator replays the dead-letter topic: every window is charged exactly once. Replaying it
again (with --purge) changes no balance, because billing de-duplicates by event id; the one record that
can never be billed is dead-lettered again, marked as a replay, and is all that is left.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from billing_testkit import JAN, REGIONS, TERMS, Env, ManualClock, Window, eventually, expected_amount
from click.testing import Result
from test_billing_service import balance, config
from typer.testing import CliRunner

from suanli.billing import bootstrap
from suanli.billing.entrypoints.consumer import BillingHandler
from suanli.billing.entrypoints.service import running
from suanli.bus import EventConsumer, EventPublisher, RetryPolicy, ensure_topics, topics
from suanli.cli.main import app
from suanli.clock import SystemClock

# The outage consumer gives up quickly: the test is about what happens after, not the backoff.
OUTAGE_RETRY = RetryPolicy(max_attempts=2, initial_backoff_s=0.01, max_backoff_s=0.02)


def windows() -> list[Window]:
    return [
        Window("job-std", "job-std/t0", "n-east", JAN, 60, h200_cu=100),
        Window("job-std", "job-std/t0", "n-east", JAN + timedelta(minutes=1), 60, h200_cu=100),
        Window("job-std", "job-std/t1", "n-west", JAN, 30, h200_cu=100, cpu_cu=2),
        Window("job-cheap", "job-cheap/t0", "n-east", JAN, 45, h200_cu=200),
        Window("job-other", "job-other/t0", "n-east", JAN, 60, h200_cu=100, tenant="globex"),
    ]


async def dlq(env: Env, *args: str) -> Result:
    argv = ["dlq", *args, "--bootstrap", env.bootstrap, "--prefix", env.prefix]
    return await asyncio.to_thread(CliRunner().invoke, app, argv)


async def usage_dlq(env: Env) -> dict[str, Any]:
    result = await dlq(env, "list", "-o", "json")
    assert result.exit_code == 0, result.output
    (summary,) = [
        t for t in json.loads(result.stdout)["topics"] if t["topic"] == env.topic("usage.metered.dlq")
    ]
    return summary


async def outage(env: Env, publisher: EventPublisher, bad: dict[str, Any]) -> None:
    """Billing's consumer meets a database that is gone: every usage record is dead-lettered."""
    settings = config(env)
    async with bootstrap.bootstrap(settings, bootstrap.price_book(settings), SystemClock()) as billing:
        await billing.store.close()  # the outage: every unit of work fails with a transient error
        names = {n: env.topic(n) for n in ("usage.metered", "jobs.events", "capacity.nodes")}
        handler = BillingHandler(billing.service, billing.uow, settings.group, names)
        await env.publish_usage(publisher, windows())
        await publisher.publish(env.topic("usage.metered"), "job-std/bad", "UsageMetered", bad)
        async with EventConsumer(
            env.bootstrap,
            settings.group,
            [names["usage.metered"]],
            handler,
            retry=OUTAGE_RETRY,
            settings=settings.consumer,
        ):
            await eventually(lambda: usage_dlq(env), lambda s: s["records"] == len(windows()) + 1)


async def test_replaying_twice_bills_each_window_once(env: Env) -> None:
    ws = windows()
    expected_charges = sum((w.h200_cu > 0) + (w.cpu_cu > 0) for w in ws)
    acme = sum(expected_amount(w, TERMS, REGIONS) for w in ws if w.tenant == "acme")
    bad = Window("job-std", "job-std/bad", "n-east", JAN, 60, h200_cu=1).record()
    bad["window_end"] = bad["window_start"] - timedelta(seconds=1)  # can never be billed
    inputs = [topics.spec(n) for n in ("usage.metered", "jobs.events", "capacity.nodes", "billing.events")]
    await ensure_topics(env.bootstrap, inputs, prefix=env.prefix)
    charges = "SELECT count(*) FROM {s}.charges"

    async with EventPublisher(env.bootstrap) as publisher:
        await env.publish_facts(publisher)
        await outage(env, publisher, bad)
        async with running(config(env), ManualClock(datetime(2025, 1, 20, tzinfo=UTC))):
            # The same group resumes past the dead-lettered records: nothing is billed by itself.
            assert await env.fetchval(charges) == 0

            first = await dlq(env, "replay", "usage.metered", "--yes")
            assert first.exit_code == 0 and f"replayed {len(ws) + 1} record(s)" in first.stdout, first.output
            await eventually(lambda: env.fetchval(charges), lambda n: n == expected_charges)
            assert await balance(env, "tenant:acme:receivable") == acme
            # The unbillable one failed again and says it was a replay.
            await eventually(lambda: usage_dlq(env), lambda s: s["replayed_again"] == 1)

            second = await dlq(env, "replay", "usage.metered", "--purge", "--yes")
            assert second.exit_code == 0 and f"replayed {len(ws) + 2} record(s)" in second.stdout
            # One more window per task key, after the replays in each partition: once these are billed,
            # every replayed record before them has been handled.
            later = [
                Window(job, task, node, JAN + timedelta(hours=2), 60, h200_cu=10, tenant=tenant)
                for job, task, node, tenant in sorted({(w.job, w.task, w.node, w.tenant) for w in ws})
            ]
            await env.publish_usage(publisher, later)
            total = expected_charges + len(later)
            await eventually(lambda: env.fetchval(charges), lambda n: n == total)
            await eventually(lambda: usage_dlq(env), lambda s: s["records"] == 2)

            acme_later = sum(expected_amount(w, TERMS, REGIONS) for w in later if w.tenant == "acme")
            assert await balance(env, "tenant:acme:receivable") == acme + acme_later
            assert await env.fetchval("SELECT sum(amount) FROM {s}.ledger_entries") == Decimal(0)
            assert await env.fetchval(charges) == total

    summary = await usage_dlq(env)
    # What is left past the purge mark: the unbillable record, dead-lettered by both replays.
    assert (summary["records"], summary["purged"], summary["replayed_again"]) == (2, len(ws) + 2, 2)
    shown = await dlq(env, "show", "usage.metered", "-o", "json")
    records = json.loads(shown.stdout)["records"]
    assert sorted(r["replays"] for r in records) == [1, 2]
    assert {r["record"]["task_id"] for r in records} == {"job-std/bad"}
