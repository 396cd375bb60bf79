"""Bytes a span costs in `suanli up`'s trace store (not a test): tracemalloc over `spans_of` + `add`.

Builds 10,000 OTLP export requests of two bus consumer spans each (eight attributes, a resource of five),
as `suanli up`'s processes export them, and prints the traced bytes per stored span.

    .venv/bin/python bench/spanstore_memory.py
"""

from __future__ import annotations

import gc
import os
import tracemalloc
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from suanli.telemetry.spanstore import SpanStore, spans_of


def kv(key: str, value: Any) -> KeyValue:
    v = AnyValue(string_value=value) if isinstance(value, str) else AnyValue(int_value=value)
    return KeyValue(key=key, value=v)


def request(n: int, per: int = 2) -> trace_service_pb2.ExportTraceServiceRequest:
    res = ResourceSpans()
    res.resource.attributes.extend(
        [
            kv("service.name", "metering"),
            kv("service.instance.id", "metering-1234"),
            kv("process.pid", 1234),
            kv("telemetry.sdk.language", "python"),
            kv("telemetry.sdk.version", "1.29.0"),
        ]
    )
    scope = ScopeSpans()
    for i in range(per):
        span = Span(
            trace_id=os.urandom(16),
            span_id=os.urandom(8),
            parent_span_id=os.urandom(8),
            name="usage.metered process",
            kind=Span.SPAN_KIND_CONSUMER,
            start_time_unix_nano=1,
            end_time_unix_nano=2,
        )
        span.attributes.extend(
            [
                kv("messaging.system", "kafka"),
                kv("messaging.destination.name", "suanli.usage.metered"),
                kv("messaging.operation.type", "process"),
                kv("messaging.consumer.group.name", "suanli-billing"),
                kv("messaging.destination.partition.id", str(i % 8)),
                kv("messaging.kafka.offset", n * per + i),
                kv("messaging.kafka.message.key", f"job-{n}/t{i}"),
                kv("suanli.event_name", "UsageMetered"),
            ]
        )
        scope.spans.append(span)
    res.scope_spans.append(scope)
    return trace_service_pb2.ExportTraceServiceRequest(resource_spans=[res])


def main() -> None:
    requests = [request(n) for n in range(10_000)]
    gc.collect()
    tracemalloc.start()
    store = SpanStore(max_spans=10**9)
    for r in requests:
        store.add(spans_of(r))
    gc.collect()
    current, _ = tracemalloc.get_traced_memory()
    print(f"trace store: {len(store)} spans, {current / len(store):.0f} bytes a span")


if __name__ == "__main__":
    main()
