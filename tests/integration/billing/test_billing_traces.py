"""Billing continues the trace of the usage it charges, through its outbox, on the real broker and PostgreSQL.

A UsageMetered published in a span is charged in a ``billing.charge`` span of that trace; the ChargeRecorded
outbox row is appended in it, so the row's ``traceparent`` column and the relayed record's header name
that trace (the outbox's default: the span active when the row is appended).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaConsumer
from billing_testkit import JAN, Env, ManualClock, Window, eventually
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_billing_service import config

from suanli import telemetry
from suanli.billing.entrypoints.service import running
from suanli.bus import EventPublisher
from suanli.bus.headers import EVENT_NAME, header
from suanli.contracts import decode
from suanli.infra.testing import recorded_spans


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    with recorded_spans("billing", monkeypatch) as exporter:
        yield exporter


async def _charge_headers(env: Env) -> list[list[tuple[str, bytes]]]:
    consumer = AIOKafkaConsumer(
        env.topic("billing.events"), bootstrap_servers=env.bootstrap, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        batches = await consumer.getmany(timeout_ms=1000)
        return [
            list(r.headers or ())
            for records in batches.values()
            for r in records
            if header(r.headers, EVENT_NAME) == "ChargeRecorded"
        ]
    finally:
        await consumer.stop()


async def test_charge_and_its_record_continue_the_usage_trace(env: Env, spans: InMemorySpanExporter) -> None:
    window = Window("job-std", "job-std/t0", "n-east", JAN, 60, h200_cu=100)
    clock = ManualClock(datetime(2025, 1, 20, tzinfo=UTC))
    async with EventPublisher(env.bootstrap) as publisher, running(config(env), clock):
        await env.publish_facts(publisher)
        # Facts first: usage that arrives before its job's terms is parked and charged later, in the
        # trace of the fact that releases it.
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.job_terms"), lambda n: n == 3)
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.node_regions"), lambda n: n == 2)
        with telemetry.tracer("tests").start_as_current_span("metering") as metering:
            await env.publish_usage(publisher, [window])
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == 1)
        traced = await eventually(_charge_headers_of(env), lambda found: len(found) == 1)

    trace_id = format(metering.get_span_context().trace_id, "032x")
    [charge] = [s for s in spans.get_finished_spans() if s.name == "billing.charge"]
    assert format(charge.context.trace_id, "032x") == trace_id
    assert charge.attributes is not None and charge.attributes["task_id"] == "job-std/t0"

    stored = await env.fetchval("SELECT traceparent FROM {s}.outbox WHERE event_name = 'ChargeRecorded'")
    assert stored.split("-")[1:3] == [trace_id, format(charge.context.span_id, "016x")]
    [headers] = traced
    assert header(headers, "traceparent") == stored


async def test_usage_charged_together_each_continues_its_own_trace(
    env: Env, spans: InMemorySpanExporter
) -> None:
    # Published together, so billing takes them in one fetch and charges them as one batch.
    windows = [Window("job-std", f"job-std/t{n}", "n-east", JAN, 60, h200_cu=100) for n in range(6)]
    clock = ManualClock(datetime(2025, 1, 20, tzinfo=UTC))
    async with EventPublisher(env.bootstrap) as publisher, running(config(env), clock):
        await env.publish_facts(publisher)
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.node_regions"), lambda n: n == 2)
        await eventually(lambda: env.fetchval("SELECT count(*) FROM {s}.job_terms"), lambda n: n == 3)
        traces: dict[str, str] = {}
        encoded = []
        for w in windows:
            with telemetry.tracer("tests").start_as_current_span("metering") as metering:
                traces[w.task] = format(metering.get_span_context().trace_id, "032x")
                encoded.append(
                    publisher.encode(env.topic("usage.metered"), w.task, "UsageMetered", w.record())
                )
        await publisher.publish_many(encoded)
        await eventually(
            lambda: env.fetchval("SELECT count(*) FROM {s}.charges"), lambda n: n == len(windows)
        )

    charged = {s.attributes["task_id"]: s for s in spans.get_finished_spans() if s.name == "billing.charge"}
    assert {task: format(span.context.trace_id, "032x") for task, span in charged.items()} == traces
    stored = await env.fetchval(
        "SELECT array_agg(array[encode(value, 'base64'), traceparent]) FROM {s}.outbox"
        " WHERE event_name = 'ChargeRecorded'"
    )
    task_of = {w.event_id: w.task for w in windows}
    assert len(stored) == len(windows)
    for value, traceparent in stored:
        task = task_of[str(decode(base64.b64decode(value))[1]["usage_event_id"])]
        span = charged[task]
        assert traceparent.split("-")[1:3] == [traces[task], format(span.context.span_id, "016x")]


def _charge_headers_of(env: Env) -> Callable[[], Awaitable[list[list[tuple[str, bytes]]]]]:
    async def probe() -> list[list[tuple[str, bytes]]]:
        return await _charge_headers(env)

    return probe
