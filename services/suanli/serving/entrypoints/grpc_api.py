"""The `suanli.serving.v1.Serving` gRPC service, with health and reflection."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from suanli import rpc
from suanli.api.serving.v1 import serving_pb2 as pb
from suanli.api.serving.v1 import serving_pb2_grpc as pb_grpc
from suanli.auth import context as auth_context
from suanli.auth.principal import tenant_of_queue
from suanli.auth.tls import TlsSettings
from suanli.contracts.load import LoadView, ReplicaLoad
from suanli.errors import PermissionDenied
from suanli.rpc import rpc_errors
from suanli.serving.domain.service import Service, ServiceState
from suanli.serving.service_layer.errors import InvalidField, ServiceNotFound
from suanli.serving.service_layer.ports import ExplainedDecision, ServingQueries, StoredService, UnitOfWork
from suanli.serving.service_layer.serving import ServingService, parse_document

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Serving"].full_name
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
MAX_SPEC_BYTES = 256 * 1024
DEFAULT_DECISIONS = 20
MAX_DECISIONS = 1000


class ServingApi(pb_grpc.ServingServicer):
    """Each RPC validates its request, runs one read or use case, and answers.

    The interceptor has checked the caller's role and that the tenant the request names (the queue's
    first segment, or `tenant`) is the caller's, filling an empty `tenant` with it; refusals are raised
    as `suanli.errors` kinds and turned into their status by `rpc_errors`.
    """

    def __init__(
        self,
        queries: ServingQueries,
        uow: UnitOfWork,
        service: ServingService,
        watch_poll_s: float,
        loads: LoadView,
        now: Callable[[], datetime],
    ) -> None:
        self._queries = queries
        self._uow = uow
        self._service = service
        self._poll_s = watch_poll_s
        self._loads = loads
        self._now = now

    async def CreateService(
        self, request: pb.CreateServiceRequest, context: grpc.aio.ServicerContext
    ) -> pb.Service:
        async with rpc_errors(context):
            if not request.spec.strip():
                raise InvalidField("spec", "is required (the service spec, YAML or JSON)")
            if len(request.spec.encode()) > MAX_SPEC_BYTES:
                raise InvalidField("spec", f"is over {MAX_SPEC_BYTES} bytes")
            document = parse_document(request.spec)
            queue = request.queue.strip() or str(document.get("queue") or "").strip()
            _may_use(queue)
            async with self._uow.begin() as unit:
                created = await self._service.create(unit, queue, document, request.replicas, _principal())
            return await self._answer(created.tenant, created.name)

    async def GetService(
        self, request: pb.GetServiceRequest, context: grpc.aio.ServicerContext
    ) -> pb.Service:
        async with rpc_errors(context):
            tenant, name = _named(request.tenant, request.name)
            return await self._answer(tenant, name)

    async def ListServices(
        self, request: pb.ListServicesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListServicesResponse:
        async with rpc_errors(context):
            if not 0 <= request.page_size <= MAX_PAGE_SIZE:
                raise InvalidField("page_size", f"must be 0..{MAX_PAGE_SIZE}, got {request.page_size}")
            page = await self._queries.page(
                request.tenant.strip() or None,
                _page_after(request.page_token),
                request.page_size or DEFAULT_PAGE_SIZE,
            )
            token = "" if page.next_after is None else _page_token(page.next_after)
            return pb.ListServicesResponse(
                services=[self._message(s) for s in page.services], next_page_token=token
            )

    async def ScaleService(
        self, request: pb.ScaleServiceRequest, context: grpc.aio.ServicerContext
    ) -> pb.Service:
        async with rpc_errors(context):
            tenant, name = _named(request.tenant, request.name)
            async with self._uow.begin() as unit:
                await self._service.scale(unit, tenant, name, request.replicas, _principal())
            return await self._answer(tenant, name)

    async def DeleteService(
        self, request: pb.DeleteServiceRequest, context: grpc.aio.ServicerContext
    ) -> pb.Service:
        async with rpc_errors(context):
            tenant, name = _named(request.tenant, request.name)
            async with self._uow.begin() as unit:
                await self._service.delete(unit, tenant, name, _principal())
            return await self._answer(tenant, name)

    async def WatchService(
        self, request: pb.WatchServiceRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServiceUpdate]:
        # The whole stream: a database outage while following answers UNAVAILABLE, as a plain call does.
        async with rpc_errors(context):
            tenant, name = _named(request.tenant, request.name)
            stored = await self._stored(tenant, name)
            # The service's id: a service of the same name created after this one was deleted is another.
            service_id, version = stored.service.service_id, stored.service.version
            yield pb.ServiceUpdate(event="Current", service=self._message(stored))
            while not _finished(stored.service):
                await asyncio.sleep(self._poll_s)
                found = await self._queries.get(tenant, name)
                if found is not None and found.service.service_id != service_id:
                    return  # deleted, and its name used again
                if found is None or found.service.version == version:
                    continue
                stored, version = found, found.service.version
                yield pb.ServiceUpdate(event=_last_event(stored), service=self._message(stored))

    async def ExplainService(
        self, request: pb.ExplainServiceRequest, context: grpc.aio.ServicerContext
    ) -> pb.ExplainServiceResponse:
        async with rpc_errors(context):
            tenant, name = _named(request.tenant, request.name)
            if not 0 <= request.limit <= MAX_DECISIONS:
                raise InvalidField("limit", f"must be 0..{MAX_DECISIONS}, got {request.limit}")
            service = (await self._stored(tenant, name)).service
            kept = await self._queries.decisions(service.service_id, request.limit or DEFAULT_DECISIONS)
            return pb.ExplainServiceResponse(
                service_id=service.service_id,
                tenant=service.tenant,
                name=service.name,
                policy=service.spec.autoscaling.policy,
                desired_replicas=service.desired,
                decisions=[_decision(entry) for entry in kept],
            )

    async def _stored(self, tenant: str, name: str) -> StoredService:
        stored = await self._queries.get(tenant, name)
        if stored is None:
            raise ServiceNotFound(tenant, name)
        return stored

    async def _answer(self, tenant: str, name: str) -> pb.Service:
        return self._message(await self._stored(tenant, name))

    def _message(self, stored: StoredService) -> pb.Service:
        return _service(stored, self._loads.of(stored.service.service_id, self._now()))


def _finished(service: Service) -> bool:
    return service.state is ServiceState.DELETED and not service.replicas


def _last_event(stored: StoredService) -> str:
    # The read side keeps states, not events: the version tells that it changed, the state how.
    return "Deleted" if stored.service.state is ServiceState.DELETED else "Changed"


def _may_use(queue: str) -> None:
    """The interceptor checked the request's queue; a queue taken from the spec is checked here alike."""
    principal = auth_context.current()
    tenant = tenant_of_queue(queue)
    if queue and principal is not None and not principal.sees(tenant):
        mine = principal.tenant or "(none)"
        raise PermissionDenied(
            f"queue {queue!r} belongs to tenant {tenant!r}: this token is for tenant {mine!r}"
        )


