"""Billing test kit: event builders, the price book of the tests, amounts computed independently."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from suanli.billing.entrypoints.settings import BillingSettings
from suanli.bus import EventPublisher, topics
from suanli.contracts import default_registry, sample_records

T = TypeVar("T")

# Prices per CU-hour chosen so every window's amount is exact at 6 places.
PRICEBOOK = """
currency: CNY
granularity: {seconds: 1, rounding: ROUND_UP}
amount: {scale: 6, rounding: ROUND_HALF_EVEN}
tiers:
  - {name: standard, min_priority: 0}
  - {name: best-effort}
versions:
  - effective_from: "2025-01-01T00:00:00Z"
    rates:
      - {device_class: "*", cu_hour: "1.80"}
      - {device_class: h200, cu_hour: "3.60"}
      - {device_class: h200, region: cn-west, cu_hour: "2.88"}
    discounts: {preemptible: "0.25", tiers: {best-effort: "0.50"}}
"""
PRICES = {
    ("h200", "cn-east"): Decimal("3.60"),
    ("h200", "cn-west"): Decimal("2.88"),
    ("cpu", "cn-east"): Decimal("1.80"),
}
JAN = datetime(2025, 1, 10, 8, 0, tzinfo=UTC)


class ManualClock:
    def __init__(self, now: datetime) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current


async def eventually(probe: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout_s: float = 30) -> T:
    """Poll `probe` until `ok(value)` or the deadline; fail with the last value seen."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    value = await probe()
    while not ok(value):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s; last value: {value!r}")
        await asyncio.sleep(0.05)
        value = await probe()
    return value


@dataclass(frozen=True)
class Window:
    """One UsageMetered: `gpus` whole GPUs of `cu` CU each (+ optional CPU CU) for `seconds`."""

    job: str
    task: str
    node: str
    start: datetime
    seconds: int
    h200_cu: int = 0
    cpu_cu: int = 0
    tenant: str = "acme"

    @property
    def event_id(self) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{self.task}/{self.start.isoformat()}"))

    def record(self) -> dict[str, Any]:
        cu: dict[str, float] = {}
        if self.h200_cu:
            cu["h200"] = float(self.h200_cu * self.seconds)
        if self.cpu_cu:
            cu["cpu"] = float(self.cpu_cu * self.seconds)
        end = self.start + timedelta(seconds=self.seconds)
        return {
            "event_id": self.event_id,
            "occurred_at": end,
            "producer": "test/metering",
            "subject_id": self.task,
            "task_id": self.task,
            "job_id": self.job,
            "tenant": self.tenant,
            "queue": "default",
            "node_id": self.node,
            "window_start": self.start,
            "window_end": end,
            "cu_seconds": cu,
            "gpu_milli_seconds": 1000 * self.seconds,
            "cpu_milli_seconds": 0,
            "attempt": 1,
            "efficiency": None,
        }


def job_submitted(job: str, tenant: str, priority: int, preemptible: bool) -> dict[str, Any]:
    base = sample_records(default_registry().current("JobSubmitted"))[0]
    return {
        **base,
        "event_id": str(uuid.uuid4()),
        "occurred_at": JAN - timedelta(days=1),
        "subject_id": job,
        "job_id": job,
        "tenant": tenant,
        "priority": priority,
        "preemptible": preemptible,
    }


def node_capacity(node: str, region: str) -> dict[str, Any]:
    base = sample_records(default_registry().current("NodeCapacityChanged"))[0]
    return {**base, "event_id": str(uuid.uuid4()), "subject_id": node, "node_id": node, "region": region}


@dataclass
class Env:
    bootstrap: str
    dsn: str
    prefix: str
    schema: str
    pricebook: Path

    def topic(self, name: str) -> str:
        return topics.topic_name(name, self.prefix)

    async def publish_facts(self, publisher: EventPublisher) -> None:
        for node, region in (("n-east", "cn-east"), ("n-west", "cn-west")):
            await publisher.publish(
                self.topic("capacity.nodes"), node, "NodeCapacityChanged", node_capacity(node, region)
            )
        for job, tenant, priority, preemptible in (
            ("job-std", "acme", 10, False),
            ("job-cheap", "acme", -1, True),
            ("job-other", "globex", 5, False),
        ):
            await publisher.publish(
                self.topic("jobs.events"),
                job,
                "JobSubmitted",
                job_submitted(job, tenant, priority, preemptible),
            )

    async def publish_usage(self, publisher: EventPublisher, windows: list[Window]) -> None:
        # One acknowledged batch, not one round trip per event.
        await publisher.publish_many(
            [
                publisher.encode(self.topic("usage.metered"), w.task, "UsageMetered", w.record())
                for w in windows
            ]
        )

    async def fetchval(self, sql: str, *args: Any) -> Any:
        conn = await asyncpg.connect(self.dsn)
        try:
            return await conn.fetchval(sql.replace("{s}", self.schema), *args)
        finally:
            await conn.close()


def expected_amount(w: Window, terms: dict[str, tuple[str, bool]], regions: dict[str, str]) -> Decimal:
    """Worked out from the durations and the price book above, independently of the rating code."""
    tier, preemptible = terms[w.job]
    factor = Decimal(1)
    if tier == "best-effort":
        factor *= Decimal("0.5")
    if preemptible:
        factor *= Decimal("0.75")
    total = Decimal(0)
    for cls, cu in (("h200", w.h200_cu), ("cpu", w.cpu_cu)):
        if cu:
            price = PRICES.get((cls, regions[w.node]), Decimal("1.80"))
            total += (Decimal(cu * w.seconds) * price * factor / 3600).quantize(Decimal("0.000001"))
    return total


TERMS = {"job-std": ("standard", False), "job-cheap": ("best-effort", True), "job-other": ("standard", False)}
REGIONS = {"n-east": "cn-east", "n-west": "cn-west"}


# Short sessions, so the consumer joins its group quickly on the shared broker.
FAST_SESSION_MS = 6000


def config(env: Env, group: str = "billing") -> BillingSettings:
    return BillingSettings.load(
        {},
        kafka_bootstrap=env.bootstrap,
        pg_dsn=env.dsn,
        pricebook=env.pricebook,
        db_schema=env.schema,
        topic_prefix=env.prefix,
        group=group,
        close_check_s=3600,
        listen="127.0.0.1:0",
        session_timeout_ms=FAST_SESSION_MS,
    )
