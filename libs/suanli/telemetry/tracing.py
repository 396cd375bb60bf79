"""Spans of the platform: tracers that follow the installed provider, trace context as one stored string.

A record's trace context crosses three kinds of hops: Kafka headers (`suanli.telemetry.propagation`), gRPC
metadata (`suanli.telemetry.grpc`), and a database row written now and published later (the outbox). For
the last one the context is stored as its W3C ``traceparent`` string: one column, readable in SQL, and
enough to continue the trace (``tracestate`` and baggage are not kept; the platform writes neither).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, Span, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

TRACEPARENT = "traceparent"

# Always W3C, whatever OTEL_PROPAGATORS says: the stored string must read back the same in every process.
_W3C = TraceContextTextMapPropagator()

# Tracers per (provider, name). A tracer fetched once at construction would stay bound to the provider of
# that moment, and tests (or an embedded service restarted) install a new one; fetching per span costs a
# lock and an allocation on every record.
# Keyed by the provider object, not its id: the key keeps it alive, so an id is never reused for another.
_tracers: dict[tuple[object, str], trace.Tracer] = {}


def tracer(name: str) -> trace.Tracer:
    """The tracer ``name`` of the currently installed global provider."""
    provider = trace.get_tracer_provider()
    key = (provider, name)
    found = _tracers.get(key)
    if found is None:
        if len(_tracers) > 64:  # providers replaced many times (tests): forget the old ones
            _tracers.clear()
        found = _tracers[key] = provider.get_tracer(name)
    return found


def current_traceparent(context: Context | None = None) -> str | None:
    """The ``traceparent`` of the span active in ``context`` (default: the current one), or None."""
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, context=context)
    return carrier.get(TRACEPARENT)


def context_of(traceparent: str | bytes | None) -> Context | None:
    """A context whose parent is the span ``traceparent`` names; None when absent or malformed."""
    if not traceparent:
        return None
    if isinstance(traceparent, bytes):
        traceparent = traceparent.decode("utf-8", errors="replace")
    ctx = _W3C.extract({TRACEPARENT: traceparent}, context=Context())
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx


def span_context_of(traceparent: str | bytes | None) -> SpanContext | None:
    """The remote span context ``traceparent`` names (for span links); None when absent or malformed."""
    ctx = context_of(traceparent)
    return None if ctx is None else trace.get_current_span(ctx).get_span_context()


def links_of(traceparents: Iterable[str | None], limit: int = 64) -> list[Link]:
    """Links to the distinct spans ``traceparents`` name, at most ``limit`` (a batch span's sources)."""
    links: list[Link] = []
    seen: set[str] = set()
    for value in traceparents:
        if value is None or value in seen:
            continue
        seen.add(value)
        found = span_context_of(value)
        if found is not None:
            links.append(Link(found))
            if len(links) >= limit:
                break
    return links


def batch_span(
    name: str,
    traceparents: Iterable[str | None],
    attributes: Mapping[str, AttributeValue] | None = None,
    *,
    tracer_name: str = "suanli",
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
) -> AbstractContextManager[Span]:
    """A span for work done on behalf of ``traceparents`` at once (a group commit, a window of records).

    When they all name one span (a single command, the common case at low load) it is the parent, so
    the work sits inside that trace; otherwise the span starts a trace of its own linked to each of them,
    which is how OpenTelemetry models a batch (no record's trace is chosen over the others'). With none
    at all it is a child of the current span, if any.
    """
    values = [v for v in traceparents if v is not None]
    distinct = set(values)
    parent = context_of(values[0]) if len(distinct) == 1 else None
    if parent is None and distinct:
        parent = Context()  # a root: the batch belongs to none of its sources' traces
    return tracer(tracer_name).start_as_current_span(
        name,
        context=parent,
        kind=kind,
        links=links_of(values) if len(distinct) > 1 else (),
        attributes={**(attributes or {}), "batch.traces": len(distinct)},
    )


@contextmanager
def continued(traceparent: str | bytes | None) -> Iterator[None]:
    """Make the span ``traceparent`` names the current parent for the block (no-op without one)."""
    ctx = context_of(traceparent)
    if ctx is None:
        yield
        return
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


def record_error(span: Span, exc: BaseException) -> None:
    """Mark ``span`` failed by ``exc`` (status ERROR with the exception event)."""
    span.record_exception(exc)
    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
