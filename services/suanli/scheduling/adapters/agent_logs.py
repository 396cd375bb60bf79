"""The scheduler's client of the node agents' logs endpoints (`suanli.sensing.v1.AgentLogs`).

StreamJobLogs proxies through it with the caller's own ``authorization`` header, so the agent applies
the same token and its own tenant check to the attempt (docs/security.md, "Task logs"), and with its
trace context, so the agent's span is a child of StreamJobLogs'. The agent's
answers become the kernel's request errors: the scheduler's caller gets a precise status whichever side
refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc

from suanli.api.sensing.v1 import agent_logs_pb2 as pb
from suanli.api.sensing.v1 import agent_logs_pb2_grpc as pb_grpc
from suanli.client.channel import aio_bearer_channel
from suanli.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    RequestError,
    Unauthenticated,
    Unavailable,
)
from suanli.rpc import DEPENDENCY_UNAVAILABLE

Metadata = Sequence[tuple[str, str | bytes]]

_KINDS: dict[grpc.StatusCode, type[RequestError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
}


class AgentLogClient:
    """One channel per agent endpoint, plaintext or TLS trusting ``ca`` (PEM)."""

    def __init__(self, ca: bytes | None = None) -> None:
        self._ca = ca
        self._channels: dict[str, grpc.aio.Channel] = {}

    def _stub(self, endpoint: str) -> pb_grpc.AgentLogsStub:
        channel = self._channels.get(endpoint)
        if channel is None:
            # No bearer of its own: each call carries its caller's. The kernel's channel sends the trace.
            channel = aio_bearer_channel(endpoint, "", self._ca)
            self._channels[endpoint] = channel
        return pb_grpc.AgentLogsStub(channel)

    async def stream(
        self,
        node_id: str,
        endpoint: str,
        task_id: str,
        attempt: int,
        *,
        follow: bool,
        metadata: Metadata = (),
    ) -> AsyncIterator[bytes]:
        """The attempt's output as the agent streams it; its refusals as request errors."""
        request = pb.StreamTaskLogRequest(task_id=task_id, attempt=attempt, follow=follow)
        call = self._stub(endpoint).StreamTaskLog(request, metadata=tuple(metadata) or None)
        try:
            async for chunk in call:
                yield chunk.data
        except grpc.aio.AioRpcError as exc:
            kind = _KINDS.get(exc.code())
            if kind is not None:
                raise kind(exc.details() or f"the agent of node {node_id} refused") from None
            # Worded as the kernel words a dependency that is away, so a client tells it from a
            # scheduler it cannot reach.
            raise Unavailable(
                f"{DEPENDENCY_UNAVAILABLE} (the agent of node {node_id} at {endpoint} does not answer "
                f"for its logs: {exc.code().name}: {exc.details()})"
            ) from None
        finally:
            call.cancel()

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
