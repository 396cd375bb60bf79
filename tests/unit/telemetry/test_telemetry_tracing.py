"""Trace context kept with outbox rows, batch spans, and gRPC metadata (suanli.telemetry.tracing, .grpc)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from suanli.eventstore import InMemoryEventStore, NewEvent, OutboxMessage, OutboxRelay, RecordingOutboxSink
from suanli.eventstore.kafka_sink import with_traceparent
from suanli.eventstore.pruning import RetentionSettings
from suanli.infra.polling import until
from suanli.telemetry import batch_span, context_of, current_traceparent, tracer
from suanli.telemetry.grpc import client_interceptors, with_tracing
from suanli.telemetry.tracing import SpansPerTrace, in_trace_of

STALE = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"


def _hex(trace_id: int) -> str:
    return format(trace_id, "032x")


def _named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [span] = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def test_traceparent_round_trip_and_malformed_values(spans: InMemorySpanExporter) -> None:
    assert current_traceparent() is None
    with tracer("tests").start_as_current_span("command") as span:
        value = current_traceparent()
    assert value is not None and value.split("-")[1] == _hex(span.get_span_context().trace_id)

    ctx = context_of(value)
    assert ctx is not None
    with tracer("tests").start_as_current_span("later", context=ctx) as later:
        pass
    assert later.get_span_context().trace_id == span.get_span_context().trace_id
    assert _named(spans, "later").parent.span_id == span.get_span_context().span_id  # type: ignore[union-attr]

    for bad in (None, "", "not-a-traceparent", "00-" + "0" * 32 + "-" + "0" * 16 + "-01", b"\xff"):
        assert context_of(bad) is None


def test_batch_span_joins_one_trace_and_links_many(spans: InMemorySpanExporter) -> None:
    tps = []
    for i in range(3):
        with tracer("tests").start_as_current_span(f"cmd{i}"):
            tps.append(current_traceparent())

    with batch_span("one", [tps[0], tps[0], None], {"rows": 2}):
        pass
    with batch_span("many", tps):
        pass
    with tracer("tests").start_as_current_span("outer"), batch_span("none", [None]):
        pass

    one, many, none = _named(spans, "one"), _named(spans, "many"), _named(spans, "none")
    assert one.parent is not None and one.parent.span_id == _named(spans, "cmd0").context.span_id
    assert one.context.trace_id == _named(spans, "cmd0").context.trace_id and not one.links
    assert one.attributes is not None and one.attributes["rows"] == 2
    assert many.parent is None  # its own trace, linked to each source
    assert {link.context.span_id for link in many.links} == {
        _named(spans, f"cmd{i}").context.span_id for i in range(3)
    }
    assert none.parent is not None and none.parent.span_id == _named(spans, "outer").context.span_id


def _event() -> NewEvent:
    return NewEvent(uuid.uuid4(), "Probe", b"payload")


async def test_outbox_row_keeps_the_appending_span_and_an_explicit_one(spans: InMemorySpanExporter) -> None:
    store = InMemoryEventStore()
    with tracer("tests").start_as_current_span("command") as span:
        async with store.transaction() as tx:
            await tx.append(
                "s-1",
                0,
                [_event(), _event()],
                outbox=[
                    OutboxMessage("t", b"k", "Probe", b"v1"),
                    OutboxMessage("t", b"k", "Probe", b"v2", traceparent=STALE),
                ],
            )
    await store.append("s-2", 0, [_event()], outbox=[OutboxMessage("t", b"k", "Probe", b"v3")])

    first, second, outside = await store.pending_outbox()
    assert first.traceparent is not None
    assert first.traceparent.split("-")[1:3] == [
        _hex(span.get_span_context().trace_id),
        format(span.get_span_context().span_id, "016x"),
    ]
    assert second.traceparent == STALE  # written for another trace: kept as given
    assert outside.traceparent is None


def test_relayed_record_carries_its_row_traceparent_once() -> None:
    stored = (("event-id", b"e1"), ("traceparent", STALE.encode()), ("k", b"v"))
    fresh = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    assert with_traceparent(stored, fresh) == (
        ("event-id", b"e1"),
        ("k", b"v"),
        ("traceparent", fresh.encode()),
    )
    assert with_traceparent(stored, None) == stored


def _published(sink: RecordingOutboxSink) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return bool(sink.records)

    return probe


async def test_relay_batch_span_sits_in_the_rows_trace(spans: InMemorySpanExporter) -> None:
    store = InMemoryEventStore()
    with tracer("tests").start_as_current_span("command") as command:
        await store.append("s", 0, [_event()], outbox=[OutboxMessage("t", b"k", "Probe", b"v")])
    sink = RecordingOutboxSink()
    async with OutboxRelay(store.feed(), sink, poll_interval=0.05, retention=RetentionSettings()):
        await until(_published(sink), 10.0, "the relay to publish the row")

    [row] = sink.records
    assert row.traceparent is not None and row.traceparent.split("-")[1] == _hex(
        command.get_span_context().trace_id
    )
    publish = _named(spans, "outbox.publish")
    assert publish.kind is trace.SpanKind.PRODUCER
    assert publish.context.trace_id == command.get_span_context().trace_id
    assert publish.attributes is not None and publish.attributes["outbox.rows"] == 1


async def test_grpc_call_continues_the_callers_trace(spans: InMemorySpanExporter) -> None:
    server = grpc.aio.server(interceptors=with_tracing())
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", interceptors=client_interceptors()
        ) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            with tracer("tests").start_as_current_span("caller") as caller:
                await stub.Check(health_pb2.HealthCheckRequest())
                with pytest.raises(grpc.aio.AioRpcError):
                    await stub.Check(health_pb2.HealthCheckRequest(service="unknown"))
    finally:
        await server.stop(None)

    method = "grpc.health.v1.Health/Check"
    server_spans = [
        s for s in spans.get_finished_spans() if s.name == method and s.kind is trace.SpanKind.SERVER
    ]
    client_spans = [
        s for s in spans.get_finished_spans() if s.name == method and s.kind is trace.SpanKind.CLIENT
    ]
    assert len(server_spans) == 2 and len(client_spans) == 2
    for client, server_span in zip(client_spans, server_spans, strict=True):
        assert client.parent is not None and client.parent.span_id == caller.get_span_context().span_id
        assert server_span.context.trace_id == caller.get_span_context().trace_id
        assert server_span.parent is not None and server_span.parent.span_id == client.context.span_id
    assert server_spans[0].attributes is not None and server_spans[0].attributes["rpc.method"] == "Check"
    assert server_spans[1].status.status_code is trace.StatusCode.ERROR
    assert server_spans[1].attributes is not None
    assert server_spans[1].attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]


async def test_a_synchronous_servicer_is_served_as_grpc_serves_it() -> None:
    # The services register grpc_health's synchronous HealthServicer: wrapped in a coroutine its plain
    # answer was awaited (TypeError) and every readiness probe failed.
    server = grpc.aio.server(interceptors=with_tracing())
    health_pb2_grpc.add_HealthServicer_to_server(health.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            answer = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
    finally:
        await server.stop(None)
    assert answer.status == health_pb2.HealthCheckResponse.SERVING


def test_spans_per_trace_keep_each_input_in_its_own_trace(spans: InMemorySpanExporter) -> None:
    tps = []
    for i in range(2):
        with tracer("tests").start_as_current_span(f"in{i}"):
            tps.append(current_traceparent())
    with tracer("tests").start_as_current_span("cycle") as cycle:
        link = trace.Link(cycle.get_span_context())
    with SpansPerTrace("work", attributes={"batch.records": 4}, links=[link]) as per_trace:
        for tp in (tps[0], tps[1], tps[0], None):
            with per_trace.scope(tp):
                assert current_traceparent() is not None
        with per_trace.scope(tps[1], key="job-2") as keyed:
            keyed.set_attribute("job_id", "job-2")

    work = [s for s in spans.get_finished_spans() if s.name == "work"]
    by_parent = {
        s.parent.span_id if s.parent else None: s for s in work if "job_id" not in (s.attributes or {})
    }
    inputs = [_named(spans, f"in{i}") for i in range(2)]
    # One span per trace, a child of that trace's input, however the batch interleaved them.
    first, second = by_parent[inputs[0].context.span_id], by_parent[inputs[1].context.span_id]
    assert first.context.trace_id == inputs[0].context.trace_id and (first.attributes or {})["records"] == 2
    assert second.context.trace_id == inputs[1].context.trace_id and (second.attributes or {})["records"] == 1
    # No traceparent: a span of its own in the current context (none here: a root).
    assert by_parent[None].context.trace_id not in {i.context.trace_id for i in inputs}
    # A key groups apart from the trace (one span per job); every span links the batch's span.
    [keyed_span] = [s for s in work if (s.attributes or {}).get("job_id") == "job-2"]
    assert keyed_span.context.trace_id == inputs[1].context.trace_id
    assert len(work) == 4
    assert all([lk.context.span_id for lk in s.links] == [cycle.get_span_context().span_id] for s in work)
    assert len({s.start_time for s in work}) == 1 and len({s.end_time for s in work}) == 1


def test_work_for_another_trace_runs_in_a_child_of_it_linked_to_the_current_span(
    spans: InMemorySpanExporter,
) -> None:
    with tracer("tests").start_as_current_span("started") as started:
        job = current_traceparent()
    with tracer("tests").start_as_current_span("snapshot") as snapshot:
        with in_trace_of(job, "window", {"task_id": "t1"}):
            moved = current_traceparent()
        # Already in the job's trace (its end closes the window), or no context kept: nothing new.
        with in_trace_of(current_traceparent(), "window"), in_trace_of(None, "window"):
            stayed = current_traceparent()
    assert stayed == current_traceparent(trace.set_span_in_context(snapshot))
    [window] = [s for s in spans.get_finished_spans() if s.name == "window"]
    assert window.context.trace_id == started.get_span_context().trace_id
    assert window.parent is not None and window.parent.span_id == started.get_span_context().span_id
    assert [lk.context.span_id for lk in window.links] == [snapshot.get_span_context().span_id]
    assert (window.attributes or {})["task_id"] == "t1"
    assert moved is not None and moved.split("-")[2] == format(window.context.span_id, "016x")
