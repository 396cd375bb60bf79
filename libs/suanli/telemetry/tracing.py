"""Spans of the platform: tracers that follow the installed provider, trace context as one stored string.

A record's trace context crosses three kinds of hops: Kafka headers (`suanli.telemetry.propagation`), gRPC
metadata (`suanli.telemetry.grpc`), and a database row written now and published later (the outbox). For
the last one the context is stored as its W3C ``traceparent`` string: one column, readable in SQL, and
enough to continue the trace (``tracestate`` and baggage are not kept; the platform writes neither).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import TracebackType

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


@dataclass(eq=False, slots=True)
class _Group:
    span: Span
    context: Context  # the span made current, built once for all of the group's items
    items: int = 0


class _Scope:
    """The group's span current for a block; an error leaving the block is recorded on it."""

    __slots__ = ("_group", "_token")

    def __init__(self, group: _Group) -> None:
        self._group = group
        self._token: object = None

    def __enter__(self) -> Span:
        self._token = otel_context.attach(self._group.context)
        return self._group.span

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]
        if exc is not None:
            record_error(self._group.span, exc)


class SpansPerTrace:
    """One span per distinct trace among the items of a batch: outputs stay in their input's trace.

    For work whose outputs must continue their input's trace (a usage record its task's, a placement
    its job's) where one batch span would have to start a trace of its own.

    `scope(traceparent)` makes the span of that trace current for the block (created on first use, a
    child of the span ``traceparent`` names, linked to ``links``: the batch or cycle it ran in); items
    of one trace share a span (``key`` groups otherwise, e.g. one per job). Every span starts when the
    batch started and ends when the whole batch does (its outputs are committed together), so its
    duration is the batch's. Items without a traceparent get one span in the current context. A
    ``traceparent`` seen before in the batch costs a dictionary lookup (bench/tracing.py).
    """

    def __init__(
        self,
        name: str,
        *,
        attributes: Mapping[str, AttributeValue] | None = None,
        links: Sequence[Link] = (),
        tracer_name: str = "suanli",
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    ) -> None:
        self._name = name
        self._attributes = dict(attributes or {})
        self._links = list(links)
        self._tracer_name = tracer_name
        self._kind = kind
        self._start_ns = time.time_ns()
        self._groups: dict[str, _Group] = {}  # by trace id (or key)
        self._seen: dict[tuple[str | None, str | None], _Group] = {}  # by (traceparent, key) as given

    def __enter__(self) -> SpansPerTrace:
        self._start_ns = time.time_ns()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        end = time.time_ns()
        for group in self._groups.values():
            group.span.set_attribute("records", group.items)
            if exc is not None:
                record_error(group.span, exc)
            group.span.end(end_time=end)
        self._groups.clear()
        self._seen.clear()

    def _group(self, traceparent: str | None, key: str | None) -> _Group:
        given = (traceparent, key)
        found = self._seen.get(given)
        if found is not None:
            return found
        parent = context_of(traceparent)
        if key is None:
            key = format(trace.get_current_span(parent).get_span_context().trace_id, "032x") if parent else ""
        found = self._groups.get(key)
        if found is None:
            span = tracer(self._tracer_name).start_span(
                self._name,
                context=parent,
                kind=self._kind,
                links=self._links,
                attributes=self._attributes,
                start_time=self._start_ns,
            )
            found = self._groups[key] = _Group(span, trace.set_span_in_context(span))
        self._seen[given] = found
        return found

    def scope(self, traceparent: str | None, key: str | None = None) -> AbstractContextManager[Span]:
        """Make the span of ``traceparent``'s trace (or of ``key``) current for the block (one item)."""
        group = self._group(traceparent, key)
        group.items += 1
        return _Scope(group)


def in_trace_of(
    traceparent: str | None,
    name: str,
    attributes: Mapping[str, AttributeValue] | None = None,
    *,
    tracer_name: str = "suanli",
) -> AbstractContextManager[object]:
    """Work done for ``traceparent``'s trace, whatever trace the current span is in.

    When the current span is in that trace already (or ``traceparent`` is absent or malformed) the block
    runs as it is; otherwise it runs in a new span ``name``, a child of the span ``traceparent`` names and
    linked to the current one: the fact that caused the work (a later snapshot closing a task's usage
    window) is kept as a link, and the work's outputs continue the trace they belong to.
    """
    target = context_of(traceparent)
    if target is None:
        return nullcontext()
    wanted = trace.get_current_span(target).get_span_context()
    current = trace.get_current_span().get_span_context()
    if current.is_valid and current.trace_id == wanted.trace_id:
        return nullcontext()
    return tracer(tracer_name).start_as_current_span(
        name,
        context=target,
        links=[Link(current)] if current.is_valid else (),
        attributes=attributes,
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
