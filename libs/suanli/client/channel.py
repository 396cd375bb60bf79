"""grpc.aio channels that send a bearer token and, given a CA, talk TLS: what every Suanli client opens."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc


class _AioMetadata:
    """Adds the bearer header to a grpc.aio call's details."""

    def __init__(self, value: str) -> None:
        self._metadata = (("authorization", f"Bearer {value}"),)

    def _details(self, details: Any) -> grpc.aio.ClientCallDetails:
        metadata = (*(details.metadata or ()), *self._metadata)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )


class _AioBearerUnary(_AioMetadata, grpc.aio.UnaryUnaryClientInterceptor):
    """Unary calls (grpc.aio files an interceptor under one kind only)."""

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        """Send the call with the bearer header added."""
        return await continuation(self._details(details), request)


class _AioBearerStream(_AioMetadata, grpc.aio.UnaryStreamClientInterceptor):
    """The same for server-streaming calls (WatchJob, WatchNetwork)."""

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        """Send the call with the bearer header added."""
        return await continuation(self._details(details), request)


ChannelOptions = Sequence[tuple[str, Any]]


def aio_bearer_channel(
    address: str, value: str, ca_pem: bytes | None = None, options: ChannelOptions = ()
) -> grpc.aio.Channel:
    """A grpc.aio channel to ``address`` sending ``value`` as its bearer token (empty: none).

    TLS trusting ``ca_pem`` when given, else plaintext; ``options`` are gRPC channel arguments. Every call
    carries the caller's trace context (``traceparent``), so the server's span continues its trace.
    """
    # On use: the commands that never open an aio channel (`suanli job list`) do not load OpenTelemetry.
    from suanli.telemetry.grpc import client_interceptors

    interceptors: list[grpc.aio.ClientInterceptor] = client_interceptors()
    if value:
        interceptors += [_AioBearerUnary(value), _AioBearerStream(value)]
    if ca_pem is None:
        return grpc.aio.insecure_channel(address, options=options or None, interceptors=interceptors)
    return grpc.aio.secure_channel(
        address, credentials(ca_pem), options=options or None, interceptors=interceptors
    )


def reconnect_options(initial_s: float, max_s: float) -> list[tuple[str, int]]:
    """Channel arguments that bound gRPC's own reconnection backoff to a caller's retry policy.

    A channel that could not connect fails every call at once until its next connection attempt, and
    gRPC spaces those attempts out to 120 s by default: a client retrying UNAVAILABLE every second would
    keep failing for up to two minutes after the server came back.
    """
    initial_ms, max_ms = max(1, round(initial_s * 1000)), max(1, round(max_s * 1000))
    return [
        ("grpc.initial_reconnect_backoff_ms", initial_ms),
        ("grpc.min_reconnect_backoff_ms", initial_ms),
        ("grpc.max_reconnect_backoff_ms", max_ms),
    ]


def credentials(ca_pem: bytes) -> grpc.ChannelCredentials:
    """TLS credentials trusting ``ca_pem``."""
    # Imported on use: the TLS helpers load cryptography, which plaintext clients never need.
    from suanli.auth.tls import channel_credentials

    return channel_credentials(ca_pem)
