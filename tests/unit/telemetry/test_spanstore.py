"""The trace store: spans exported over OTLP/gRPC by `setup()` land in it, and its Jaeger query API
answers what `suanli job trace` and a Jaeger client ask (suanli.telemetry.spanstore, .otlp)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from suanli import telemetry
from suanli.telemetry.spanstore import SpanStore, SpanStoreServer, StoredSpan, spans_of
from suanli.telemetry.tracing import tracer

OTEL_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER")


@pytest.fixture
def server() -> Iterator[SpanStoreServer]:
    with SpanStoreServer() as started:
        yield started


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_spans_exported_over_grpc_are_served_in_jaegers_shape(
    server: SpanStoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    for key, value in server.env(schedule_delay_ms=50).items():
        monkeypatch.setenv(key, value)
    handle = telemetry.setup("store-test")
    try:
        assert handle.otlp_traces
        with tracer("tests").start_as_current_span("parent", attributes={"job_id": "job-1"}) as parent:
            link = trace.Link(parent.get_span_context())
        with tracer("tests").start_as_current_span("child", context=trace.set_span_in_context(parent)):
            pass
        with tracer("tests").start_as_current_span("batch", context=None, links=[link]):
            pass
    finally:
        handle.shutdown()  # flushes: every span is exported before it returns
    trace_id = format(parent.get_span_context().trace_id, "032x")
    held = server.store.trace(trace_id)
    assert [s.name for s in held] == ["parent", "child"]
    assert held[0].service == "store-test" and held[0].resource["process.pid"] > 0
    assert held[1].parent_span_id == held[0].span_id and not held[0].parent_span_id

    status, found = _get(f"{server.query_url}/api/traces?service=store-test&tags=" + '{"job_id":"job-1"}')
    assert status == 200 and [t["traceID"] for t in found["data"]] == [trace_id]
    [jaeger] = found["data"]
    spans = {s["operationName"]: s for s in jaeger["spans"]}
    assert spans["child"]["references"] == [
        {"refType": "CHILD_OF", "traceID": trace_id, "spanID": held[0].span_id}
    ]
    assert {"key": "job_id", "type": "string", "value": "job-1"} in spans["parent"]["tags"]
    assert jaeger["processes"][spans["parent"]["processID"]]["serviceName"] == "store-test"
    assert spans["parent"]["duration"] >= 0 and spans["parent"]["startTime"] > 0

    # The linked batch is a trace of its own whose reference says FOLLOWS_FROM the parent.
    [batch] = [s for s in server.store.spans() if s.name == "batch"]
    status, single = _get(f"{server.query_url}/api/traces/{batch.trace_id}")
    refs = single["data"][0]["spans"][0]["references"]
    assert refs == [{"refType": "FOLLOWS_FROM", "traceID": trace_id, "spanID": held[0].span_id}]

    assert _get(f"{server.query_url}/api/services")[1]["data"] == ["store-test"]
    assert _get(f"{server.query_url}/api/traces?tag=job_id:job-2")[1]["data"] == []
    assert _get(f"{server.query_url}/api/traces/{'0' * 32}")[0] == 404
    assert _get(f"{server.query_url}/api/traces?tags=[1]")[0] == 400
    assert _get(f"{server.query_url}/api/nothing")[0] == 404


def _span(trace_id: str, span_id: str, **attributes: Any) -> StoredSpan:
    now = time.time_ns()
    return StoredSpan(trace_id, span_id, "", "s", "internal", now, now, attributes, (), False, {})


def test_the_store_drops_its_oldest_traces_past_its_bound() -> None:
    store = SpanStore(max_spans=4)
    store.add([_span("a", "1"), _span("a", "2"), _span("b", "3")])
    store.add([_span("a", "4")])  # a is the newest trace now
    store.add([_span("c", "5")])
    assert len(store) <= 4
    assert store.trace("b") == [] and [s.span_id for s in store.trace("a")] == ["1", "2", "4"]
    assert [t[0].trace_id for t in store.find(limit=5)] == ["c", "a"]
    store.add([_span("d", "6", flag=True, n=3)])
    assert [t[0].trace_id for t in store.find(tags={"flag": "true", "n": "3"})] == ["d"]


def _export(pid: int, *values: str) -> trace_service_pb2.ExportTraceServiceRequest:
    def kv(key: str, value: str | int) -> KeyValue:
        v = AnyValue(string_value=value) if isinstance(value, str) else AnyValue(int_value=value)
        return KeyValue(key=key, value=v)

    resources = ResourceSpans()
    resources.resource.attributes.extend([kv("service.name", "billing"), kv("process.pid", pid)])
    scope = ScopeSpans()
    for n, value in enumerate(values):
        span = Span(trace_id=bytes([n + 1]) * 16, span_id=bytes([n + 1]) * 8, name="usage.metered process")
        span.attributes.extend([kv("messaging.system", value), kv("messaging.kafka.offset", n)])
        scope.spans.append(span)
    resources.scope_spans.append(scope)
    return trace_service_pb2.ExportTraceServiceRequest(resource_spans=[resources])


def test_repeated_keys_values_and_resources_are_held_once_and_read_back_unchanged() -> None:
    long = "x" * 200  # an id-like value: kept as it is
    first, second = spans_of(_export(7, "kafka", long)), spans_of(_export(7, "kafka"))
    other = spans_of(_export(8, "kafka"))
    assert first[0].resource is second[0].resource  # one process: one resource dict for every export
    assert other[0].resource == {"service.name": "billing", "process.pid": 8}
    assert first[0].resource is not other[0].resource
    key = next(iter(first[0].attributes))
    assert key is next(iter(second[0].attributes))
    assert first[0].attributes["messaging.system"] is second[0].attributes["messaging.system"]
    assert [s.attributes for s in first] == [
        {"messaging.system": "kafka", "messaging.kafka.offset": 0},
        {"messaging.system": long, "messaging.kafka.offset": 1},
    ]
    assert first[0].service == "billing" and first[0].process == "7"
