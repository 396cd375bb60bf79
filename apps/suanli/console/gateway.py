"""What the console asks the services, over grpc.aio channels that carry the console's token.

The console is one more client of the public APIs: it sees exactly what its token may see
(libs/suanli/auth's POLICY), and asks nothing the CLI could not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.billing.v1 import billing_pb2_grpc as bpb_grpc
from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.routing.v1 import routing_pb2_grpc as rpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.api.serving.v1 import serving_pb2 as spb
from suanli.api.serving.v1 import serving_pb2_grpc as spb_grpc
from suanli.auth.principal import tenant_of_queue
from suanli.cli.client import UNARY_TIMEOUT_S
from suanli.cli.config import aio_bearer_channel
from suanli.console.views import TenantUsage

PAGE_SIZE = 500
SERVING_NOT_CONFIGURED = "not configured (no serving address in this console's context: --serving)"
T = TypeVar("T")
# The jobs page and the counts on the overview show the newest jobs; older ones are a click away in
# the CLI (`suanli job list`), and a page of thousands of rows helps no one.
JOBS_SHOWN = 200


@dataclass(frozen=True)
class Targets:
    """Where the services are; an empty address: that service is not part of this platform."""

    scheduler: str
    billing: str = ""
    routing: str = ""
    serving: str = ""


class Unavailable(Exception):
    """A service did not answer (or refused): the page shows the message in place of the answer."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code

    @property
    def not_found(self) -> bool:
        return self.code is grpc.StatusCode.NOT_FOUND

    @property
    def unauthenticated(self) -> bool:
        return self.code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


def _described(error: grpc.RpcError, service: str) -> Unavailable:
    code = error.code()
    details = (error.details() or "").strip()
    return Unavailable(f"{service}: {code.name}" + (f" ({details})" if details else ""), code)


async def _every_page(fetch: Callable[[str], Awaitable[tuple[Sequence[T], str]]], service: str) -> list[T]:
    """Every item of a paged list: ``fetch(page_token)`` answers (items, next page token)."""
    found: list[T] = []
    token = ""
    try:
        while True:
            items, token = await fetch(token)
            found.extend(items)
            if not token:
                return found
    except grpc.RpcError as exc:
        raise _described(exc, service) from None


