"""A small trace store: an OTLP/gRPC receiver that keeps spans in memory and answers Jaeger's query API.

`suanli up` runs one for its processes (they export to it over OTLP/gRPC), the end-to-end trace test
reads the same one, and `suanli job trace` queries it exactly as it queries a real Jaeger (the compose
stack's): ``GET /api/traces?service=&tags={"job_id":"..."}``, ``GET /api/traces/<trace id>`` and
``GET /api/services`` answer in Jaeger's JSON shape (spans with CHILD_OF / FOLLOWS_FROM references,
processes with their service name and resource tags). Only that subset of the API is served.

It is a development store, not a collector: memory only, bounded (the oldest traces are dropped past
``max_spans``), no authentication, so it listens on the loopback interface unless told otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

log = logging.getLogger(__name__)

# About 0.9 KB a span with eight attributes, keys, short values and resources shared (2.2 KB before;
# tracemalloc over 20,000 bus consumer spans exported two a request, as `suanli up`'s processes export
# them, docs/BENCHMARKS.md "Soak"): a bound of ~90 MB for `suanli up`.
DEFAULT_MAX_SPANS = 100_000

_KINDS = {
    Span.SPAN_KIND_INTERNAL: "internal",
    Span.SPAN_KIND_SERVER: "server",
    Span.SPAN_KIND_CLIENT: "client",
    Span.SPAN_KIND_PRODUCER: "producer",
    Span.SPAN_KIND_CONSUMER: "consumer",
}

Attributes = dict[str, Any]


# Attribute values up to this long are interned: the repeated ones (a topic, a group, an event name, a
# span kind) then cost one string for the whole store instead of one per span. Ids are longer or unique.
_INTERNED_LEN = 48


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    found = getattr(value, which)
    if which == "string_value" and len(found) <= _INTERNED_LEN:
        return sys.intern(found)
    return found


def _attributes(pairs: Iterable[KeyValue]) -> Attributes:
    # Keys repeat on every span: interned, the store holds each once.
    return {sys.intern(kv.key): _value(kv.value) for kv in pairs}


class _Resources:
    """One attributes dict per distinct resource, shared by its spans (never to be changed in place).

    Every export of a process sends the same resource, and a dict per request was a fifth of the store's
    memory. Bounded: cleared when it holds too many.
    """

    def __init__(self, bound: int = 1024) -> None:
        self._bound = bound
        self._known: dict[bytes, Attributes] = {}

    def of(self, resource: Resource) -> Attributes:
        key = resource.SerializeToString(deterministic=True)
        found = self._known.get(key)
        if found is None:
            if len(self._known) >= self._bound:
                self._known.clear()
            found = self._known[key] = _attributes(resource.attributes)
        return found


_RESOURCES = _Resources()


@dataclass(frozen=True, slots=True)
class StoredSpan:
    """One received span, ids in lower-case hex (``parent_span_id`` empty for a root)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attributes: Attributes
    links: tuple[tuple[str, str], ...]  # (trace id, span id) of each linked span
    error: bool
    resource: Attributes = field(default_factory=dict)

    @property
    def service(self) -> str:
        """The exporting process's ``service.name``."""
        return str(self.resource.get("service.name", ""))

    @property
    def process(self) -> str:
        """The exporting process: its ``service.instance.id`` (unique per process start)."""
        return str(self.resource.get("service.instance.id") or self.resource.get("process.pid") or "")


def spans_of(request: trace_service_pb2.ExportTraceServiceRequest) -> list[StoredSpan]:
    """The spans of one OTLP export request, each with its resource's attributes."""
    out: list[StoredSpan] = []
    for resource_spans in request.resource_spans:
        resource = _RESOURCES.of(resource_spans.resource)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                out.append(
                    StoredSpan(
                        trace_id=s.trace_id.hex(),
                        span_id=s.span_id.hex(),
                        parent_span_id=s.parent_span_id.hex(),
                        name=sys.intern(s.name),
                        kind=_KINDS.get(s.kind, "unspecified"),
                        start_ns=s.start_time_unix_nano,
                        end_ns=s.end_time_unix_nano,
                        attributes=_attributes(s.attributes),
                        links=tuple((link.trace_id.hex(), link.span_id.hex()) for link in s.links),
                        error=s.status.code == Status.STATUS_CODE_ERROR,
                        resource=resource,
                    )
                )
    return out


