"""gRPC calls traced and measured: server interceptors trace and count each call, client ones send it.

The context travels as W3C ``traceparent`` metadata (gRPC metadata keys are lower case, as the header
is). A server span is named after the method (``suanli.scheduling.v1.Scheduler/SubmitJob``) with the
``rpc.*`` attributes of the OpenTelemetry conventions; handlers add their domain attributes (``job_id``)
to it through ``trace.get_current_span()``. An aborted call is recorded with its status code.

The same interceptor keeps the servers' RED metrics (``suanli_rpc_server_handled_total`` by method and
status code, ``suanli_rpc_server_handling_seconds`` by method): one wrapper per call, so the span and
the metrics see the same status.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import grpc
from opentelemetry import metrics, trace
from opentelemetry.context import Context

from suanli.telemetry.names import RPC_HANDLED, RPC_HANDLING, described
from suanli.telemetry.tracing import TRACEPARENT, context_of, current_traceparent, tracer

_TRACER = "suanli.rpc"
# Probes, not the platform's calls: counted they would outnumber the API's calls on a quiet platform.
_UNMEASURED = frozenset({"grpc.health.v1.Health"})


def _parent(metadata: Any) -> Context | None:
    for key, value in metadata or ():
        if key == TRACEPARENT:
            return context_of(value)
    return None


def _attributes(method: str) -> dict[str, str]:
    service, _, name = method.lstrip("/").partition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}


def _server_span(method: str, parent: Context | None) -> AbstractContextManager[trace.Span]:
    """The SERVER span of one call of ``method``, a child of the caller's context ``parent``."""
    return tracer(_TRACER).start_as_current_span(
        method.lstrip("/"), context=parent, kind=trace.SpanKind.SERVER, attributes=_attributes(method)
    )


def _code(context: grpc.aio.ServicerContext, error: BaseException | None) -> grpc.StatusCode:
    """The status the caller gets: the one set or aborted with, else what grpc makes of ``error``."""
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code
    if error is None:
        return grpc.StatusCode.OK
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return grpc.StatusCode.CANCELLED  # the caller went away (a watch closed) or the server stops
    return grpc.StatusCode.UNKNOWN  # grpc's answer to an exception the handler let out


def _finish(span: trace.Span, context: grpc.aio.ServicerContext, code: grpc.StatusCode) -> None:
    if code != grpc.StatusCode.OK:
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{code.name}: {context.details() or ''}"))


