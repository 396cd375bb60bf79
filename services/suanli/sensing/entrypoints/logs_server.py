"""The agent's logs endpoint: `suanli.sensing.v1.AgentLogs` over gRPC, behind the platform's interceptors
(tracing and RED metrics, then authentication).

The scheduler's StreamJobLogs calls it with its own caller's token (docs/api.md, "Task logs"): the
interceptor verifies the token and the role (the policy table), and this servicer keeps the caller to
the tenant recorded with the attempt's placement. Another tenant's attempt answers NOT_FOUND, the same as
an attempt this agent keeps no log of, so ids elsewhere cannot be probed.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Sequence

import grpc

from suanli.api.sensing.v1 import agent_logs_pb2 as pb
from suanli.api.sensing.v1 import agent_logs_pb2_grpc as pb_grpc
from suanli.auth import context as auth_context
from suanli.auth.server import AuthSettings, server_auth
from suanli.auth.tls import add_port
from suanli.rpc import add_health, rpc_errors
from suanli.sensing.adapters.task_logs import TaskLogNotFound, TaskLogs
from suanli.sensing.service_layer.agent import NodeAgent
from suanli.telemetry.grpc import with_tracing

log = logging.getLogger(__name__)
SERVICE_NAME = "suanli.sensing.v1.AgentLogs"


class AgentLogsServicer(pb_grpc.AgentLogsServicer):
    def __init__(self, logs: TaskLogs) -> None:
        self.logs = logs

    async def StreamTaskLog(
        self, request: pb.StreamTaskLogRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.LogChunk]:
        async with rpc_errors(context):
            owner = self.logs.owner(request.task_id, request.attempt)
            if not auth_context.sees(owner.tenant):
                raise TaskLogNotFound(self.logs.node_id, request.task_id, request.attempt)
            chunks = self.logs.read(request.task_id, request.attempt, follow=request.follow)
        async for data in chunks:
            yield pb.LogChunk(data=data)


async def start_logs_server(
    servicer: AgentLogsServicer,
    listen: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: AuthSettings | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Serve on ``listen`` (host:port; port 0 picks one); the server and its bound port."""
    server = grpc.aio.server(interceptors=interceptors)
    pb_grpc.add_AgentLogsServicer_to_server(servicer, server)
    add_health(server, SERVICE_NAME)
    port = add_port(server, listen, tls)
    await server.start()
    return server, port


class LogsEndpoint:
    """The endpoint of one real agent: serves its task logs while `serving` runs, and says where."""

    def __init__(
        self, logs: TaskLogs, listen: str, settings: AuthSettings, advertise: str | None = None
    ) -> None:
        self.logs = logs
        self.listen = listen
        self.settings = settings
        self._advertise = advertise
        self.address = ""  # what the node's label publishes, once serving

    def bind(self, agent: NodeAgent) -> None:
        """Follow the agent's task table: a followed log ends once its attempt no longer runs there."""

        def active(task_id: str, attempt: int) -> bool:
            run = agent.table.get(task_id)
            return run is not None and run.placement.attempt == attempt

        self.logs.active = active

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        """Serve with the settings' authentication and TLS while the block runs; the advertised address."""
        async with server_auth(self.settings) as auth:
            interceptors = with_tracing(() if auth is None else (auth.interceptor,))
            servicer = AgentLogsServicer(self.logs)
            server, port = await start_logs_server(servicer, self.listen, interceptors, self.settings)
            self.address = self._advertise or advertised(self.listen, port)
            log.info("serving task logs of %s on port %d as %s", self.logs.log_dir, port, self.address)
            try:
                yield self.address
            finally:
                await server.stop(grace=1.0)


def advertised(listen: str, port: int) -> str:
    """HOST:PORT peers dial for ``listen`` bound on ``port``: a wildcard host becomes the host name."""
    host = listen.rsplit(":", 1)[0].strip("[]")
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