class SpanStore:
    """Spans by trace, oldest trace dropped first once more than ``max_spans`` are held. Thread-safe."""

    def __init__(self, max_spans: int = DEFAULT_MAX_SPANS) -> None:
        self._max = max_spans
        self._traces: OrderedDict[str, list[StoredSpan]] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()

    def add(self, spans: Iterable[StoredSpan]) -> None:
        """Keep ``spans``; a trace that gets a new span counts as the newest."""
        with self._lock:
            for span in spans:
                held = self._traces.get(span.trace_id)
                if held is None:
                    held = self._traces[span.trace_id] = []
                else:
                    self._traces.move_to_end(span.trace_id)
                held.append(span)
                self._count += 1
            while self._count > self._max and len(self._traces) > 1:
                _, dropped = self._traces.popitem(last=False)
                self._count -= len(dropped)

    def __len__(self) -> int:
        return self._count

    def trace(self, trace_id: str) -> list[StoredSpan]:
        """The spans of one trace (empty when unknown), by start time."""
        with self._lock:
            spans = list(self._traces.get(trace_id.lower(), ()))
        return sorted(spans, key=lambda s: s.start_ns)

    def spans(self) -> list[StoredSpan]:
        """Every span held."""
        with self._lock:
            return [s for spans in self._traces.values() for s in spans]

    def services(self) -> list[str]:
        """The service names spans came from."""
        return sorted({s.service for s in self.spans() if s.service})

    def find(
        self, *, service: str = "", tags: Mapping[str, str] | None = None, limit: int = 20
    ) -> list[list[StoredSpan]]:
        """Traces (newest first, at most ``limit``) with a matching span.

        A span matches when it is of ``service`` (any, when empty) and its attributes hold every one of
        ``tags`` (compared as text, as Jaeger's tag search does).
        """
        wanted = dict(tags or {})
        with self._lock:
            candidates = list(reversed(self._traces.items()))
        found: list[list[StoredSpan]] = []
        for _, spans in candidates:
            if any(_matches(s, service, wanted) for s in spans):
                found.append(sorted(spans, key=lambda s: s.start_ns))
                if len(found) >= limit:
                    break
        return found


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else json.dumps(value)


def _matches(span: StoredSpan, service: str, tags: Mapping[str, str]) -> bool:
    if service and span.service != service:
        return False
    return all(k in span.attributes and _text(span.attributes[k]) == v for k, v in tags.items())


# -- Jaeger's JSON ------------------------------------------------------------------------------------


def _tags(attributes: Attributes) -> list[dict[str, Any]]:
    out = []
    for key, value in attributes.items():
        if isinstance(value, bool):
            kind = "bool"
        elif isinstance(value, int):
            kind = "int64"
        elif isinstance(value, float):
            kind = "float64"
        else:
            kind, value = "string", _text(value)
        out.append({"key": key, "type": kind, "value": value})
    return out


def jaeger_trace(spans: list[StoredSpan]) -> dict[str, Any]:
    """One trace as Jaeger's query API returns it (``data[i]`` of ``/api/traces``)."""
    processes: dict[str, str] = {}
    described: dict[str, dict[str, Any]] = {}
    out = []
    for span in spans:
        process_id = processes.get(span.process)
        if process_id is None:
            process_id = processes[span.process] = f"p{len(processes) + 1}"
            described[process_id] = {
                "serviceName": span.service,
                "tags": _tags({k: v for k, v in span.resource.items() if k != "service.name"}),
            }
        references = [{"refType": "CHILD_OF", "traceID": span.trace_id, "spanID": span.parent_span_id}]
        references = references if span.parent_span_id else []
        references += [{"refType": "FOLLOWS_FROM", "traceID": t, "spanID": s} for t, s in span.links]
        extra = {"span.kind": span.kind, **({"error": True} if span.error else {})}
        out.append(
            {
                "traceID": span.trace_id,
                "spanID": span.span_id,
                "operationName": span.name,
                "references": references,
                "startTime": span.start_ns // 1000,
                "duration": max(0, span.end_ns - span.start_ns) // 1000,
                "tags": _tags({**span.attributes, **extra}),
                "logs": [],
                "processID": process_id,
                "warnings": None,
            }
        )
    return {
        "traceID": spans[0].trace_id if spans else "",
        "spans": out,
        "processes": described,
        "warnings": None,
    }


