"""W3C trace context through Kafka-style headers."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from suanli.telemetry import extract_context, inject_headers


@pytest.fixture
def tracer() -> trace.Tracer:
    # A private provider: propagation must not depend on whichever provider is global.
    return TracerProvider().get_tracer("tests")


def test_round_trip_keeps_trace_id_and_parent(tracer: trace.Tracer) -> None:
    with tracer.start_as_current_span("produce") as producer:
        headers = inject_headers([("event-type", b"JobSubmitted")])
    sent = producer.get_span_context()

    ctx = extract_context(headers)
    with tracer.start_as_current_span("consume", context=ctx) as consumer:
        pass

    assert consumer.get_span_context().trace_id == sent.trace_id
    assert consumer.parent is not None
    assert consumer.parent.span_id == sent.span_id
    assert ("event-type", b"JobSubmitted") in headers
    [traceparent] = [v for k, v in headers if k == "traceparent"]
    assert isinstance(traceparent, bytes)
    assert traceparent.decode().split("-")[1] == format(sent.trace_id, "032x")


def test_inject_leaves_input_alone_and_replaces_stale_context(tracer: trace.Tracer) -> None:
    stale = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
    original = [("traceparent", stale.encode()), ("k", b"v")]

    with tracer.start_as_current_span("republish") as span:
        headers = inject_headers(original)

    assert original == [("traceparent", stale.encode()), ("k", b"v")]
    [traceparent] = [v for k, v in headers if k == "traceparent"]
    assert traceparent.decode().split("-")[1] == format(span.get_span_context().trace_id, "032x")
    assert ("k", b"v") in headers


def test_no_active_span_adds_nothing() -> None:
    assert inject_headers([("k", b"v")]) == [("k", b"v")]
    assert inject_headers() == []


@pytest.mark.parametrize(
    "headers",
    [
        None,
        [],
        [("traceparent", b"not-a-traceparent")],
        [("traceparent", b"\xff\xfe")],
        [("traceparent", None)],
    ],
)
def test_missing_or_malformed_headers_start_a_new_trace(
    headers: list[tuple[str, bytes | None]] | None,
) -> None:
    ctx = extract_context(headers)
    assert not trace.get_current_span(ctx).get_span_context().is_valid


def test_accepts_aiokafka_consumer_header_tuples(tracer: trace.Tracer) -> None:
    with tracer.start_as_current_span("produce") as span:
        headers = tuple(inject_headers())

    ctx = extract_context(headers)

    assert trace.get_current_span(ctx).get_span_context().trace_id == span.get_span_context().trace_id
