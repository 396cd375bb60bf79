"""The billing service end to end, in process: rating, dead letters, replay, invoices, gRPC and the CLI."""

from __future__ import annotations

import asyncio
import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import grpc
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from billing_testkit import (
    JAN,
    REGIONS,
    TERMS,
    Env,
    ManualClock,
    Window,
    config,
    eventually,
    expected_amount,
)
from typer.testing import CliRunner

from suanli.api.billing.v1 import billing_pb2 as pb
from suanli.api.billing.v1 import billing_pb2_grpc as pb_grpc
from suanli.billing.entrypoints.consumer import BillingHandler
from suanli.billing.entrypoints.service import close_due_periods, running
from suanli.billing.service_layer.errors import AlreadyReversed
from suanli.bus import EventConsumer, EventPublisher
from suanli.cli.main import app


def windows() -> list[Window]:
    """Known durations: whole minutes, a partial first and last window, two regions, a CPU share."""
    out = []
    for i in range(6):
        out.append(Window("job-std", "job-std/t0", "n-east", JAN + timedelta(minutes=i), 60, h200_cu=100))
    out.append(
        Window("job-std", "job-std/t1", "n-west", JAN + timedelta(seconds=30), 30, h200_cu=100, cpu_cu=2)
    )
    out.append(Window("job-cheap", "job-cheap/t0", "n-east", JAN, 45, h200_cu=200))
    out.append(Window("job-other", "job-other/t0", "n-east", JAN, 60, h200_cu=100, tenant="globex"))
    return out


async def balance(env: Env, account: str) -> Decimal:
    return await env.fetchval(
        "SELECT coalesce(sum(amount), 0) FROM {s}.ledger_entries WHERE account = $1", account
    )


