"""The gRPC servers' RED metrics (suanli.telemetry.grpc) against a real in-process grpc.aio server, and
the kernel's client channel carrying the caller's trace to it.

The server counts each call by method and status code and times it (a stream until it ends); the client
is `aio_bearer_channel`, what the CLI, the console and the client library open.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from suanli.client.channel import aio_bearer_channel
from suanli.infra.polling import until
from suanli.telemetry import TRACEPARENT, tracer
from suanli.telemetry.grpc import RpcMetrics, with_tracing
from suanli.telemetry.names import RPC_HANDLED, RPC_HANDLING

SERVICE = "tests.v1.Echo"


@dataclass
class Echo:
    """A unary method that answers or refuses, and a stream that yields what it is told to, then waits."""

    released: asyncio.Event = field(default_factory=asyncio.Event)
    metadata: list[dict[str, str]] = field(default_factory=list)

    async def say(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        self.metadata.append({k: v for k, v in context.invocation_metadata() or ()})
        if request == b"missing":
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such thing")
        if request == b"boom":
            raise RuntimeError("a handler bug")
        return request

    async def count(self, request: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        for i in range(int(request)):
            yield str(i).encode()
        await self.released.wait()  # the stream stays open until the test says


def _handlers(echo: Echo) -> grpc.GenericRpcHandler:
    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Say": grpc.unary_unary_rpc_method_handler(echo.say),
            "Count": grpc.unary_stream_rpc_method_handler(echo.count),
        },
    )


@dataclass
class Served:
    port: int
    echo: Echo
    reader: InMemoryMetricReader

    def points(self, name: str) -> dict[tuple[str, ...], Any]:
        """The data points of metric ``name`` by their label values (sorted by label name)."""
        data = self.reader.get_metrics_data()
        found = (
            []
            if data is None
            else [
                p
                for rm in data.resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
                if m.name == name
                for p in m.data.data_points
            ]
        )
        return {tuple(v for _, v in sorted(p.attributes.items())): p for p in found}

    def handled(self) -> dict[tuple[str, ...], int]:
        """Calls counted, by (grpc_code, grpc_method, grpc_service)."""
        return {labels: p.value for labels, p in self.points(RPC_HANDLED).items()}


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    echo = Echo()
    server = grpc.aio.server(interceptors=with_tracing(rpc_metrics=RpcMetrics(provider.get_meter("t"))))
    server.add_generic_rpc_handlers((_handlers(echo),))
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield Served(port, echo, reader)
    finally:
        echo.released.set()
        await server.stop(None)
        provider.shutdown()


def _unary(channel: grpc.aio.Channel) -> Any:
    return channel.unary_unary(f"/{SERVICE}/Say")


async def test_calls_are_counted_by_method_and_status_code_and_timed(served: Served) -> None:
    async with aio_bearer_channel(f"127.0.0.1:{served.port}", "a-token") as channel:
        assert await _unary(channel)(b"hello", timeout=5) == b"hello"
        assert await _unary(channel)(b"again", timeout=5) == b"again"
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await _unary(channel)(b"missing", timeout=5)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await _unary(channel)(b"boom", timeout=5)
        assert failed.value.code() == grpc.StatusCode.UNKNOWN
        # Health probes are not the platform's calls: never counted.
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)

    assert served.handled() == {
        ("OK", "Say", SERVICE): 2,
        ("NOT_FOUND", "Say", SERVICE): 1,
        ("UNKNOWN", "Say", SERVICE): 1,
    }
    (duration,) = served.points(RPC_HANDLING).values()
    assert dict(duration.attributes) == {"grpc_service": SERVICE, "grpc_method": "Say"}
    assert duration.count == 4 and duration.sum > 0
    assert served.echo.metadata[0]["authorization"] == "Bearer a-token"


async def test_a_stream_is_timed_until_it_ends_and_a_cancelled_one_counts_as_cancelled(
    served: Served,
) -> None:
    async with aio_bearer_channel(f"127.0.0.1:{served.port}", "") as channel:
        count = channel.unary_stream(f"/{SERVICE}/Count")
        stream = count(b"2", timeout=5)
        assert [await stream.read(), await stream.read()] == [b"0", b"1"]
        # Both items are out and the stream is still open: nothing is counted or timed yet.
        assert served.handled() == {} and served.points(RPC_HANDLING) == {}
        served.echo.released.set()
        assert await stream.read() is grpc.aio.EOF
        assert await stream.code() == grpc.StatusCode.OK

        served.echo.released.clear()
        watched = count(b"1", timeout=5)
        assert await watched.read() == b"0"
        watched.cancel()  # as a watch the user stopped

        async def cancelled_counted() -> dict[tuple[str, ...], int] | None:
            handled = served.handled()
            return handled if ("CANCELLED", "Count", SERVICE) in handled else None

        handled = await until(cancelled_counted, 5, "the cancelled stream counted", every=0.01)
    assert handled == {("OK", "Count", SERVICE): 1, ("CANCELLED", "Count", SERVICE): 1}
    (duration,) = served.points(RPC_HANDLING).values()
    assert duration.count == 2


async def test_a_call_through_the_client_channel_starts_the_trace_the_server_continues(
    served: Served, spans: InMemorySpanExporter
) -> None:
    method = f"{SERVICE}/Say"
    async with aio_bearer_channel(f"127.0.0.1:{served.port}", "a-token") as channel:
        with tracer("tests").start_as_current_span("command") as command:
            await _unary(channel)(b"hello", timeout=5)
        # A caller that names the parent itself keeps it: no span of the channel's in between.
        named = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
        await _unary(channel)(b"named", metadata=((TRACEPARENT, named),), timeout=5)

    ended = spans.get_finished_spans()
    (client,) = [s for s in ended if s.name == method and s.kind is trace.SpanKind.CLIENT]
    server_spans = [s for s in ended if s.name == method and s.kind is trace.SpanKind.SERVER]
    assert len(server_spans) == 2
    first, second = server_spans
    trace_id = command.get_span_context().trace_id
    assert client.parent is not None and client.parent.span_id == command.get_span_context().span_id
    sent = served.echo.metadata[0][TRACEPARENT].split("-")
    assert sent[1:3] == [f"{trace_id:032x}", f"{client.context.span_id:016x}"]
    assert first.context.trace_id == trace_id
    assert first.parent is not None and first.parent.span_id == client.context.span_id
    assert served.echo.metadata[1][TRACEPARENT] == named
    assert second.parent is not None and f"{second.parent.span_id:016x}" == "2" * 16