class Gateway:
    """The console's channels to the scheduler, billing, routing and serving."""

    def __init__(
        self, targets: Targets, token: str, ca_pem: bytes | None, page_size: int = PAGE_SIZE
    ) -> None:
        self.targets = targets
        self._ca = ca_pem
        self._page_size = page_size
        self._channels: list[grpc.aio.Channel] = []
        self.scheduler = pb_grpc.SchedulerStub(self._channel(targets.scheduler, token))
        self.billing = (
            bpb_grpc.BillingStub(self._channel(targets.billing, token)) if targets.billing else None
        )
        self.routing = (
            rpb_grpc.RoutingStub(self._channel(targets.routing, token)) if targets.routing else None
        )
        self.serving = (
            spb_grpc.ServingStub(self._channel(targets.serving, token)) if targets.serving else None
        )

    def _channel(self, address: str, token: str) -> grpc.aio.Channel:
        channel = aio_bearer_channel(address, token, self._ca)
        self._channels.append(channel)
        return channel

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()

    async def check_token(self, token: str) -> None:
        """Raise Unavailable unless the scheduler accepts ``token``: a cheap authenticated call on a
        channel of its own (ListPriorityClasses is open to every reader and reads no tenant's data)."""
        async with aio_bearer_channel(self.targets.scheduler, token, self._ca) as channel:
            try:
                await pb_grpc.SchedulerStub(channel).ListPriorityClasses(
                    pb.ListPriorityClassesRequest(), timeout=UNARY_TIMEOUT_S
                )
            except grpc.RpcError as exc:
                raise _described(exc, "scheduling") from None

    async def nodes(self) -> list[pb.Node]:
        async def page(token: str) -> tuple[Sequence[pb.Node], str]:
            request = pb.ListNodesRequest(page_size=self._page_size, page_token=token)
            answer = await self.scheduler.ListNodes(request, timeout=UNARY_TIMEOUT_S)
            return answer.nodes, answer.next_page_token

        return await _every_page(page, "scheduling")

    async def queues(self) -> list[pb.Queue]:
        async def page(token: str) -> tuple[Sequence[pb.Queue], str]:
            request = pb.ListQueuesRequest(page_size=self._page_size, page_token=token)
            answer = await self.scheduler.ListQueues(request, timeout=UNARY_TIMEOUT_S)
            return answer.queues, answer.next_page_token

        return await _every_page(page, "scheduling")

    async def jobs(
        self, state: pb.JobState = pb.JOB_STATE_UNSPECIFIED, limit: int = JOBS_SHOWN
    ) -> list[pb.Job]:
        """The newest ``limit`` jobs (in ``state``, when given), newest first."""
        found: list[pb.Job] = []
        token = ""
        try:
            while len(found) < limit:
                request = pb.ListJobsRequest(
                    state=state,
                    page_size=min(self._page_size, limit - len(found)),
                    page_token=token,
                    newest_first=True,
                )
                page = await self.scheduler.ListJobs(request, timeout=UNARY_TIMEOUT_S)
                found.extend(page.jobs)
                token = page.next_page_token
                if not token:
                    break
        except grpc.RpcError as exc:
            raise _described(exc, "scheduling") from None
        return found

    async def describe(self, job_id: str) -> pb.JobDescription:
        """The job with its whole recorded history (events, attempts, accounting)."""
        try:
            return await self.scheduler.DescribeJob(
                pb.DescribeJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            raise _described(exc, "scheduling") from None

    async def explain(self, job_id: str) -> pb.Explanation:
        try:
            return await self.scheduler.ExplainJob(
                pb.ExplainJobRequest(job_id=job_id), timeout=UNARY_TIMEOUT_S
            )
        except grpc.RpcError as exc:
            raise _described(exc, "scheduling") from None

    async def network(self) -> rpb.NetworkMatrix:
        if self.routing is None:
            raise Unavailable("routing: no routing service in this console's context")
        try:
            return await self.routing.GetNetwork(rpb.GetNetworkRequest(), timeout=UNARY_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise _described(exc, "routing") from None

    async def usage(self, tenants: Sequence[str]) -> list[TenantUsage]:
        """Each tenant's usage in the current billing period."""
        if self.billing is None:
            raise Unavailable("billing: no billing service in this console's context")
        billing = self.billing

        async def one(tenant: str) -> TenantUsage:
            try:
                answer = await billing.GetUsage(bpb.GetUsageRequest(tenant=tenant), timeout=UNARY_TIMEOUT_S)
            except grpc.RpcError as exc:
                if exc.code() is grpc.StatusCode.NOT_FOUND:
                    return TenantUsage(tenant, None, "no usage billed yet")
                raise _described(exc, "billing") from None
            return TenantUsage(tenant, answer)

        return list(await asyncio.gather(*(one(t) for t in tenants)))

    async def services(self) -> list[spb.Service]:
        """Every tenant's inference services (ListServices carries each replica's load, as GetService)."""
        if self.serving is None:
            raise Unavailable(f"serving: {SERVING_NOT_CONFIGURED}")
        serving = self.serving

        async def page(token: str) -> tuple[Sequence[spb.Service], str]:
            request = spb.ListServicesRequest(page_size=self._page_size, page_token=token)
            answer = await serving.ListServices(request, timeout=UNARY_TIMEOUT_S)
            return answer.services, answer.next_page_token

        return await _every_page(page, "serving")


def tenants(queues: Sequence[pb.Queue]) -> list[str]:
    """The tenants of the platform: the roots of the queue tree (acme of acme/vision)."""
    return sorted({tenant_of_queue(q.name) for q in queues})
