"""OTLP over gRPC for spans, from pieces the SDK already ships (the proto stubs and the span encoder).

``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc`` then works without the separate
``opentelemetry-exporter-otlp-proto-grpc`` package.

Only what the platform needs: plaintext or TLS by the endpoint's scheme (``http://`` / ``https://``, or a
bare ``host:port``, plaintext), the standard timeout variable, no retries beyond the batch processor's next
turn (a receiver that is away loses that batch, as the HTTP exporter does after its retries).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from urllib.parse import urlsplit

import grpc
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "http://localhost:4317"


def grpc_endpoint() -> str:
    """The traces endpoint the standard variables name (the signal's own first), else the default."""
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or DEFAULT_ENDPOINT
    )


def _timeout_s() -> float:
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT")
    try:
        return float(raw) / 1000.0 if raw else 10.0  # the variables are in milliseconds
    except ValueError:
        return 10.0


class GrpcSpanExporter(SpanExporter):
    """Sends each batch as one ``TraceService/Export`` call."""

    def __init__(self, endpoint: str | None = None, *, timeout_s: float | None = None) -> None:
        target = endpoint or grpc_endpoint()
        parts = urlsplit(target if "://" in target else f"http://{target}")
        address = parts.netloc or parts.path
        self._channel = (
            grpc.secure_channel(address, grpc.ssl_channel_credentials())
            if parts.scheme == "https"
            else grpc.insecure_channel(address)
        )
        self._stub = TraceServiceStub(self._channel)
        self._timeout_s = _timeout_s() if timeout_s is None else timeout_s
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """One Export call with the batch; FAILURE when the receiver is away or refuses it."""
        if self._closed:
            return SpanExportResult.FAILURE
        try:
            self._stub.Export(encode_spans(spans), timeout=self._timeout_s)
        except grpc.RpcError as exc:
            log.warning("OTLP/gRPC export of %d span(s) failed: %s", len(spans), exc.code())
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered here: the batch processor holds the spans."""
        return True

    def shutdown(self) -> None:
        """Close the channel; later exports fail."""
        self._closed = True
        self._channel.close()
