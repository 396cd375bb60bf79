"""gRPC edges of every service: one table from error kinds to status codes, one way to abort with it.

Servers wrap each handler's body in ``async with rpc_errors(context):``; a ``suanli.errors`` kind
raised inside becomes its status with the error's message; a transient failure of a dependency (the
database restarting, the broker away: ``suanli.infra.transient``) becomes UNAVAILABLE; anything else
propagates (gRPC answers UNKNOWN and the server logs it, which is what an unexpected bug should look like).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import grpc

from suanli import errors
from suanli.infra.transient import is_transient

if TYPE_CHECKING:
    # On use only: the CLI maps errors through this module, and the TLS helpers load `cryptography`.
    from suanli.auth.tls import TlsSettings

STATUS: dict[type[errors.RequestError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def status_of(exc: errors.RequestError) -> grpc.StatusCode:
    """The status for an error kind (the nearest kind in its class hierarchy)."""
    for kind in type(exc).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return grpc.StatusCode.UNKNOWN


# Trailing metadata of a RESOURCE_EXHAUSTED answer: milliseconds after which a retry may pass. The second
# key is gRPC's own, which a client channel with a retry policy honours by itself.
RETRY_AFTER_MS = "retry-after-ms"
GRPC_RETRY_PUSHBACK_MS = "grpc-retry-pushback-ms"


def retry_metadata(exc: errors.RequestError) -> tuple[tuple[str, str], ...]:
    """The retry advice of an error as trailing metadata (none when it has no ``retry_after_s``)."""
    retry_after_s = getattr(exc, "retry_after_s", None)
    if retry_after_s is None:
        return ()
    ms = str(max(0, round(retry_after_s * 1000)))
    return ((RETRY_AFTER_MS, ms), (GRPC_RETRY_PUSHBACK_MS, ms))


# How an UNAVAILABLE answer caused by the service's own database or broker begins (clients tell it apart from
# a service that is not there at all).
DEPENDENCY_UNAVAILABLE = errors.DEPENDENCY_UNAVAILABLE


@asynccontextmanager
async def rpc_errors(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
    """Abort the call with the mapped status when the body raises a ``suanli.errors`` kind."""
    try:
        yield
    except errors.RequestError as exc:
        await context.abort(status_of(exc), str(exc), trailing_metadata=retry_metadata(exc))
    except Exception as exc:
        if not is_transient(exc):
            raise
        # The database restarting or the broker away: the same call may pass in a moment, and a client
        # (or its retry policy) must be able to tell that from a bug, which stays UNKNOWN.
        await context.abort(
            grpc.StatusCode.UNAVAILABLE, f"{DEPENDENCY_UNAVAILABLE} ({type(exc).__name__}: {exc})"
        )


def add_health(server: grpc.aio.Server, service_name: str) -> Any:
    """Serve gRPC health on ``server``: SERVING for the server as a whole and for ``service_name``.

    Returns the health servicer, whose statuses a server may change later (a standby, a shutdown).
    """
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    for name in ("", service_name):
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return servicer


async def start_server(
    register: Callable[[grpc.aio.Server], None],
    service_name: str,
    address: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: TlsSettings | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Serve what `register` adds, with health (SERVING for "" and `service_name`) and reflection.

    Binds `address` (port 0 picks one) with `tls` (None or unset: plaintext) and returns the server and
    the bound port; `interceptors`: the kernel's `AuthInterceptor` when authentication is on.
    """
    # On use: a CLI that only maps errors does not load the health and reflection services.
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection

    from suanli.auth.tls import add_port

    server = grpc.aio.server(interceptors=interceptors)
    register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection((service_name, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    port = add_port(server, address, tls)
    if port == 0:
        raise OSError(f"cannot bind gRPC address {address}")
    await server.start()
    for name in ("", service_name):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port
