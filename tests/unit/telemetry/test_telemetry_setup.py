"""suanli.telemetry.setup: /metrics endpoint, OTLP export, and repeated setup in one process."""

from __future__ import annotations

import http.server
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from suanli import telemetry
from suanli.telemetry import Telemetry
from suanli.telemetry.tracing import context_of, current_traceparent

OTEL_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
    "OTEL_SDK_DISABLED",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SERVICE_NAME",
    "SUANLI_METRICS_PORT",
    "SUANLI_METRICS_ADDR",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in OTEL_VARS:
        monkeypatch.delenv(var, raising=False)
    yield
    # A failing test must not leave an open handle that makes the next setup return it.
    current = telemetry.active()
    if current is not None:
        current.shutdown()


@pytest.fixture
def make() -> Iterator[Callable[..., Telemetry]]:
    handles: list[Telemetry] = []

    def _make(service: str = "test-svc", **kwargs: object) -> Telemetry:
        kwargs.setdefault("registry", CollectorRegistry())
        kwargs.setdefault("metrics_addr", "127.0.0.1")
        handle = telemetry.setup(service, **kwargs)  # type: ignore[arg-type]
        handles.append(handle)
        return handle

    yield _make
    for handle in handles:
        handle.shutdown()


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def test_counter_is_served_on_the_bound_metrics_port(make: Callable[..., Telemetry]) -> None:
    tel = make(metrics_port=0)
    assert tel.metrics_port is not None and tel.metrics_port > 0
    counter = tel.meter("tests").create_counter("suanli_test_requests_total")
    counter.add(3, {"route": "a"})
    counter.add(2, {"route": "a"})

    assert tel.metrics_url == f"http://127.0.0.1:{tel.metrics_port}/metrics"
    samples = scrape(tel.metrics_url)

    values = [v for labels, v in samples["suanli_test_requests_total"] if labels.get("route") == "a"]
    assert values == [5.0]
    [(info, _)] = samples["target_info"]
    assert info["service_name"] == "test-svc"
    assert info["service_namespace"] == "suanli"
    assert info["service_version"]


def test_second_valued_histograms_get_latency_buckets(make: Callable[..., Telemetry]) -> None:
    tel = make(metrics_port=0)
    tel.meter("tests").create_histogram("suanli_test_cycle_seconds", unit="s").record(0.004)
    assert tel.metrics_url is not None

    buckets = {labels["le"]: v for labels, v in scrape(tel.metrics_url)["suanli_test_cycle_seconds_bucket"]}

    assert buckets["0.0025"] == 0.0
    assert buckets["0.005"] == 1.0
    assert buckets["+Inf"] == 1.0


def test_shutdown_stops_the_metrics_server(make: Callable[..., Telemetry]) -> None:
    tel = make(metrics_port=0)
    assert tel.metrics_url is not None
    url = tel.metrics_url
    scrape(url)

    tel.shutdown()
    tel.shutdown()  # a second call is a no-op

    assert tel.closed
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)


