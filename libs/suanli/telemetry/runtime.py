"""One call that wires a process's OpenTelemetry traces and metrics.

A service calls :func:`setup` once at start-up and :meth:`Telemetry.shutdown` on the way out. What gets
configured:

- a TracerProvider and a MeterProvider sharing one resource (``service.name``, ``service.namespace=suanli``,
  ``service.version``, ``service.instance.id``; ``OTEL_RESOURCE_ATTRIBUTES`` adds more);
- a Prometheus ``/metrics`` endpoint when a port is given (argument or ``SUANLI_METRICS_PORT``; 0 picks a
  free port, reported as :attr:`Telemetry.metrics_port`);
- OTLP export of traces (http/protobuf, or gRPC with ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc``) and/or
  metrics (http/protobuf) only when the standard ``OTEL_EXPORTER_OTLP_*ENDPOINT``
  variables say where to, so a laptop run without a collector never stalls on connection errors.

OpenTelemetry lets a process install its global providers once. The first :func:`setup` installs them; a
later :func:`setup` after :meth:`Telemetry.shutdown` (tests do this) swaps in the new providers. Tracers and
meters fetched from the globals *before* such a swap stay bound to the old, shut-down providers, so code
should fetch them after setup or from :meth:`Telemetry.tracer` / :meth:`Telemetry.meter`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.metrics import Histogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger(__name__)

NAMESPACE = "suanli"
METRICS_PORT_ENV = "SUANLI_METRICS_PORT"
METRICS_ADDR_ENV = "SUANLI_METRICS_ADDR"

# The SDK's default histogram buckets (0..10000) suit milliseconds; for second-valued latencies they would
# put every observation in the first two buckets. These span 0.5 ms to 2 minutes.
SECONDS_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)

_lock = threading.Lock()
_active: Telemetry | None = None
# Providers this module installed as the OpenTelemetry globals; only those may be swapped out later.
_installed: tuple[TracerProvider, MeterProvider] | None = None


class UnexportedTracerProvider(TracerProvider):
    """The provider of a process whose spans go nowhere: its tracers record nothing, pass traces on.

    A recording span nobody exports is pure cost, paid on every record and RPC of the hot paths (the
    SDK's span objects, ids, attributes: about a tenth of metering's and the agent's CPU under
    `bench/latency.py`). The API's no-op tracer keeps what propagation needs: inside a span started from
    an incoming ``traceparent`` the current context is that parent's, so what the process publishes
    carries the caller's trace on to the next, exporting, process. A root started here has no trace.
    """

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource=resource)
        self._no_op = otel_trace.NoOpTracer()

    def get_tracer(self, *args: Any, **kwargs: Any) -> otel_trace.Tracer:
        """The no-op tracer, whatever the name."""
        return self._no_op


@dataclass(eq=False)
class Telemetry:
    """The configured providers of one process and the ``/metrics`` server, if any."""

    service_name: str
    resource: Resource
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    metrics_port: int | None = None
    metrics_addr: str | None = None
    otlp_traces: bool = False
    otlp_metrics: bool = False
    _server: WSGIServer | None = field(default=None, repr=False)
    _server_thread: threading.Thread | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)

    @property
    def closed(self) -> bool:
        """Whether `shutdown` has run."""
        return self._closed

    @property
    def metrics_url(self) -> str | None:
        """The URL Prometheus scrapes, or None when no metrics port is served."""
        if self.metrics_port is None:
            return None
        host = "127.0.0.1" if self.metrics_addr in (None, "", "0.0.0.0", "::") else self.metrics_addr
        return f"http://{host}:{self.metrics_port}/metrics"

    def tracer(self, name: str, version: str | None = None) -> otel_trace.Tracer:
        """A tracer of this runtime's provider."""
        return self.tracer_provider.get_tracer(name, version)

    def meter(self, name: str, version: str | None = None) -> otel_metrics.Meter:
        """A meter of this runtime's provider."""
        return self.meter_provider.get_meter(name, version)

    def force_flush(self, timeout_millis: int = 10_000) -> bool:
        """Export buffered spans and metrics now; True when every exporter finished in time."""
        spans_ok = self.tracer_provider.force_flush(timeout_millis)
        metrics_ok = self.meter_provider.force_flush(timeout_millis)
        return bool(spans_ok and metrics_ok)

    def shutdown(self) -> None:
        """Flush and stop exporters, then stop the ``/metrics`` server. Safe to call more than once."""
        global _active
        with _lock:
            if self._closed:
                return
            self._closed = True
            if _active is self:
                _active = None
        try:
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown()
        finally:
            if self._server is not None:
                self._server.shutdown()
                self._server.server_close()
            if self._server_thread is not None:
                self._server_thread.join(timeout=5)


