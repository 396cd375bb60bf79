"""Short billing periods on the real broker and PostgreSQL: the closer invoices a period once it ended
(rows whose totals are the charges'), the defaults of each RPC, and NOT_FOUND for an unknown tenant."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import grpc
import pytest
from billing_testkit import REGIONS, TERMS, Env, ManualClock, Window, eventually, expected_amount

from suanli.api.billing.v1 import billing_pb2 as pb
from suanli.api.billing.v1 import billing_pb2_grpc as pb_grpc
from suanli.billing.bootstrap import CalendarMismatch
from suanli.billing.entrypoints.service import RunningBilling, running
from suanli.billing.entrypoints.settings import BillingSettings
from suanli.bus import EventPublisher

pytestmark = pytest.mark.timeout(120)

FAST_SESSION_MS = 6000
MINUTE = datetime(2025, 1, 20, 10, 0, tzinfo=UTC)  # a period of the 1-minute calendar: 10:00..10:01
GRACE_S = 5


def windows() -> list[Window]:
    """acme in the 10:00 period, and one window across its end that rating cuts at 10:01."""
    return [
        Window("job-std", "job-std/t0", "n-east", MINUTE, 20, h200_cu=100),
        Window("job-std", "job-std/t0", "n-east", MINUTE + timedelta(seconds=20), 20, h200_cu=100),
        Window(
            "job-cheap", "job-cheap/t0", "n-west", MINUTE + timedelta(seconds=5), 30, h200_cu=200, cpu_cu=2
        ),
        Window("job-std", "job-std/t1", "n-east", MINUTE + timedelta(seconds=50), 20, h200_cu=60),
        Window("job-other", "job-other/t0", "n-east", MINUTE, 30, h200_cu=100, tenant="globex"),
    ]


def settings(env: Env) -> BillingSettings:
    return BillingSettings.load(
        {"SUANLI_BILLING_PERIOD": "1m"},
        kafka_bootstrap=env.bootstrap,
        pg_dsn=env.dsn,
        pricebook=env.pricebook,
        db_schema=env.schema,
        topic_prefix=env.prefix,
        close_grace_s=GRACE_S,
        close_check_s=0.1,  # the closer runs on the injected clock; it only has to look often
        listen="127.0.0.1:0",
        session_timeout_ms=FAST_SESSION_MS,
    )


async def refused(call: Awaitable[Any]) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as error:
        await call
    return error.value.code(), error.value.details() or ""


@contextlib.asynccontextmanager
async def stub_of(billing: RunningBilling) -> AsyncIterator[pb_grpc.BillingStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{billing.grpc_port}") as channel:
        yield pb_grpc.BillingStub(channel)


async def test_a_closed_short_period_is_invoiced_with_the_charges_totals(env: Env) -> None:
    clock = ManualClock(MINUTE + timedelta(seconds=30))
    acme_windows = [w for w in windows() if w.tenant == "acme"]
    async with (
        EventPublisher(env.bootstrap) as publisher,
        running(settings(env), clock) as billing,
        stub_of(billing) as stub,
    ):
        await env.publish_facts(publisher)
        await env.publish_usage(publisher, windows())
        # 4 acme windows, one with CPU, one cut at 10:01 into two pieces; 1 globex window.
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == 7)

        # While 10:00 runs there is no invoice: the default answers so, and closing it is refused.
        code, details = await refused(stub.GetInvoice(pb.GetInvoiceRequest(tenant="acme")))
        assert (code, details) == (
            grpc.StatusCode.NOT_FOUND,
            f"no invoice issued to tenant 'acme' yet: a period is invoiced {GRACE_S} s after it ends",
        )
        usage = await stub.GetUsage(pb.GetUsageRequest(tenant="acme"))  # default: the running period
        assert usage.period.label == "2025-01-20T10:00Z"
        code, _ = await refused(stub.ClosePeriod(pb.ClosePeriodRequest(tenant="acme", period="current")))
        assert code is grpc.StatusCode.FAILED_PRECONDITION

        # The period ends and its grace passes: the closer issues both tenants' invoices by itself.
        clock.current = MINUTE + timedelta(minutes=1, seconds=GRACE_S)
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.invoices"), lambda n: n == 2)

        invoice = await stub.GetInvoice(pb.GetInvoiceRequest(tenant="acme"))  # default: the latest
        assert invoice.period.label == "2025-01-20T10:00Z"
        assert invoice == await stub.GetInvoice(pb.GetInvoiceRequest(tenant="acme", period="previous"))
        charged = await env.fetchval(
            "SELECT sum(amount) FROM {s}.charges WHERE tenant = 'acme' AND billing_period_start = $1", MINUTE
        )
        stored = await env.fetchval(
            "SELECT total FROM {s}.invoices WHERE tenant = 'acme' AND period_start = $1", MINUTE
        )
        lines = await env.fetchval(
            "SELECT sum(l.amount) FROM {s}.invoice_lines l JOIN {s}.invoices i USING (invoice_id)"
            " WHERE i.tenant = 'acme' AND i.period_start = $1",
            MINUTE,
        )
        assert Decimal(invoice.total) == stored == lines == charged
        # Independently: every acme window in full, less the 10 s of t1 after 10:01 (next period's).
        spill = Window("job-std", "job-std/t1", "n-east", MINUTE + timedelta(minutes=1), 10, h200_cu=60)
        whole = sum(expected_amount(w, TERMS, REGIONS) for w in acme_windows)
        assert charged == whole - expected_amount(spill, TERMS, REGIONS) == Decimal("6.411250")
        assert [ln.device_class for ln in invoice.lines] == ["cpu", "h200"]

        # The next period holds the cut-off piece, still open; ClosePeriod's default is the last ended.
        following = await stub.GetUsage(pb.GetUsageRequest(tenant="acme", period="current"))
        assert (following.period.label, Decimal(following.total)) == (
            "2025-01-20T10:01Z",
            expected_amount(spill, TERMS, REGIONS),
        )
        closed = await stub.ClosePeriod(pb.ClosePeriodRequest(tenant="acme"))
        assert closed == invoice


async def test_an_unknown_tenant_is_not_found_and_gets_no_invoice(env: Env) -> None:
    clock = ManualClock(MINUTE + timedelta(minutes=5))
    async with (
        EventPublisher(env.bootstrap) as publisher,
        running(settings(env), clock) as billing,
        stub_of(billing) as stub,
    ):
        await env.publish_facts(publisher)
        await eventually(
            lambda: env.fetchval("SELECT count(DISTINCT tenant) FROM {s}.job_terms"), lambda n: n == 2
        )
        unknown = "unknown tenant 'acmee': billing has seen no job, charge or invoice of it"
        for call in (
            stub.GetUsage(pb.GetUsageRequest(tenant="acmee")),
            stub.ListCharges(pb.ListChargesRequest(tenant="acmee")),
            stub.GetInvoice(pb.GetInvoiceRequest(tenant="acmee")),
            stub.ClosePeriod(pb.ClosePeriodRequest(tenant="acmee", period="previous")),
        ):
            assert await refused(call) == (grpc.StatusCode.NOT_FOUND, unknown)
        assert await env.fetchval("SELECT count(*) FROM {s}.invoices") == 0
        # A known tenant without charges is answered: zero usage, and a zero invoice when closed.
        usage = await stub.GetUsage(pb.GetUsageRequest(tenant="globex"))
        assert (usage.total, list(usage.rows)) == ("0.000000", [])
        zero = await stub.ClosePeriod(pb.ClosePeriodRequest(tenant="globex"))
        assert (zero.period.label, zero.total) == ("2025-01-20T10:04Z", "0")


async def test_a_schema_billed_in_one_period_length_refuses_another(env: Env) -> None:
    clock = ManualClock(MINUTE + timedelta(seconds=30))
    async with EventPublisher(env.bootstrap) as publisher, running(settings(env), clock):
        await env.publish_facts(publisher)
        await env.publish_usage(publisher, windows()[:1])
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == 1)
    monthly = settings(env).model_copy(update={"period": "monthly"})
    with pytest.raises(CalendarMismatch, match=r"SUANLI_BILLING_PERIOD=monthly does not match schema bil_"):
        async with running(monthly, clock):
            pass
    # The length it was billed with still starts.
    async with running(settings(env), clock) as billing, stub_of(billing) as stub:
        usage = await stub.GetUsage(pb.GetUsageRequest(tenant="acme"))
        assert (usage.period.label, usage.total) == ("2025-01-20T10:00Z", "2.000000")


async def test_the_demo_observer_adds_up_a_tenants_periods(env: Env) -> None:
    # `suanli up` bills in one-minute periods; its dashboard and summary show charges of the whole run.
    from suanli.platform.observe import Observer

    clock = ManualClock(MINUTE + timedelta(seconds=50))
    first = [w for w in windows() if w.job == "job-std" and w.task.endswith("t0")]  # 2 + 2 in 10:00
    later = Window(
        "job-std", "job-std/t0", "n-east", MINUTE + timedelta(minutes=1, seconds=10), 30, h200_cu=100
    )
    async with EventPublisher(env.bootstrap) as publisher, running(settings(env), clock) as billing:
        observer = Observer("127.0.0.1:1", f"127.0.0.1:{billing.grpc_port}", ["acme", "initech"])
        try:
            await env.publish_facts(publisher)
            await env.publish_usage(publisher, first)
            await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == 2)
            seen = await asyncio.to_thread(observer.charges)
            assert (seen["acme"].total, seen["acme"].charges) == (Decimal(4), 2)
            assert (seen["initech"].total, seen["initech"].charges) == (Decimal(0), 0)  # unknown: nothing yet

            clock.current = MINUTE + timedelta(minutes=1, seconds=50)  # 10:00 has ended
            await env.publish_usage(publisher, [later])
            await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == 3)
            seen = await asyncio.to_thread(observer.charges)
            assert (seen["acme"].total, seen["acme"].charges, seen["acme"].currency) == (Decimal(7), 3, "CNY")
        finally:
            observer.close()