def test_metrics_port_comes_from_env(make: Callable[..., Telemetry], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUANLI_METRICS_PORT", "0")
    tel = make()
    assert tel.metrics_port is not None and tel.metrics_port > 0
    tel.meter("tests").create_counter("suanli_test_env_total").add(1)
    assert tel.metrics_url is not None
    assert scrape(tel.metrics_url)["suanli_test_env_total"][0][1] == 1.0


def test_no_port_means_no_metrics_server_and_no_otlp(make: Callable[..., Telemetry]) -> None:
    tel = make()
    assert tel.metrics_port is None
    assert tel.metrics_url is None
    assert not tel.otlp_traces and not tel.otlp_metrics


def test_bad_env_port_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUANLI_METRICS_PORT", "ninety")
    with pytest.raises(ValueError, match="SUANLI_METRICS_PORT"):
        telemetry.setup("test-svc")
    assert telemetry.active() is None


def test_setup_twice_returns_the_open_handle_and_refuses_another_service(
    make: Callable[..., Telemetry],
) -> None:
    first = make()
    assert make() is first
    with pytest.raises(RuntimeError, match="already set up"):
        make("other-svc")

    first.shutdown()
    second = make("other-svc")

    assert second is not first
    assert telemetry.active() is second
    # The globals follow the new handle, so code using trace.get_tracer() exports through it.
    assert trace.get_tracer_provider() is second.tracer_provider


@dataclass
class Received:
    path: str
    content_type: str
    body: bytes


class OtlpSink:
    """A stand-in collector: records every POST and answers 200."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        sink = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                sink.requests.append(Received(self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, path: str, timeout: float = 10.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = [r for r in self.requests if r.path == path]
            if hits:
                return hits
            time.sleep(0.01)
        raise AssertionError(f"no POST to {path} within {timeout}s; got {[r.path for r in self.requests]}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    s = OtlpSink()
    yield s
    s.close()


def test_otlp_endpoint_env_exports_spans_and_metrics(
    sink: OtlpSink, make: Callable[..., Telemetry], monkeypatch: pytest.MonkeyPatch
) -> None:
    # sink before make: the handle must shut down (final export) while the sink still listens.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.url)
    tel = make("otlp-svc")
    assert tel.otlp_traces and tel.otlp_metrics

    with tel.tracer("tests").start_as_current_span("schedule-cycle"):
        pass
    tel.meter("tests").create_counter("suanli_test_exported_total").add(7)
    assert tel.force_flush(5_000)

    [traces, *_] = sink.wait_for("/v1/traces")
    assert traces.content_type == "application/x-protobuf"
    request = ExportTraceServiceRequest.FromString(traces.body)
    [resource_spans] = request.resource_spans
    attrs = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert attrs["service.name"] == "otlp-svc"
    assert attrs["service.namespace"] == "suanli"
    names = [s.name for ss in resource_spans.scope_spans for s in ss.spans]
    assert names == ["schedule-cycle"]

    exported = set()
    for hit in sink.wait_for("/v1/metrics"):
        for rm in ExportMetricsServiceRequest.FromString(hit.body).resource_metrics:
            exported |= {m.name for sm in rm.scope_metrics for m in sm.metrics}
    assert "suanli_test_exported_total" in exported


def test_signal_endpoint_enables_only_that_signal(
    sink: OtlpSink, make: Callable[..., Telemetry], monkeypatch: pytest.MonkeyPatch
) -> None:
    # sink before make: the handle must shut down (final export) while the sink still listens.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{sink.url}/v1/traces")
    tel = make()
    assert tel.otlp_traces and not tel.otlp_metrics

    with tel.tracer("tests").start_as_current_span("only-traces"):
        pass
    tel.shutdown()  # shutdown flushes the batch processor

    assert sink.wait_for("/v1/traces")
    assert not [r for r in sink.requests if r.path == "/v1/metrics"]


def test_exporter_none_switches_a_signal_off(
    make: Callable[..., Telemetry], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    tel = make()
    assert not tel.otlp_traces and not tel.otlp_metrics


def test_without_an_exporter_spans_record_nothing_and_pass_the_trace_on(
    make: Callable[..., Telemetry],
) -> None:
    tel = make()
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tel.tracer("tests").start_as_current_span("handle", context=context_of(incoming)) as span:
        assert not span.is_recording()
        # What the process publishes inside the span carries the caller's trace, sampled flag included.
        assert current_traceparent() == incoming
    with tel.tracer("tests").start_as_current_span("root") as root:
        assert not root.is_recording() and current_traceparent() is None


def test_with_an_exporter_spans_are_recorded(make: Callable[..., Telemetry]) -> None:
    exporter = InMemorySpanExporter()
    tel = make(span_exporter=exporter)
    with tel.tracer("tests").start_as_current_span("recorded") as span:
        assert span.is_recording()
    assert [s.name for s in exporter.get_finished_spans()] == ["recorded"]