def setup(
    service_name: str,
    *,
    metrics_port: int | None = None,
    metrics_addr: str | None = None,
    service_version: str | None = None,
    instance_id: str | None = None,
    registry: CollectorRegistry | None = None,
    install_globals: bool = True,
    span_exporter: SpanExporter | None = None,
) -> Telemetry:
    """Configure traces and metrics for ``service_name`` and return the handle to shut them down.

    ``metrics_port`` falls back to ``SUANLI_METRICS_PORT``; with neither, no ``/metrics`` endpoint is
    served. ``metrics_addr`` (or ``SUANLI_METRICS_ADDR``) defaults to all interfaces, which a container
    needs to be scraped. ``registry`` defaults to prometheus_client's global registry, so metrics a module
    declares with prometheus_client directly are served alongside the OpenTelemetry ones.

    Calling setup again while the previous handle is open returns that handle when the service name
    matches (repeated start-up code is harmless) and raises ``RuntimeError`` otherwise, because one
    process exports under one ``service.name``.

    ``span_exporter`` receives every span as it ends (tests pass an ``InMemorySpanExporter``), besides
    OTLP when configured.
    """
    global _active
    with _lock:
        if _active is not None and not _active.closed:
            if _active.service_name != service_name:
                raise RuntimeError(
                    f"telemetry already set up for {_active.service_name!r}; "
                    f"shut it down before setting up {service_name!r}"
                )
            return _active

        resource = _resource(service_name, service_version, instance_id)
        otlp_traces = _otlp_enabled("TRACES")
        exported = span_exporter is not None or otlp_traces
        tracer_provider = (
            TracerProvider(resource=resource) if exported else UnexportedTracerProvider(resource)
        )
        readers: list[MetricReader] = []
        server: WSGIServer | None = None
        thread: threading.Thread | None = None
        port = _metrics_port(metrics_port)
        addr = metrics_addr if metrics_addr is not None else os.environ.get(METRICS_ADDR_ENV, "0.0.0.0")
        otlp_metrics = _otlp_enabled("METRICS")
        try:
            if port is not None:
                # Imported here: the exporter registers a collector at construction, and processes that
                # only push OTLP should not need it.
                from opentelemetry.exporter.prometheus import PrometheusMetricReader

                prom_registry = registry if registry is not None else REGISTRY
                readers.append(PrometheusMetricReader(registry=prom_registry))
                server, thread = start_http_server(port, addr=addr, registry=prom_registry)
                port = int(server.server_port)
            if otlp_metrics:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

                readers.append(PeriodicExportingMetricReader(OTLPMetricExporter()))
            if span_exporter is not None:
                tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
            if otlp_traces:
                tracer_provider.add_span_processor(BatchSpanProcessor(_otlp_span_exporter()))
            meter_provider = MeterProvider(
                resource=resource,
                metric_readers=readers,
                views=[
                    View(
                        instrument_type=Histogram,
                        instrument_unit="s",
                        aggregation=ExplicitBucketHistogramAggregation(SECONDS_BUCKETS),
                    )
                ],
            )
        except BaseException:
            # A half-built setup must not leave a port bound or a collector registered behind it.
            for reader in readers:
                reader.shutdown()
            tracer_provider.shutdown()
            if server is not None:
                server.shutdown()
                server.server_close()
            raise

        telemetry = Telemetry(
            service_name=service_name,
            resource=resource,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            metrics_port=port,
            metrics_addr=addr if port is not None else None,
            otlp_traces=otlp_traces,
            otlp_metrics=otlp_metrics,
            _server=server,
            _server_thread=thread,
        )
        if install_globals:
            _install_globals(tracer_provider, meter_provider)
        _active = telemetry
        log.info(
            "telemetry for %s: metrics_port=%s otlp_traces=%s otlp_metrics=%s",
            service_name,
            port,
            otlp_traces,
            otlp_metrics,
        )
        return telemetry