def _principal() -> str:
    principal = auth_context.current()
    return "" if principal is None else principal.label


def _named(tenant: str, name: str) -> tuple[str, str]:
    if not tenant.strip():
        raise InvalidField("tenant", "is required (a platform-wide caller names the service's tenant)")
    if not name.strip():
        raise InvalidField("name", "is required")
    return tenant.strip(), name.strip()


def _page_token(after: str) -> str:
    return base64.urlsafe_b64encode(f"svc:{after}".encode()).decode()


def _page_after(token: str) -> str:
    if not token:
        return ""
    try:
        kind, _, value = base64.urlsafe_b64decode(token.encode()).decode().partition(":")
        if kind != "svc":
            raise ValueError(kind)
        return value
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidField("page_token", "not a token from ListServices") from None


def _ts(at: datetime) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(at)
    return stamp


def _service(stored: StoredService, loads: dict[str, ReplicaLoad]) -> pb.Service:
    s = stored.service
    return pb.Service(
        service_id=s.service_id,
        tenant=s.tenant,
        queue=s.queue,
        name=s.name,
        model=s.spec.model,
        state=s.state.value,
        desired_replicas=s.desired,
        min_replicas=s.spec.min_replicas,
        max_replicas=s.spec.max_replicas,
        placed_replicas=s.ready,
        replicas=[
            pb.Replica(
                replica_id=r.replica_id,
                state=r.state.value,
                job_id=r.job_id,
                guaranteed=r.guaranteed,
                pinned_region=r.region,
                node_id=r.node_id,
                region=r.placed_region,
                site=r.site,
                attempt=r.attempt,
                load=_load(loads.get(r.replica_id)),
            )
            for r in sorted(s.replicas.values(), key=lambda r: r.seq)
        ],
        spec=json.dumps(s.document, sort_keys=True),
        created_at=_ts(stored.created_at),
        updated_at=_ts(stored.updated_at),
    )


def _decision(entry: ExplainedDecision) -> pb.ScaleDecision:
    d, seen = entry.decision, entry.decision.inputs
    return pb.ScaleDecision(
        decided_at=_ts(entry.decided_at),
        autoscaler=d.autoscaler,
        from_replicas=entry.from_replicas,
        to_replicas=d.desired,
        changed=entry.changed,
        reason=d.reason,
        inputs=pb.ScalerInputs(
            ready=seen.ready,
            starting=seen.starting,
            concurrency=seen.concurrency,
            queued=seen.queued,
            arrivals=seen.arrivals,
            interval_s=seen.interval_s,
            mean_context=seen.mean_context,
            mean_generated=seen.mean_generated,
        ),
        model=[pb.ModelFigure(name=name, value=value) for name, value in d.model],
        current=d.current,
    )


def _load(load: ReplicaLoad | None) -> pb.ReplicaLoad | None:
    if load is None:
        return None
    return pb.ReplicaLoad(
        in_flight=load.in_flight,
        queued=load.queued,
        recent_latency_s=load.recent_latency_s,
        prefill_backlog_s=load.prefill_backlog_s,
        kv_free_tokens=load.kv_free_tokens,
        address=load.address,
        reported_at=_ts(load.reported_at),
    )


async def start_server(
    api: ServingApi,
    address: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: TlsSettings | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Serve Serving, health and reflection on `address` (port 0 picks one); returns the bound port."""
    add: Callable[[ServingApi, grpc.aio.Server], None] = pb_grpc.add_ServingServicer_to_server
    # The generated function is untyped; `add` says what it takes.
    return await rpc.start_server(lambda server: add(api, server), SERVICE_NAME, address, interceptors, tls)
