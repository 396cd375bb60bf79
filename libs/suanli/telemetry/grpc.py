"""Trace context over gRPC: a server interceptor continues the caller's trace, client ones send it.

The context travels as W3C ``traceparent`` metadata (gRPC metadata keys are lower case, as the header
is). A server span is named after the method (``suanli.scheduling.v1.Scheduler/SubmitJob``) with the
``rpc.*`` attributes of the OpenTelemetry conventions; handlers add their domain attributes (``job_id``)
to it through ``trace.get_current_span()``. An aborted call is recorded with its status code.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

import grpc
from opentelemetry import trace
from opentelemetry.context import Context

from suanli.telemetry.tracing import TRACEPARENT, context_of, current_traceparent, tracer

_TRACER = "suanli.rpc"


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


def _finish(span: trace.Span, context: grpc.aio.ServicerContext) -> None:
    code = context.code()
    if code is not None and code != grpc.StatusCode.OK:
        span.set_attribute("rpc.grpc.status_code", code.value[0])
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{code.name}: {context.details() or ''}"))


def _asynchronous(handler: grpc.RpcMethodHandler) -> bool:
    if handler.unary_unary is not None:
        return inspect.iscoroutinefunction(handler.unary_unary)
    if handler.unary_stream is not None:
        return inspect.isasyncgenfunction(handler.unary_stream)
    return False


class TracingServerInterceptor(grpc.aio.ServerInterceptor):
    """Runs every unary and server-streaming handler inside a SERVER span continuing the caller's trace."""

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
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                with _server_span(method, parent) as span:
                    try:
                        return await inner(request, context)
                    finally:
                        _finish(span, context)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                with _server_span(method, parent) as span:
                    try:
                        async for item in inner_stream(request, context):
                            yield item
                    finally:
                        _finish(span, context)

            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # client- and bidi-streaming calls: none of the platform's APIs has one


def _with_traceparent(details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
    value = current_traceparent()
    if value is None:
        return details
    metadata = [(k, v) for k, v in (details.metadata or ()) if k != TRACEPARENT]
    metadata.append((TRACEPARENT, value))
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


def with_tracing(interceptors: Iterable[grpc.aio.ServerInterceptor] = ()) -> tuple[Any, ...]:
    """A server's interceptors with tracing first, so a call refused by the next ones has its span too."""
    return (TracingServerInterceptor(), *interceptors)
