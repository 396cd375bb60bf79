"""Traces and metrics for every Suanli process (ARCHITECTURE §2, principle 6).

``setup()`` wires OpenTelemetry once per process; ``inject_headers`` / ``extract_context`` carry W3C trace
context across Kafka hops; ``tracing`` stores it with outbox rows and ``grpc`` carries it in
RPC metadata; ``names`` is the catalogue of metric names dashboards are built on.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from suanli.telemetry.names import METRICS, METRICS_BY_NAME, METRICS_PORTS, MetricSpec
from suanli.telemetry.propagation import extract_context, inject_headers, propagated_fields
from suanli.telemetry.tracing import (
    TRACEPARENT,
    batch_span,
    context_of,
    continued,
    current_traceparent,
    links_of,
    tracer,
)

if TYPE_CHECKING:
    from suanli.telemetry.runtime import (
        METRICS_ADDR_ENV,
        METRICS_PORT_ENV,
        SECONDS_BUCKETS,
        Telemetry,
        active,
        setup,
    )

# The runtime loads the OpenTelemetry SDK and prometheus_client (about 200 ms): imported on first use, so
# a client that only sends trace context (suanli.client's channels, the CLI) needs just the API.
_RUNTIME = frozenset(
    {"METRICS_ADDR_ENV", "METRICS_PORT_ENV", "SECONDS_BUCKETS", "Telemetry", "active", "setup"}
)


def __getattr__(name: str) -> Any:
    if name in _RUNTIME:
        return getattr(importlib.import_module("suanli.telemetry.runtime"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "METRICS",
    "METRICS_ADDR_ENV",
    "METRICS_BY_NAME",
    "METRICS_PORTS",
    "METRICS_PORT_ENV",
    "SECONDS_BUCKETS",
    "TRACEPARENT",
    "MetricSpec",
    "Telemetry",
    "active",
    "batch_span",
    "context_of",
    "continued",
    "current_traceparent",
    "extract_context",
    "inject_headers",
    "links_of",
    "propagated_fields",
    "setup",
    "tracer",
]
