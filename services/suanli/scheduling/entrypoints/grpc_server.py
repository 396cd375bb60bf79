"""The Scheduler gRPC API (grpc.aio), with health checking and reflection.

Reads are served from the projection by every instance; writes (SubmitJob, CancelJob and the queue
administration RPCs) only by the leader:
a standby answers UNAVAILABLE, so clients retry against the leader. The service's errors are kernel
request kinds, answered through the platform's one table (`suanli.rpc`): InvalidSpec -> INVALID_ARGUMENT
(message names the field; also a GPU model neither the device catalogue nor a node knows), unknown
job/queue -> NOT_FOUND, a reused request_id with another spec -> ALREADY_EXISTS, cancelling a finished job
or deleting a queue with child queues or live jobs -> FAILED_PRECONDITION, creating a queue that exists ->
ALREADY_EXISTS, a write to a standby -> UNAVAILABLE, a tenant over its submit rate or pending jobs, or too
many WatchJob streams -> RESOURCE_EXHAUSTED with retry advice (`service_layer.admission`).
With authentication on, the kernel's interceptor checks roles first; here each read keeps to the caller's
tenant (another tenant's job or queue answers NOT_FOUND, lists hold only the caller's; docs/security.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import grpc
from grpc_health.v1 import health
from grpc_reflection.v1alpha import reflection
from opentelemetry import trace

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.auth import context as auth_context
from suanli.auth.interceptor import AUTHORIZATION
from suanli.auth.principal import tenant_of_queue
from suanli.auth.tls import TlsSettings, add_port
from suanli.contracts import labels as node_labels
from suanli.errors import FailedPrecondition
from suanli.resources import DeviceCatalogue, default_catalogue
from suanli.rpc import add_health, rpc_errors
from suanli.scheduling.adapters.agent_logs import AgentLogClient
from suanli.scheduling.domain.jobs import Actor, JobView, Phase
from suanli.scheduling.domain.jobs.logs import LogTarget, locate
from suanli.scheduling.domain.model import Job
from suanli.scheduling.domain.queueing import NodeAvailability
from suanli.scheduling.entrypoints import convert, queue_validation
from suanli.scheduling.entrypoints.job_requests import JobRequests
from suanli.scheduling.service_layer.admission import Admission, AdmissionLimits
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import (
    CreateQueue,
    DefinePriorityClass,
    DeletePriorityClass,
    DeleteQueue,
    UpdateQueue,
)
from suanli.scheduling.service_layer.errors import InvalidSpec, JobNotFound, QueueNotFound
from suanli.scheduling.service_layer.history import StreamReader, job_history
from suanli.scheduling.service_layer.job_commands import JobCommands
from suanli.scheduling.service_layer.job_index import Page
from suanli.scheduling.service_layer.projection import Change, Projection
from suanli.scheduling.service_layer.start_estimates import StartEstimates

SERVICE_NAME = "suanli.scheduler.v1.Scheduler"
JOB_STATE_NAMES = {v: k for k, v in convert.STATES.items()}
# A follower waiting for its attempt to start looks again at least this often (and at each change).
LOG_WAIT_POLL_S = 1.0
Explainer = Callable[[tuple[NodeAvailability, ...], Job], Any]


class SchedulerServicer(pb_grpc.SchedulerServicer):
    def __init__(
        self,
        commands: JobCommands,
        projection: Projection,
        capacity: CapacityView,
        explainer: Explainer,
        admission: Admission | None = None,
        catalogue: DeviceCatalogue | None = None,
        *,
        history: StreamReader,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        agent_logs: AgentLogClient | None = None,
    ) -> None:
        self.commands = commands
        self.projection = projection
        self.capacity = capacity
        self.explainer = explainer
        self.admission = admission or Admission(AdmissionLimits(), time.monotonic)
        self.catalogue = catalogue or default_catalogue()
        self.history = history  # the event store DescribeJob reads a job's stream from
        self.now = now
        self.agent_logs = agent_logs or AgentLogClient()  # StreamJobLogs' way to the nodes' agents
        self._estimates_at: tuple[datetime, StartEstimates] | None = None
        # Shared with the command topic's consumer (docs/commands.md): one validation and admission.
        self.requests = JobRequests(
            commands, projection, capacity, self.admission, self.catalogue, archive=history
        )

    # -- helpers ---------------------------------------------------------------------------------------

    async def _job(self, job_id: str) -> JobView:
        # Another tenant's job is answered like a missing one, so ids cannot be probed (docs/security.md);
        # a job evicted from the projection past the retention is folded from its stream.
        return await self.requests.job(job_id, auth_context.sees)

    def _message(self, job: JobView, estimates: StartEstimates | None = None) -> pb.Job:
        out = convert.job_message(job, self.projection.pending_reasons.get(job.id))
        if job.waiting:
            estimates = estimates or self._estimates((job,))
            convert.start_estimate(out, estimates.of(job))
        return out

    def _estimates(self, jobs: Sequence[JobView]) -> StartEstimates:
        """Queue estimates, replayed again once the last replay is older than a second, or than ten
        times what it cost, whichever is longer: reads that poll (a dashboard, a `--watch`) then spend
        at most a tenth of the event loop on estimates however deep the queues. A read after a job was
        submitted gets a replay at once (the new job, or one ahead of those asked about, is in no replay
        yet): replays follow reads, never submissions."""
        now = self.now()
        cached = self._estimates_at
        if cached is not None:
            at, estimates = cached
            if (
                (now - at).total_seconds() < max(1.0, 10 * estimates.spent_s)
                and not estimates.submitted_since()
                and all(estimates.covers(j) for j in jobs if j.waiting)
            ):
                return estimates
        estimates = StartEstimates(self.projection, self.capacity, now)
        self._estimates_at = (now, estimates)
        return estimates

    def _jobs_page(self, queue: str, size: int, last: int | None, newest: bool, phase: Phase | None) -> Page:
        """One ListJobs page from the projection's index, read only within the caller's scope: the
        queue asked for, else the caller's tenant, else (a platform-wide caller) every job."""
        principal = auth_context.current()
        tenant = None if principal is None or principal.platform_wide else principal.tenant
        if queue and not auth_context.sees(tenant_of_queue(queue)):
            return Page([], False)
        return self.projection.index.page(
            size,
            queue=queue,
            tenant=tenant,
            after=last,
            newest_first=newest,
            keep=None if phase is None else (lambda j: j.phase is phase),
        )

    # -- RPCs ----------------------------------------------------------------------------------------

    async def SubmitJob(
        self, request: pb.SubmitJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubmitJobResponse:
        async with rpc_errors(context):
            job = await self.requests.submit(request, _actor(), auth_context.sees)
            trace.get_current_span().set_attributes({"job_id": job.id, "queue": job.spec.queue})
            # Without a queue position or start estimate: a job just submitted is in no replay yet, so
            # each answer replayed its whole queue (a tenth of the scheduler's CPU at 50 submissions/s
            # in bench/latency.py), for a figure the next cycle makes stale. GetJob answers it.
            return pb.SubmitJobResponse(
                job=convert.job_message(job, self.projection.pending_reasons.get(job.id))
            )

    async def GetJob(self, request: pb.GetJobRequest, context: grpc.aio.ServicerContext) -> pb.Job:
        async with rpc_errors(context):
            return self._message(await self._job(request.job_id))

    async def ListJobs(
        self, request: pb.ListJobsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobsResponse:
        async with rpc_errors(context):
            if request.state not in JOB_STATE_NAMES and request.state != pb.JOB_STATE_UNSPECIFIED:
                raise InvalidSpec("state", f"unknown state {request.state}")
            size = convert.page_size(request.page_size)
            newest = request.newest_first
            filters: dict[str, Any] = {"queue": request.queue, "state": int(request.state)}
            if newest:  # only when set, so tokens issued before the field existed still decode
                filters["newest_first"] = True
            # The token holds the last seq served: the next page continues past it in the order asked.
            last = convert.decode_token(request.page_token, filters)
            if last is not None and (isinstance(last, bool) or not isinstance(last, int)):
                raise InvalidSpec("page_token", "is not a token this server issued")
            phase = JOB_STATE_NAMES.get(request.state)
            found = self._jobs_page(request.queue, size, last, newest, phase)
            page = found.jobs
            token = convert.encode_token(filters, page[-1].seq) if found.more else ""
            estimates = self._estimates(page)  # each queue replayed once for the page
            return pb.ListJobsResponse(
                jobs=[self._message(j, estimates) for j in page], next_page_token=token
            )

    async def CancelJob(self, request: pb.CancelJobRequest, context: grpc.aio.ServicerContext) -> pb.Job:
        async with rpc_errors(context):
            # Who asked: the token's principal when authentication is on, else the peer address.
            peer = context.peer() if hasattr(context, "peer") else ""
            who = auth_context.label() or peer or ""
            job = await self.requests.cancel(request.job_id, request.reason, who, _actor(), auth_context.sees)
            return self._message(job)

    async def WatchJob(
        self, request: pb.WatchJobRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.JobEvent]:
        async with rpc_errors(context):
            job = await self._job(request.job_id)
            self.admission.open_watch()
        queue = self.projection.watch(job.id)
        try:
            job = self.projection.jobs.get(job.id, job)  # an evicted job: final, the one event
            yield _event(Change(job, "Current", at=job.updated_at), job.message)
            last = job.version
            while not job.phase.final:
                change = await queue.get()
                if change.job.version <= last:
                    continue
                last, job = change.job.version, change.job
                yield _event(change, change.job.message)
        finally:
            self.projection.unwatch(request.job_id, queue)
            self.admission.close_watch()

    async def ListNodes(
        self, request: pb.ListNodesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListNodesResponse:
        async with rpc_errors(context):
            size = convert.page_size(request.page_size)
            filters = {"region": request.region}
            after = convert.decode_token(request.page_token, filters) or ""
            views = sorted(
                (
                    v
                    for v in self.capacity.nodes.values()
                    if v.id > after and (not request.region or v.region == request.region)
                ),
                key=lambda v: v.id,
            )
            page = views[:size]
            usage = convert.node_usage(self.projection)
            token = convert.encode_token(filters, page[-1].id) if len(views) > size else ""
            return pb.ListNodesResponse(
                nodes=[convert.node_message(v, usage) for v in page], next_page_token=token
            )

    async def ListQueues(
        self, request: pb.ListQueuesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListQueuesResponse:
        async with rpc_errors(context):
            size = convert.page_size(request.page_size, default=convert.MAX_PAGE_SIZE)
            after = convert.decode_token(request.page_token, {}) or ""
            if not isinstance(after, str):
                raise InvalidSpec("page_token", "is not a token this server issued")
            names = sorted(
                name
                for name in self.projection.queues
                if name > after and auth_context.sees(tenant_of_queue(name))
            )
            specs = [self.projection.queues[name] for name in names[:size]]
            token = convert.encode_token({}, specs[-1].name) if len(names) > size else ""
            queues = convert.queue_messages(specs, self.projection, self._models())
            return pb.ListQueuesResponse(queues=queues, next_page_token=token)

    async def GetQueue(self, request: pb.GetQueueRequest, context: grpc.aio.ServicerContext) -> pb.Queue:
        async with rpc_errors(context):
            if not request.name:
                raise InvalidSpec("name", "is required")
            spec = self.projection.queues.get(request.name)
            if spec is None or not auth_context.sees(tenant_of_queue(spec.name)):
                raise QueueNotFound(request.name)
            return convert.queue_message(spec, self.projection, self._models())

    # -- queue administration (platform admins: the interceptor's policy) ---------------------------

    async def CreateQueue(
        self, request: pb.CreateQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.Queue:
        async with rpc_errors(context):
            spec = queue_validation.queue_spec(request.queue, request.HasField("queue"))
            request_id = queue_validation.request_id(request.request_id)
            created = await self.commands.handle(CreateQueue(spec, request_id, _actor()))
            return convert.queue_message(created, self.projection, self._models())

    async def UpdateQueue(
        self, request: pb.UpdateQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.Queue:
        async with rpc_errors(context):
            spec = queue_validation.queue_spec(request.queue, request.HasField("queue"))
            request_id = queue_validation.request_id(request.request_id)
            updated = await self.commands.handle(UpdateQueue(spec, request_id, _actor()))
            return convert.queue_message(updated, self.projection, self._models())

    async def DeleteQueue(
        self, request: pb.DeleteQueueRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteQueueResponse:
        async with rpc_errors(context):
            name = queue_validation.queue_name(request.name)
            request_id = queue_validation.request_id(request.request_id)
            return pb.DeleteQueueResponse(
                name=await self.commands.handle(DeleteQueue(name, request_id, _actor()))
            )

    async def ListPriorityClasses(
        self, request: pb.ListPriorityClassesRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPriorityClassesResponse:
        # Platform-wide configuration (like the node list): every caller sees the same classes.
        return pb.ListPriorityClassesResponse(
            priority_classes=[
                pb.PriorityClass(name=c.name, value=c.value)
                for c in sorted(self.projection.priority_classes, key=lambda c: (-c.value, c.name))
            ]
        )

    async def DefinePriorityClass(
        self, request: pb.DefinePriorityClassRequest, context: grpc.aio.ServicerContext
    ) -> pb.PriorityClass:
        async with rpc_errors(context):
            wanted = queue_validation.priority_class(
                request.priority_class, request.HasField("priority_class")
            )
            request_id = queue_validation.request_id(request.request_id)
            defined = await self.commands.handle(
                DefinePriorityClass(wanted.name, wanted.value, request_id, _actor())
            )
            return pb.PriorityClass(name=defined.name, value=defined.value)

    async def DeletePriorityClass(
        self, request: pb.DeletePriorityClassRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeletePriorityClassResponse:
        async with rpc_errors(context):
            name = queue_validation.class_name(request.name)
            request_id = queue_validation.request_id(request.request_id)
            deleted = await self.commands.handle(DeletePriorityClass(name, request_id, _actor()))
            return pb.DeletePriorityClassResponse(name=deleted)

    async def ExplainJob(
        self, request: pb.ExplainJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.Explanation:
        async with rpc_errors(context):
            job = await self._job(request.job_id)
            reason = self.projection.pending_reasons.get(job.id) if job.phase is Phase.PENDING else None
            out = pb.Explanation(job_id=job.id, state=convert.STATES[job.phase])
            message = convert.pending_reason(reason)
            if message is not None:
                out.pending_reason.CopyFrom(message)
            out.regions.extend(convert.region_verdicts(reason))
            if job.phase.final:
                return out
            # The whole job: the ranking is the decision's, within the region (zone, ...) its gang gets.
            scores, rejected = self.explainer(self._free(exclude=job.id), job.spec.domain_job(job.id))
            out.top_nodes.extend(
                pb.NodeScore(node_id=s.node_id, score=s.score, plugin_scores=dict(s.plugin_scores))
                for s in scores
            )
            for name, count in (reason or {}).get("rejections") or rejected:
                out.rejected_by_filter[str(name)] = int(count)
            return out

    async def DescribeJob(
        self, request: pb.DescribeJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.JobDescription:
        async with rpc_errors(context):
            # The tenant check is the projection's (a job another tenant owns answers NOT_FOUND); the
            # history itself is read from the store, where earlier attempts and their causes are kept.
            job = await self._job(request.job_id)
            as_of = self.now()
            history = await job_history(self.history, job.id, as_of)
            if history is None:
                raise JobNotFound(job.id)
            out = convert.description_message(self._message(job), history, as_of)
            if out.job.HasField("queue_position"):
                out.queue_position, out.queue_waiting = out.job.queue_position, out.job.queue_waiting
            return out

    async def StreamJobLogs(
        self, request: pb.StreamJobLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.JobLogChunk]:
        async with rpc_errors(context):
            # The tenant check is the projection's, as for DescribeJob; the agent checks the token again.
            job = await self._job(request.job_id)
            if request.follow:  # may stay open as long as the task runs: counted like a WatchJob stream
                self.admission.open_watch()
        try:
            async for chunk in self._job_logs(job, request, context):
                yield chunk
        finally:
            if request.follow:
                self.admission.close_watch()

    async def _job_logs(
        self, job: JobView, request: pb.StreamJobLogsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.JobLogChunk]:
        async with rpc_errors(context):
            target = await self._log_target(job, request)
            endpoint = self._logs_endpoint(target.node_id)
            chunks = self.agent_logs.stream(
                target.node_id,
                endpoint,
                target.task_id,
                target.attempt,
                follow=request.follow and not target.ended,
                metadata=_forwarded(context),
            )
            async for data in chunks:
                yield pb.JobLogChunk(
                    task_id=target.task_id, attempt=target.attempt, node_id=target.node_id, data=data
                )

    async def _log_target(self, job: JobView, request: pb.StreamJobLogsRequest) -> LogTarget:
        """The started attempt the request means; a follower waits for one not started yet."""
        changes = self.projection.watch(job.id) if request.follow else None
        try:
            while True:
                history = await job_history(self.history, job.id, self.now())
                job = self.projection.jobs.get(job.id, job)
                attempts = history.attempts if history is not None else ()
                found = locate(job.id, job.spec.tasks, attempts, job.attempt, request.task, request.attempt)
                if isinstance(found, LogTarget):
                    return found
                if job.phase.final:
                    raise FailedPrecondition(
                        f"{found.why} and the job is {job.phase.value}: it has no output"
                    )
                if changes is None:
                    raise FailedPrecondition(f"{found.why}: no output yet (follow to wait for it)")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changes.get(), LOG_WAIT_POLL_S)
        finally:
            if changes is not None:
                self.projection.unwatch(job.id, changes)

    def _logs_endpoint(self, node_id: str) -> str:
        """Where the node's agent serves its task logs (its label), or why there is nowhere to ask."""
        view = self.capacity.nodes.get(node_id)
        if view is None:
            raise FailedPrecondition(f"node {node_id} is no longer known: its task logs cannot be reached")
        labels = dict(view.labels)
        if labels.get(node_labels.AGENT_MODE) == "simulated":
            raise FailedPrecondition(f"node {node_id} is simulated: its tasks write no logs")
        endpoint = labels.get(node_labels.LOGS_ENDPOINT)
        if not endpoint:
            raise FailedPrecondition(
                f"node {node_id} serves no task logs (its agent runs without --logs-listen)"
            )
        return endpoint

    def _models(self) -> dict[str, str]:
        return {v.id: v.devices[0].model for v in self.capacity.nodes.values() if v.devices}

    def _free(self, exclude: str) -> tuple[NodeAvailability, ...]:
        """Room left on each schedulable node, with `exclude`'s own tasks given back (so a placed job's
        node is among the candidates it is scored against)."""
        held: dict[str, list[Any]] = {}
        for job in self.projection.live.values():  # every job holding room is live
            if job.id != exclude:
                for t in job.active:
                    held.setdefault(t.node_id, []).append(t)
        out = []
        for node in self.capacity.schedulable():
            tasks = held.get(node.id, [])
            gpu = {d.index: 1000 for d in node.gpus}
            for t in tasks:
                for index, milli in zip(t.gpu_indices, t.gpu_milli, strict=True):
                    gpu[index] = gpu.get(index, 0) - milli
            out.append(
                NodeAvailability(
                    node,
                    node.cpu_milli - sum(t.spec.cpu_milli for t in tasks),
                    node.memory_mib - sum(t.spec.memory_mib for t in tasks),
                    tuple(gpu[d.index] for d in node.gpus),
                )
            )
        return tuple(out)


def _actor() -> Actor | None:
    """The caller of the RPC being served, as command events record it (None without authentication)."""
    principal = auth_context.current()
    return None if principal is None else Actor(principal.subject, principal.tenant, principal.token_id)


def _forwarded(context: grpc.aio.ServicerContext) -> list[tuple[str, str | bytes]]:
    """The caller's token, for the agent to check again (nothing without authentication)."""
    return [(k, v) for k, v in context.invocation_metadata() or () if k.lower() == AUTHORIZATION]


def _event(change: Change, message: str) -> pb.JobEvent:
    return pb.JobEvent(
        job_id=change.job.id,
        state=convert.STATES[change.job.phase],
        event=change.event,
        message=message,
        at=convert.timestamp(change.at),
        task_id=change.task_id,
        attempt=change.attempt,
    )


async def start_server(
    servicer: SchedulerServicer,
    listen: str,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    tls: TlsSettings | None = None,
) -> tuple[grpc.aio.Server, int, health.HealthServicer]:
    """Serve on `listen` (host:port; port 0 picks one); returns the server and the bound port.

    `interceptors`: the kernel's `AuthInterceptor` when authentication is on (docs/security.md); `tls`: the
    service's TLS settings (`suanli.auth.tls`; None or unset: plaintext).
    """
    server = grpc.aio.server(interceptors=interceptors)
    pb_grpc.add_SchedulerServicer_to_server(servicer, server)
    health_servicer: health.HealthServicer = add_health(server, SERVICE_NAME)
    reflection.enable_server_reflection(
        (pb.DESCRIPTOR.services_by_name["Scheduler"].full_name, health.SERVICE_NAME, reflection.SERVICE_NAME),
        server,
    )
    port = add_port(server, listen, tls)
    await server.start()
    return server, port, health_servicer