class RpcMetrics:
    """A server's RED metrics: calls by method and status code, and their duration by method.

    Label values are bounded: a method is counted only once a handler was found for it (a call to an
    unknown method never reaches the interceptor's wrapper), and codes are gRPC's seventeen.
    """

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        # The meter of the provider installed now (at server start), as the other metrics fetch theirs.
        meter = meter or metrics.get_meter(_TRACER)
        self._handled = meter.create_counter(RPC_HANDLED, **described(RPC_HANDLED))
        self._handling = meter.create_histogram(RPC_HANDLING, **described(RPC_HANDLING))
        # Built once per method and code: the counter and histogram take them on every call.
        self._of_method: dict[str, dict[str, str]] = {}
        self._of_code: dict[tuple[str, grpc.StatusCode], dict[str, str]] = {}

    def _method(self, method: str) -> dict[str, str]:
        found = self._of_method.get(method)
        if found is None:
            service, _, name = method.lstrip("/").partition("/")
            found = self._of_method[method] = {"grpc_service": service, "grpc_method": name}
        return found

    def handled(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        """One call of ``method`` (``/package.Service/Method``) finished with ``code`` after ``seconds``."""
        labels = self._of_code.get((method, code))
        if labels is None:
            labels = self._of_code[(method, code)] = {**self._method(method), "grpc_code": code.name}
        self._handled.add(1, labels)
        self._handling.record(seconds, self._method(method))


def _asynchronous(handler: grpc.RpcMethodHandler) -> bool:
    if handler.unary_unary is not None:
        return inspect.iscoroutinefunction(handler.unary_unary)
    if handler.unary_stream is not None:
        return inspect.isasyncgenfunction(handler.unary_stream)
    return False


class TracingServerInterceptor(grpc.aio.ServerInterceptor):
    """Runs every unary and server-streaming handler in a SERVER span continuing the caller's trace.

    Each call is also counted and timed in ``rpc_metrics`` (default: the global meter's, made now).
    """

    def __init__(self, rpc_metrics: RpcMetrics | None = None) -> None:
        self._metrics = rpc_metrics or RpcMetrics()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        """The method's handler, wrapped in a span when it is unary or server-streaming."""
        handler = await continuation(details)
        if handler is None or not _asynchronous(handler):
            # A synchronous servicer (grpc_health's HealthServicer) runs as grpc runs it: wrapping it in
            # a coroutine would await its plain answer (TypeError) and block the loop in its Watch.
            return handler
        method = details.method
        parent = _parent(details.invocation_metadata)
        measured = None if method.lstrip("/").partition("/")[0] in _UNMEASURED else self._metrics

        @contextmanager
        def served(context: grpc.aio.ServicerContext) -> Iterator[None]:
            start = time.perf_counter()
            with _server_span(method, parent) as span:
                error: BaseException | None = None
                try:
                    yield
                except BaseException as exc:  # recorded as its status, then raised on
                    error = exc
                    raise
                finally:
                    code = _code(context, error)
                    _finish(span, context, code)
                    if measured is not None:
                        measured.handled(method, code, time.perf_counter() - start)

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                with served(context):
                    return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                with served(context):  # until the stream ends, however it ends
                    async for item in inner_stream(request, context):
                        yield item

            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # client- and bidi-streaming calls: none of the platform's APIs has one


def _sends_traceparent(details: grpc.aio.ClientCallDetails) -> bool:
    return any(key == TRACEPARENT for key, _ in details.metadata or ())


def _with_traceparent(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    value = current_traceparent()
    if value is None or _sends_traceparent(details):
        return details  # no trace to continue, or the caller named the parent itself: its word stands
    metadata = [*(details.metadata or ()), (TRACEPARENT, value)]
    return grpc.aio.ClientCallDetails(
        details.method,
        details.timeout,
        grpc.aio.Metadata(*metadata),
        details.credentials,
        details.wait_for_ready,
    )


def _method(details: grpc.aio.ClientCallDetails) -> str:
    method = details.method
    return method.decode() if isinstance(method, bytes) else method


class TracingUnaryClientInterceptor(grpc.aio.UnaryUnaryClientInterceptor):
    """A CLIENT span per unary call, its context sent as ``traceparent`` metadata."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        """Send the call with ``traceparent`` metadata inside a CLIENT span."""
        if _sends_traceparent(details):
            return await continuation(details, request)
        method = _method(details)
        with tracer(_TRACER).start_as_current_span(
            method.lstrip("/"), kind=trace.SpanKind.CLIENT, attributes=_attributes(method)
        ):
            call = await continuation(_with_traceparent(details), request)
            await call  # the span covers the answer, not only the send
            return call


class TracingStreamClientInterceptor(grpc.aio.UnaryStreamClientInterceptor):
    """Sends the current trace context with server-streaming calls (a watch lasts too long for a span)."""

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        """Send the call with ``traceparent`` metadata."""
        return await continuation(_with_traceparent(details), request)


def client_interceptors() -> list[grpc.aio.ClientInterceptor]:
    """The interceptors a channel needs to carry trace context to the servers it calls."""
    return [TracingUnaryClientInterceptor(), TracingStreamClientInterceptor()]


def with_tracing(
    interceptors: Iterable[grpc.aio.ServerInterceptor] = (), rpc_metrics: RpcMetrics | None = None
) -> tuple[Any, ...]:
    """A server's interceptors with tracing and RED metrics first.

    So a call refused by the next ones (the auth interceptor's UNAUTHENTICATED) is traced and counted too.
    """
    return (TracingServerInterceptor(rpc_metrics), *interceptors)