def active() -> Telemetry | None:
    """The open handle from the last :func:`setup`, if any."""
    return _active


def _resource(service_name: str, service_version: str | None, instance_id: str | None) -> Resource:
    if service_version is None:
        try:
            service_version = metadata.version("suanli")
        except metadata.PackageNotFoundError:
            service_version = "0.0.0"
    if instance_id is None:
        instance_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    # Explicit attributes win over OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME, which still add the rest.
    return Resource.create(
        {
            "service.name": service_name,
            "service.namespace": NAMESPACE,
            "service.version": service_version,
            "service.instance.id": instance_id,
            # Several processes may share a service name (replicas, a restart): spans say which one.
            "process.pid": os.getpid(),
        }
    )


def _metrics_port(explicit: int | None) -> int | None:
    if explicit is not None:
        port = explicit
    else:
        raw = os.environ.get(METRICS_PORT_ENV, "").strip()
        if not raw:
            return None
        try:
            port = int(raw)
        except ValueError:
            raise ValueError(f"{METRICS_PORT_ENV}={raw!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"metrics port {port} out of range 0..65535")
    return port


def _protocol(signal: str) -> str:
    return os.environ.get(
        f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "")
    ).strip()


def _otlp_span_exporter() -> SpanExporter:
    if _protocol("TRACES") == "grpc":
        from suanli.telemetry.otlp import GrpcSpanExporter

        return GrpcSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _otlp_enabled(signal: str) -> bool:
    # OTEL_{TRACES,METRICS}_EXPORTER=none is the standard way to switch a signal off even when an
    # endpoint is inherited from the environment.
    if os.environ.get(f"OTEL_{signal}_EXPORTER", "").strip().lower() == "none":
        return False
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    protocol = _protocol(signal)
    enabled = bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip()
    )
    # Spans also go over gRPC (suanli.telemetry.otlp); metrics only over http/protobuf.
    supported = ("http/protobuf", "grpc") if signal == "TRACES" else ("http/protobuf",)
    if enabled and protocol and protocol not in supported:
        log.warning("OTLP protocol %r is not supported; exporting %s with http/protobuf", protocol, signal)
    return enabled


def _install_globals(tracer_provider: TracerProvider, meter_provider: MeterProvider) -> None:
    global _installed
    current_tp = otel_trace.get_tracer_provider()
    current_mp = otel_metrics.get_meter_provider()
    unset = isinstance(current_tp, otel_trace.ProxyTracerProvider) and isinstance(
        current_mp, otel_metrics._internal._ProxyMeterProvider
    )
    ours = _installed is not None and current_tp is _installed[0] and current_mp is _installed[1]
    if not (unset or ours):
        log.warning("OpenTelemetry global providers were installed elsewhere; leaving them in place")
        return
    if ours:
        # OpenTelemetry's API refuses a second set_*_provider per process; re-arm its once-guards so a
        # process that shut its telemetry down (tests, a restarted embedded service) can set up again.
        from opentelemetry.metrics import _internal as metrics_internal
        from opentelemetry.util._once import Once

        otel_trace._TRACER_PROVIDER_SET_ONCE = Once()
        otel_trace._TRACER_PROVIDER = None
        metrics_internal._METER_PROVIDER_SET_ONCE = Once()
        metrics_internal._METER_PROVIDER = None
    otel_trace.set_tracer_provider(tracer_provider)
    otel_metrics.set_meter_provider(meter_provider)
    _installed = (tracer_provider, meter_provider)