def _answer(data: Any) -> dict[str, Any]:
    return {"data": data, "total": len(data), "limit": 0, "offset": 0, "errors": None}


def _query_tags(query: Mapping[str, list[str]]) -> dict[str, str]:
    tags: dict[str, str] = {}
    for raw in query.get("tags", []):
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise ValueError("tags must be a JSON object")
        tags.update({str(k): _text(v) for k, v in parsed.items()})
    for pair in query.get("tag", []):  # Jaeger's other form: tag=key:value
        key, sep, value = pair.partition(":")
        if not sep:
            raise ValueError(f"tag {pair!r} is not key:value")
        tags[key] = value
    return tags


def query(store: SpanStore, path: str, params: Mapping[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON body answering ``GET path?params`` (Jaeger's query API subset)."""
    parts = [p for p in path.split("/") if p]
    if parts == ["api", "services"]:
        return 200, _answer(store.services())
    if parts[:2] == ["api", "traces"] and len(parts) == 3:
        spans = store.trace(parts[2])
        if not spans:
            return 404, {"data": None, "errors": [{"code": 404, "msg": "trace not found"}]}
        return 200, _answer([jaeger_trace(spans)])
    if parts == ["api", "traces"]:
        try:
            tags = _query_tags(params)
            limit = int(params.get("limit", ["20"])[0])
        except ValueError as exc:
            return 400, {"data": None, "errors": [{"code": 400, "msg": str(exc)}]}
        service = params.get("service", [""])[0]
        return 200, _answer([jaeger_trace(t) for t in store.find(service=service, tags=tags, limit=limit)])
    return 404, {"data": None, "errors": [{"code": 404, "msg": f"no such endpoint {path}"}]}


# -- servers -----------------------------------------------------------------------------------------


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, store: SpanStore) -> None:
        self._store = store

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._store.add(spans_of(request))
        return trace_service_pb2.ExportTraceServiceResponse()


def _handler(store: SpanStore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            status, body = query(store, url.path, parse_qs(url.query))
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("trace query: " + format, *args)

    return Handler


class SpanStoreServer:
    """The store behind an OTLP/gRPC receiver (``otlp_endpoint``) and a query API (``query_url``).

    ``start()`` binds both (port 0: a free one each) and serves from threads, so it runs beside any
    event loop; ``stop()`` closes both. Also a context manager.
    """

    def __init__(
        self,
        store: SpanStore | None = None,
        *,
        host: str = "127.0.0.1",
        otlp_port: int = 0,
        query_port: int = 0,
    ) -> None:
        self.store = store if store is not None else SpanStore()
        self._host = host
        self._otlp_port = otlp_port
        self._query_port = query_port
        self._grpc: grpc.Server | None = None
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def otlp_endpoint(self) -> str:
        """What exporters are told (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, protocol grpc)."""
        return f"http://{self._host}:{self._otlp_port}"

    @property
    def query_url(self) -> str:
        """The base URL of the query API (where a Jaeger UI's would be)."""
        return f"http://{self._host}:{self._query_port}"

    def start(self) -> SpanStoreServer:
        """Listen on both ports; returns self."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="otlp"))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(self.store), server)
        self._otlp_port = server.add_insecure_port(f"{self._host}:{self._otlp_port}")
        server.start()
        self._grpc = server
        try:
            self._http = ThreadingHTTPServer((self._host, self._query_port), _handler(self.store))
        except BaseException:
            server.stop(None)
            raise
        self._http.daemon_threads = True
        self._query_port = int(self._http.server_address[1])
        self._thread = threading.Thread(target=self._http.serve_forever, name="trace-query", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop both servers (spans still held stay readable through ``store``)."""
        if self._grpc is not None:
            self._grpc.stop(grace=1).wait(2)
            self._grpc = None
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> SpanStoreServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def env(self, schedule_delay_ms: int | None = None) -> dict[str, str]:
        """The variables that make a process (set up with `suanli.telemetry.setup`) export here.

        ``schedule_delay_ms`` shortens the batch processor's delay (default 5 s), so spans show within it.
        """
        env = {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": self.otlp_endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc",
        }
        if schedule_delay_ms is not None:
            env["OTEL_BSP_SCHEDULE_DELAY"] = str(schedule_delay_ms)
        return env
