"""The Routing gRPC API (grpc.aio), with health checking and reflection.

Every instance answers from its own read views (network.links and capacity.nodes read whole), so any
instance serves any call. Errors are kernel request kinds answered through `suanli.rpc`: a bad field
-> INVALID_ARGUMENT naming it (an unknown region lists the known ones); ResolveReplica: NOT_FOUND for a
service no load report names, FAILED_PRECONDITION when none of its replicas can take the request.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

import grpc
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.api.routing.v1 import routing_pb2_grpc as pb_grpc
from suanli.auth.tls import TlsSettings, add_port
from suanli.errors import InvalidArgument, RequestError, ResourceExhausted
from suanli.routing.adapters.metrics import ResolveMetrics
from suanli.routing.domain.links import SITE, LinkState
from suanli.routing.entrypoints.answers import STATUSES, AnswerWriter
from suanli.routing.service_layer.network import NetworkState
from suanli.routing.service_layer.replicas import Considered, ReplicaQuery, ReplicaResolver
from suanli.routing.service_layer.router import ResolveQuery, Router
from suanli.rpc import rpc_errors

SERVICE_NAME = "suanli.routing.v1.Routing"
KINDS = {
    pb.WORKLOAD_KIND_UNSPECIFIED: "training",
    pb.WORKLOAD_KIND_TRAINING: "training",
    pb.WORKLOAD_KIND_INFERENCE: "inference",
}


def link_message(s: LinkState) -> pb.Link:
    at = Timestamp()
    at.FromMilliseconds(s.last_probe_ms)
    return pb.Link(
        link_id=s.link_id,
        scope=s.scope,
        src_region=s.src_region,
        src_site=s.src_site,
        dst_region=s.dst_region,
        dst_site=s.dst_site,
        rtt_ms=s.rtt_ms,
        baseline_rtt_ms=s.baseline_rtt_ms,
        jitter_p95_ms=s.jitter_p95_ms,
        loss_ratio=s.loss_ratio,
        bandwidth_mbps=s.bandwidth_mbps or 0.0,
        status=STATUSES[s.status],
        reason=s.reason,
        last_probe_at=at,
        rounds=s.rounds,
    )


def query_of(request: pb.ResolveRequest) -> ResolveQuery:
    if request.kind not in KINDS:
        raise InvalidArgument(f"kind: unknown workload kind {request.kind}")
    return ResolveQuery(
        kind=KINDS[request.kind],
        from_region=request.from_region,
        max_rtt_ms=request.max_rtt_ms,
        min_bandwidth_gbps=request.min_bandwidth_gbps,
        gpu_models=tuple(request.gpu_models),
        cu=request.cu,
        max_price_per_hour=request.max_price_per_hour,
        limit=request.limit,
        tenant=request.tenant,
        explain=request.explain,
    )


def replica_message(c: Considered) -> pb.ReplicaEndpoint:
    return pb.ReplicaEndpoint(
        replica_id=c.load.replica_id,
        address=c.load.address,
        region=c.load.region,
        in_flight=c.load.in_flight,
        queued=c.load.queued,
        expected_latency_s=c.expected_s or 0.0,
        rtt_ms=c.rtt_ms if c.rtt_ms is not None and c.rtt_ms < float("inf") else 0.0,
    )


class RoutingServicer(pb_grpc.RoutingServicer):
    def __init__(
        self, router: Router, network: NetworkState, metrics: ResolveMetrics, replicas: ReplicaResolver
    ) -> None:
        self.router = router
        self.network = network
        self.replicas = replicas
        self.metrics = metrics
        self.answers = AnswerWriter()

    async def Resolve(self, request: pb.ResolveRequest, context: grpc.aio.ServicerContext) -> bytes:
        """The answer as `ResolveResponse` wire bytes (the handler is registered without a serializer)."""
        started = time.perf_counter()
        kind, outcome = KINDS.get(request.kind, "unknown"), "invalid"
        try:
            resolution = self.router.resolve(query_of(request))
            outcome = "routed" if resolution.candidates else "none"
            return self.answers.resolve_response(resolution, self.router.currency)
        except RequestError:
            # The mapping to a status on the error path only: the answered path stays lean.
            async with rpc_errors(context):
                raise
            raise  # rpc_errors aborts the call; not reached
        finally:
            self.metrics.resolved(kind, outcome, time.perf_counter() - started)

    async def ResolveReplica(
        self, request: pb.ResolveReplicaRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResolveReplicaResponse:
        async with rpc_errors(context):
            found = self.replicas.resolve(
                ReplicaQuery(
                    service_id=request.service_id,
                    client_region=request.client_region,
                    policy=request.policy,
                    context_tokens=request.context_tokens,
                    generated_tokens=request.generated_tokens,
                    exclude=tuple(request.exclude),
                )
            )
            c = found.choice
            return pb.ResolveReplicaResponse(
                replica=replica_message(found.chosen),
                policy=c.policy,
                reason=c.reason,
                expected_latency_s=c.expected_s or 0.0,
                home_region=c.home_region or "",
                spilled=c.spilled,
                alternatives=[replica_message(a) for a in found.alternatives],
            )

    async def GetNetwork(
        self, request: pb.GetNetworkRequest, context: grpc.aio.ServicerContext
    ) -> pb.NetworkMatrix:
        async with rpc_errors(context):
            return pb.NetworkMatrix(
                regions=sorted(self.network.regions()),
                region_links=[link_message(s) for s in self.network.region_links()],
                site_links=[link_message(s) for s in self.network.site_links()] if request.sites else [],
            )

    async def WatchNetwork(
        self, request: pb.WatchNetworkRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.LinkUpdate]:
        def wanted(s: LinkState) -> bool:
            return request.sites or s.scope != SITE

        async with rpc_errors(context):
            with self.network.watch() as changes:
                if request.initial:
                    for state in [*self.network.region_links(), *self.network.site_links()]:
                        if wanted(state):
                            yield pb.LinkUpdate(link=link_message(state))
                while True:
                    change = await changes.get()
                    if change is None:
                        raise ResourceExhausted("the watcher fell too far behind; watch again")
                    if wanted(change):
                        yield pb.LinkUpdate(link=link_message(change))


def add_routing(servicer: RoutingServicer, server: grpc.aio.Server) -> None:
    """The generated registration, except that Resolve's answer is already bytes (no serializer)."""
    handlers = {
        "Resolve": grpc.unary_unary_rpc_method_handler(
            servicer.Resolve, request_deserializer=pb.ResolveRequest.FromString
        ),
        "ResolveReplica": grpc.unary_unary_rpc_method_handler(
            servicer.ResolveReplica,
            request_deserializer=pb.ResolveReplicaRequest.FromString,
            response_serializer=pb.ResolveReplicaResponse.SerializeToString,
        ),
        "GetNetwork": grpc.unary_unary_rpc_method_handler(
            servicer.GetNetwork,
            request_deserializer=pb.GetNetworkRequest.FromString,
            response_serializer=pb.NetworkMatrix.SerializeToString,
        ),
        "WatchNetwork": grpc.unary_stream_rpc_method_handler(
            servicer.WatchNetwork,
            request_deserializer=pb.WatchNetworkRequest.FromString,
            response_serializer=pb.LinkUpdate.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    server.add_registered_method_handlers(SERVICE_NAME, handlers)


async def start_server(
    servicer: RoutingServicer,
    listen: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: TlsSettings | None = None,
) -> tuple[grpc.aio.Server, int, health.HealthServicer]:
    """Serve on `listen` (host:port; port 0 picks one); NOT_SERVING until `serving` is called.

    `interceptors`: the kernel's `AuthInterceptor` when authentication is on (docs/security.md); `tls`: the
    service's TLS settings (`suanli.auth.tls`; None or unset: plaintext).
    """
    server = grpc.aio.server(interceptors=interceptors)
    add_routing(servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    reflection.enable_server_reflection(
        (pb.DESCRIPTOR.services_by_name["Routing"].full_name, health.SERVICE_NAME, reflection.SERVICE_NAME),
        server,
    )
    port = add_port(server, listen, tls)
    await server.start()
    return server, port, health_servicer


def serving(health_servicer: health.HealthServicer) -> None:
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