async def dlq_values(env: Env) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=env.bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(env.topic("usage.metered") + ".dlq", 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        batch = await consumer.getmany(tp, timeout_ms=500)
        return [r.value for r in batch.get(tp, [])]
    finally:
        await consumer.stop()


async def test_usage_is_billed_once_replayed_invoiced_and_served(env: Env) -> None:
    ws = windows()
    clock = ManualClock(datetime(2025, 1, 20, tzinfo=UTC))
    async with EventPublisher(env.bootstrap) as publisher, running(config(env), clock) as billing:
        # Usage before the facts that price it: it must wait, not be guessed or dropped.
        await env.publish_usage(publisher, ws[:3])
        await env.publish_facts(publisher)
        await env.publish_usage(publisher, ws[3:])
        await env.publish_usage(publisher, ws[:2])  # re-published at new offsets: de-duplicated by event id
        await publisher.publish_raw(env.topic("usage.metered"), b"bad", b"\xc3\x01 not avro", [])
        bad = Window("job-std", "job-std/bad", "n-east", JAN, 60, h200_cu=1).record()
        bad["window_end"] = bad["window_start"] - timedelta(seconds=1)
        await publisher.publish(env.topic("usage.metered"), "job-std/bad", "UsageMetered", bad)

        expected_charges = sum((w.h200_cu > 0) + (w.cpu_cu > 0) for w in ws)
        await eventually(
            lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == expected_charges
        )
        dead = await eventually(lambda: dlq_values(env), lambda v: len(v) == 2)
        assert b"\xc3\x01 not avro" in dead

        acme = sum(expected_amount(w, TERMS, REGIONS) for w in ws if w.tenant == "acme")
        globex = sum(expected_amount(w, TERMS, REGIONS) for w in ws if w.tenant == "globex")
        # 6 min x 100 CU at 3.60 = 36.00; 30 s x 100 CU at 2.88 + 30 s x 2 CU at 1.80 = 2.43;
        # 45 s x 200 CU at 3.60 x 0.5 x 0.75 = 3.375
        assert acme == Decimal("41.805000")
        assert await balance(env, "tenant:acme:receivable") == acme
        assert await balance(env, "tenant:globex:receivable") == globex == Decimal("6.000000")
        assert await balance(env, "revenue:compute:cn-west:cpu") == Decimal("-0.030000")
        assert await env.fetchval("SELECT sum(amount) FROM {s}.ledger_entries") == 0
        assert await env.fetchval("SELECT count(*) FROM {s}.parked_usage") == 0

        # Replaying the whole topic under a new group changes no balance.
        tracked = "SELECT coalesce(sum(last_offset), -1) FROM {s}.tracking WHERE group_id = $1 AND topic = $2"

        async def offsets() -> tuple[int, int]:
            usage_topic = env.topic("usage.metered")
            return (
                await env.fetchval(tracked, "billing", usage_topic),
                await env.fetchval(tracked, "billing-replay", usage_topic),
            )

        names = {n: env.topic(n) for n in ("usage.metered", "jobs.events", "capacity.nodes")}
        handler = BillingHandler(billing.service, billing.uow, "billing-replay", names)
        async with EventConsumer(
            env.bootstrap, "billing-replay", names.values(), handler, settings=config(env).consumer
        ):
            await eventually(offsets, lambda pair: pair[0] == pair[1] >= 0)
        assert await env.fetchval("SELECT count(*) FROM {s}.charges") == expected_charges
        assert await balance(env, "tenant:acme:receivable") == acme

        # ChargeRecorded events reach billing.events through the outbox.
        published = "SELECT count(*) FROM {s}.outbox WHERE published_at IS NOT NULL AND event_name = $1"
        await eventually(lambda: env.fetchval(published, "ChargeRecorded"), lambda n: n == expected_charges)

        # The month ends: the clock-driven check issues one invoice per tenant.
        clock.current = datetime(2025, 2, 1, 0, 20, tzinfo=UTC)
        assert await close_due_periods(billing.uow, billing.service, clock) == 2
        assert await close_due_periods(billing.uow, billing.service, clock) == 0

        # Late January usage after the invoice: billed in February as an adjustment.
        late = Window("job-std", "job-std/t9", "n-east", JAN + timedelta(hours=1), 60, h200_cu=100)
        await env.publish_usage(publisher, [late])
        await eventually(
            lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == expected_charges + 1
        )
        with pytest.raises(Exception, match="append-only"):
            await env.fetchval("UPDATE {s}.charges SET amount = 0")

        # A correction is a reversing charge in the first open period; the original stays.
        globex_charge = await env.fetchval("SELECT charge_id::text FROM {s}.charges WHERE tenant = 'globex'")
        async with billing.uow.begin() as unit:
            reversal = await billing.service.reverse_charge(unit, globex_charge)
        assert reversal.amount == Decimal("-6.000000") and reversal.reverses == globex_charge
        assert await balance(env, "tenant:globex:receivable") == 0
        with pytest.raises(AlreadyReversed):
            async with billing.uow.begin() as unit:
                await billing.service.reverse_charge(unit, globex_charge)

        async with grpc.aio.insecure_channel(f"127.0.0.1:{billing.grpc_port}") as channel:
            stub = pb_grpc.BillingStub(channel)
            invoice = await stub.GetInvoice(pb.GetInvoiceRequest(tenant="acme", period="2025-01"))
            assert Decimal(invoice.total) == acme and invoice.currency == "CNY"
            assert [(ln.device_class, ln.adjustment_of) for ln in invoice.lines] == [
                ("cpu", ""),
                ("h200", ""),
            ]
            # (36000 + 3000 + 9000) CU-s / 3600
            assert Decimal(invoice.lines[1].quantity) == Decimal("13.333333")

            collected, token = [], ""
            while True:
                page = await stub.ListCharges(
                    pb.ListChargesRequest(tenant="acme", period="2025-01", page_size=3, page_token=token)
                )
                collected += page.charges
                token = page.next_page_token
                if not token:
                    break
            assert len(collected) == expected_charges - 1  # globex's is not acme's
            assert sum(Decimal(c.amount) for c in collected) == acme
            newest, token = [], ""
            while True:
                request = pb.ListChargesRequest(
                    tenant="acme", period="2025-01", page_size=2, page_token=token, newest_first=True
                )
                page = await stub.ListCharges(request)
                newest += page.charges
                token = page.next_page_token
                if not token:
                    break
            assert [c.charge_id for c in newest] == [c.charge_id for c in reversed(collected)]
            oldest_token = (
                await stub.ListCharges(pb.ListChargesRequest(tenant="acme", page_size=1))
            ).next_page_token
            for bad in ("garbage", oldest_token):  # the other order's token would skip or repeat charges
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await stub.ListCharges(
                        pb.ListChargesRequest(tenant="acme", page_token=bad, newest_first=True)
                    )
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert refused.value.details().startswith("page_token:")
            feb = await stub.ListCharges(pb.ListChargesRequest(tenant="acme", period="2025-02"))
            assert [(c.task_id, c.adjustment, c.usage_period) for c in feb.charges] == [
                ("job-std/t9", True, "2025-01")
            ]

            usage = await stub.GetUsage(pb.GetUsageRequest(tenant="acme", period="2025-01"))
            by_key = {(r.device_class, r.region): Decimal(r.amount) for r in usage.rows}
            assert by_key == {
                ("cpu", "cn-west"): Decimal("0.03"),
                # the late window is January usage, though February bills it
                ("h200", "cn-east"): Decimal("36") + Decimal("3.375") + Decimal("6"),
                ("h200", "cn-west"): Decimal("2.40"),
            }

            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await stub.GetInvoice(pb.GetInvoiceRequest(tenant="nobody", period="2025-01"))
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            with pytest.raises(grpc.aio.AioRpcError) as bad_period:
                await stub.GetInvoice(pb.GetInvoiceRequest(tenant="acme", period="January"))
            assert bad_period.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert bad_period.value.details().startswith("period:")
            with pytest.raises(grpc.aio.AioRpcError) as running_period:
                await stub.ClosePeriod(pb.ClosePeriodRequest(tenant="acme", period="2025-02"))
            assert running_period.value.code() == grpc.StatusCode.FAILED_PRECONDITION

        # The CLI runs a blocking gRPC client: keep it off the loop that serves it.
        result = await asyncio.to_thread(
            CliRunner().invoke,
            app,
            [
                "bill",
                "charges",
                "--tenant",
                "acme",
                "--period",
                "2025-01",
                "-o",
                "csv",
                "--billing",
                f"127.0.0.1:{billing.grpc_port}",
            ],
        )
        assert result.exit_code == 0, result.output
        rows = list(csv.DictReader(io.StringIO(result.stdout)))
        assert len(rows) == expected_charges - 1
        assert {r["charge_id"] for r in rows} == {c.charge_id for c in collected}
        assert sum(Decimal(r["amount"]) for r in rows) == acme
