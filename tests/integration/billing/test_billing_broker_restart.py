"""Billing across a broker that restarts empty (its own broker: the session's is shared). The consumer's
keeper sees the new cluster, replaces the consumer by one that reads the recreated topics from the
beginning, and the usage written after the restart is billed; what was billed before is not billed again.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from billing_testkit import JAN, PRICEBOOK, Env, ManualClock, Window, config, eventually

from suanli.billing.entrypoints.service import running
from suanli.bus import EventPublisher
from suanli.infra.broker import BrokerProcess

pytestmark = pytest.mark.timeout(120)


async def test_usage_written_after_the_broker_restarted_empty_is_billed(
    broker: BrokerProcess, pg_dsn: str, tmp_path: Path
) -> None:
    book = tmp_path / "pricebook.yaml"
    book.write_text(PRICEBOOK)
    env = Env(broker.bootstrap, pg_dsn, "restart", f"bil_{secrets.token_hex(4)}", book)
    ws = [
        Window("job-std", "job-std/t0", "n-east", JAN + timedelta(minutes=i), 60, h200_cu=100)
        for i in range(8)
    ]

    async def charges() -> int:
        return int(await env.fetchval("SELECT count(*) FROM {s}.charges"))

    async with running(config(env), ManualClock(datetime(2025, 1, 20, tzinfo=UTC))) as billing:
        async with EventPublisher(env.bootstrap) as publisher:
            await env.publish_facts(publisher)
            await env.publish_usage(publisher, ws[:6])
        await eventually(charges, lambda n: n == 6)
        assert billing.consumer.rebuilds == 0

        async def rebuilds() -> int:
            return billing.consumer.rebuilds

        broker.stop()
        broker.start()  # the same port, nothing kept
        await eventually(rebuilds, lambda n: n == 1)
        # Fewer records than before: a consumer left at its old positions would skip them.
        async with EventPublisher(env.bootstrap) as publisher:
            await env.publish_usage(publisher, ws[6:])
        await eventually(charges, lambda n: n == 8)
        billed = "SELECT count(DISTINCT usage_event_id) FROM {s}.charges"
        assert await env.fetchval(billed) == 8
