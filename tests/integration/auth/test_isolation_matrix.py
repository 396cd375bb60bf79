"""The isolation matrix: every RPC of every service x every role x own/other tenant -> the expected status.

The expectation of each cell is computed from the one policy table (`suanli.auth.policy.POLICY`), and
each call goes to the real scheduling, billing, routing and serving gRPC servers (real broker and PostgreSQL).
So a change to the table changes the expectations and the servers must follow; a change to a server's
behaviour alone fails its cells. Also: the tables cover every RPC the protos define, and expired,
forged and revoked tokens are refused with UNAUTHENTICATED.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from scheduling.helpers import task_spec, until

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.billing.v1 import billing_pb2_grpc as bpb_grpc
from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.routing.v1 import routing_pb2_grpc as rpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as spb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as spb_grpc
from suanli.api.sensing.v1 import agent_logs_pb2 as apb
from suanli.api.sensing.v1 import agent_logs_pb2_grpc as apb_grpc
from suanli.api.serving.v1 import serving_pb2 as vpb
from suanli.api.serving.v1 import serving_pb2_grpc as vpb_grpc
from suanli.auth.policy import POLICY, TenantRule
from suanli.auth.principal import PLATFORM_WIDE, Role
from suanli.auth.tokens import Grant, load_private_key, sign

from .authkit import MATRIX_SERVICE, OTHER, OWN, REGION, Platform, bearer

OK = grpc.StatusCode.OK
PERIOD = "2025-01"  # ended long ago: ClosePeriod may close it
STREAM_WAIT_S = 1.0


@dataclass
class Target:
    """What a call is aimed at: a tenant, and one of its jobs."""

    tenant: str
    job_id: str


def expected(method: str, role: Role, own: bool) -> grpc.StatusCode:
    """The status a caller with ``role`` in tenant acme gets for ``method`` on its own or the other tenant."""
    rule = POLICY[method]
    if role not in rule.roles:
        return grpc.StatusCode.PERMISSION_DENIED
    if own or role in PLATFORM_WIDE or rule.tenant in (TenantRule.NONE, TenantRule.LIST):
        return OK
    return (
        grpc.StatusCode.PERMISSION_DENIED if rule.tenant is TenantRule.REQUEST else grpc.StatusCode.NOT_FOUND
    )


async def _submit(p: Platform, tenant: str, name: str) -> str:
    api = spb_grpc.SchedulerStub(p.channel(p.scheduler))
    request = spb.SubmitJobRequest(spec=spb.JobSpec(name=name, queue=tenant, tasks=[task_spec("w")]))
    answer = await api.SubmitJob(request, metadata=bearer(p.tokens[Role.PLATFORM_ADMIN]), timeout=10)
    return str(answer.job.id)


_FRESH = itertools.count()


def _queue(tenant: str) -> spb.QueueSpec:
    """A queue under ``tenant`` no other cell uses."""
    quota = spb.QuotaSpec(flavour="gpu:A100", guaranteed=1000)
    return spb.QueueSpec(name=f"{tenant}/matrix-{next(_FRESH)}", quotas=[quota])


async def _created(p: Platform, tenant: str) -> spb.QueueSpec:
    """A fresh queue, created as platform admin, for a cell to update or delete."""
    queue = _queue(tenant)
    api = spb_grpc.SchedulerStub(p.channel(p.scheduler))
    await api.CreateQueue(
        spb.CreateQueueRequest(queue=queue), metadata=bearer(p.tokens[Role.PLATFORM_ADMIN]), timeout=10
    )
    return queue


async def _defined(p: Platform) -> str:
    name = f"matrix-{next(_FRESH)}"
    api = spb_grpc.SchedulerStub(p.channel(p.scheduler))
    request = spb.DefinePriorityClassRequest(priority_class=spb.PriorityClass(name=name, value=1))
    await api.DefinePriorityClass(request, metadata=bearer(p.tokens[Role.PLATFORM_ADMIN]), timeout=10)
    return name


def _service_spec(tenant: str, name: str) -> str:
    """An inference service of ``tenant`` (docs/inference.md); each cell that creates one names its own."""
    return (
        f"{{name: {name}, queue: {tenant}, model: llama-2-7b, min_replicas: 1, max_replicas: 2,"
        " resources: {gpu: 0.5, gpu_models: [A100 80GB SXM]}, target: {concurrency: 4}}"
    )


async def _service(p: Platform, tenant: str, name: str) -> None:
    """A service, created as platform admin, for a cell to read, scale or delete."""
    api = vpb_grpc.ServingStub(p.channel(p.serving))
    request = vpb.CreateServiceRequest(spec=_service_spec(tenant, name))
    await api.CreateService(request, metadata=bearer(p.tokens[Role.PLATFORM_ADMIN]), timeout=10)


def _create_service(p: Platform, t: Target, md: Any) -> Any:
    spec = _service_spec(t.tenant, f"matrix-{next(_FRESH)}")
    api = vpb_grpc.ServingStub(p.channel(p.serving))
    return api.CreateService(vpb.CreateServiceRequest(spec=spec, queue=t.tenant), metadata=md, timeout=10)


async def _delete_service(p: Platform, t: Target, md: Any) -> Any:
    # Each cell deletes a fresh service, so an earlier cell's delete does not answer NOT_FOUND.
    name = f"matrix-{next(_FRESH)}"
    await _service(p, t.tenant, name)
    api = vpb_grpc.ServingStub(p.channel(p.serving))
    return await api.DeleteService(
        vpb.DeleteServiceRequest(tenant=t.tenant, name=name), metadata=md, timeout=10
    )


async def _first(call: Any) -> Any:
    """The first message of a stream, or None when the server accepted it but had nothing to say yet."""
    try:
        return await asyncio.wait_for(call.read(), STREAM_WAIT_S)
    except TimeoutError:
        return None
    finally:
        call.cancel()


Call = Callable[[Platform, Target, tuple[tuple[str, str], ...]], Awaitable[Any]]


def _calls() -> dict[str, Call]:
    S = "/suanli.scheduler.v1.Scheduler/"
    B = "/suanli.billing.v1.Billing/"
    R = "/suanli.routing.v1.Routing/"
    A = "/suanli.sensing.v1.AgentLogs/"
    V = "/suanli.serving.v1.Serving/"

    def s(p: Platform) -> spb_grpc.SchedulerStub:
        return spb_grpc.SchedulerStub(p.channel(p.scheduler))

    def b(p: Platform) -> bpb_grpc.BillingStub:
        return bpb_grpc.BillingStub(p.channel(p.billing))

    def r(p: Platform) -> rpb_grpc.RoutingStub:
        return rpb_grpc.RoutingStub(p.channel(p.routing))

    def v(p: Platform) -> vpb_grpc.ServingStub:
        return vpb_grpc.ServingStub(p.channel(p.serving))

    async def cancel(p: Platform, t: Target, md: Any) -> Any:
        # Each cell cancels a fresh job, so an earlier cell's cancel does not answer FAILED_PRECONDITION.
        job = await _submit(p, t.tenant, "to-cancel")
        return await s(p).CancelJob(
            spb.CancelJobRequest(job_id=job, reason="matrix"), metadata=md, timeout=10
        )

    async def update_queue(p: Platform, t: Target, md: Any) -> Any:
        queue = await _created(p, t.tenant)
        queue.cohort = "matrix"
        return await s(p).UpdateQueue(spb.UpdateQueueRequest(queue=queue), metadata=md, timeout=10)

    async def delete_queue(p: Platform, t: Target, md: Any) -> Any:
        queue = await _created(p, t.tenant)
        return await s(p).DeleteQueue(spb.DeleteQueueRequest(name=queue.name), metadata=md, timeout=10)

    def define_class(p: Platform, t: Target, md: Any) -> Any:
        wanted = spb.PriorityClass(name=f"matrix-{next(_FRESH)}", value=5)
        return s(p).DefinePriorityClass(
            spb.DefinePriorityClassRequest(priority_class=wanted), metadata=md, timeout=10
        )

    async def delete_class(p: Platform, t: Target, md: Any) -> Any:
        name = await _defined(p)
        return await s(p).DeletePriorityClass(
            spb.DeletePriorityClassRequest(name=name), metadata=md, timeout=10
        )

    def agent_log(p: Platform, t: Target, md: Any) -> Any:
        # The target job's task as if its attempt had run on the agent: a log, and whose it is.
        task_id = f"{t.job_id}-w"
        (p.agent_log_dir / f"{task_id}.1.log").write_text("matrix\n")
        (p.agent_log_dir / f"{task_id}.1.json").write_text(
            json.dumps({"tenant": t.tenant, "job_id": t.job_id})
        )
        stub = apb_grpc.AgentLogsStub(p.channel(p.agent_logs))
        return _first(stub.StreamTaskLog(apb.StreamTaskLogRequest(task_id=task_id, attempt=1), metadata=md))

    def submit(p: Platform, t: Target, md: Any) -> Any:
        spec = spb.JobSpec(name="matrix", queue=f"{t.tenant}", tasks=[task_spec("w")])
        return s(p).SubmitJob(spb.SubmitJobRequest(spec=spec), metadata=md, timeout=10)

    return {
        S + "SubmitJob": submit,
        S + "GetJob": lambda p, t, md: s(p).GetJob(
            spb.GetJobRequest(job_id=t.job_id), metadata=md, timeout=10
        ),
        S + "ListJobs": lambda p, t, md: s(p).ListJobs(
            spb.ListJobsRequest(queue=t.tenant), metadata=md, timeout=10
        ),
        S + "CancelJob": cancel,
        S + "WatchJob": lambda p, t, md: _first(
            s(p).WatchJob(spb.WatchJobRequest(job_id=t.job_id), metadata=md)
        ),
        S + "ListNodes": lambda p, t, md: s(p).ListNodes(spb.ListNodesRequest(), metadata=md, timeout=10),
        S + "ListQueues": lambda p, t, md: s(p).ListQueues(spb.ListQueuesRequest(), metadata=md, timeout=10),
        S + "GetQueue": lambda p, t, md: s(p).GetQueue(
            spb.GetQueueRequest(name=t.tenant), metadata=md, timeout=10
        ),
        S + "ExplainJob": lambda p, t, md: s(p).ExplainJob(
            spb.ExplainJobRequest(job_id=t.job_id), metadata=md, timeout=10
        ),
        S + "DescribeJob": lambda p, t, md: s(p).DescribeJob(
            spb.DescribeJobRequest(job_id=t.job_id), metadata=md, timeout=10
        ),
        # Follow: the job waits for a node (none in this platform), so the stream stays open, empty.
        S + "StreamJobLogs": lambda p, t, md: _first(
            s(p).StreamJobLogs(spb.StreamJobLogsRequest(job_id=t.job_id, follow=True), metadata=md)
        ),
        S + "CreateQueue": lambda p, t, md: s(p).CreateQueue(
            spb.CreateQueueRequest(queue=_queue(t.tenant)), metadata=md, timeout=10
        ),
        S + "UpdateQueue": update_queue,
        S + "DeleteQueue": delete_queue,
        S + "ListPriorityClasses": lambda p, t, md: s(p).ListPriorityClasses(
            spb.ListPriorityClassesRequest(), metadata=md, timeout=10
        ),
        S + "DefinePriorityClass": define_class,
        S + "DeletePriorityClass": delete_class,
        B + "GetUsage": lambda p, t, md: b(p).GetUsage(
            bpb.GetUsageRequest(tenant=t.tenant), metadata=md, timeout=10
        ),
        B + "ListCharges": lambda p, t, md: b(p).ListCharges(
            bpb.ListChargesRequest(tenant=t.tenant), metadata=md, timeout=10
        ),
        B + "GetInvoice": lambda p, t, md: b(p).GetInvoice(
            bpb.GetInvoiceRequest(tenant=t.tenant, period=PERIOD), metadata=md, timeout=10
        ),
        B + "ClosePeriod": lambda p, t, md: b(p).ClosePeriod(
            bpb.ClosePeriodRequest(tenant=t.tenant, period=PERIOD), metadata=md, timeout=10
        ),
        R + "Resolve": lambda p, t, md: r(p).Resolve(
            rpb.ResolveRequest(from_region=REGION), metadata=md, timeout=10
        ),
        R + "GetNetwork": lambda p, t, md: r(p).GetNetwork(rpb.GetNetworkRequest(), metadata=md, timeout=10),
        R + "WatchNetwork": lambda p, t, md: _first(
            r(p).WatchNetwork(rpb.WatchNetworkRequest(), metadata=md)
        ),
        R + "ResolveReplica": lambda p, t, md: r(p).ResolveReplica(
            rpb.ResolveReplicaRequest(service_id=MATRIX_SERVICE, policy="least-outstanding"),
            metadata=md,
            timeout=10,
        ),
        A + "StreamTaskLog": agent_log,
        V + "CreateService": _create_service,
        V + "GetService": lambda p, t, md: v(p).GetService(
            vpb.GetServiceRequest(tenant=t.tenant, name="matrix"), metadata=md, timeout=10
        ),
        V + "ListServices": lambda p, t, md: v(p).ListServices(
            vpb.ListServicesRequest(tenant=t.tenant), metadata=md, timeout=10
        ),
        V + "ScaleService": lambda p, t, md: v(p).ScaleService(
            vpb.ScaleServiceRequest(tenant=t.tenant, name="matrix", replicas=1), metadata=md, timeout=10
        ),
        V + "DeleteService": _delete_service,
        V + "WatchService": lambda p, t, md: _first(
            v(p).WatchService(vpb.WatchServiceRequest(tenant=t.tenant, name="matrix"), metadata=md)
        ),
        V + "ExplainService": lambda p, t, md: v(p).ExplainService(
            vpb.ExplainServiceRequest(tenant=t.tenant, name="matrix"), metadata=md, timeout=10
        ),
    }


CALLS = _calls()


async def _status(call: Awaitable[Any]) -> tuple[grpc.StatusCode, Any]:
    try:
        return OK, await call
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details()


def _visible_tenants(method: str, answer: Any) -> set[str]:
    """For LIST rules: the tenants whose items the answer holds."""
    if method.endswith("ListJobs"):
        return {j.spec.queue.split("/")[0] for j in answer.jobs}
    return {q.name.split("/")[0] for q in answer.queues}


def test_the_tables_cover_every_rpc_the_protos_define() -> None:
    defined = {
        f"/{service.full_name}/{m.name}"
        for module in (spb, bpb, rpb, apb, vpb)
        for service in module.DESCRIPTOR.services_by_name.values()
        for m in service.methods
    }
    assert set(POLICY) == defined == set(CALLS)


async def test_isolation_matrix(plat: Platform) -> None:
    # Setup as platform admin: one job, one service and one closed period in each tenant.
    admin = bearer(plat.tokens[Role.PLATFORM_ADMIN])
    targets = {}
    for tenant in (OWN, OTHER):
        targets[tenant] = Target(tenant, await _submit(plat, tenant, f"{tenant}-job"))
        await _service(plat, tenant, "matrix")
        billing = bpb_grpc.BillingStub(plat.channel(plat.billing))

        async def billing_knows(tenant: str = tenant, billing: bpb_grpc.BillingStub = billing) -> bool:
            # Billing answers NOT_FOUND for a tenant it has seen no job of; it learns of this one from
            # the JobSubmitted just published.
            request = bpb.GetUsageRequest(tenant=tenant)
            return (await _status(billing.GetUsage(request, metadata=admin, timeout=10)))[0] is OK

        await until(billing_knows, what=f"billing knows tenant {tenant}")
        await billing.ClosePeriod(
            bpb.ClosePeriodRequest(tenant=tenant, period=PERIOD), metadata=admin, timeout=10
        )

    mismatches = []
    cells = 0
    for method, call in CALLS.items():
        for role in Role:
            for own in (True, False):
                target = targets[OWN if own else OTHER]
                want = expected(method, role, own)
                got, answer = await _status(call(plat, target, bearer(plat.tokens[role])))
                cells += 1
                if got is not want:
                    mismatches.append(
                        f"{method} {role.value} {'own' if own else 'other'}: {got.name} ({answer})"
                    )
                elif got is OK and POLICY[method].tenant is TenantRule.LIST:
                    # Scoped lists: a tenant-bound caller sees only its tenant's items, platform roles all.
                    seen = _visible_tenants(method, answer)
                    allowed = {OWN, OTHER} if role in PLATFORM_WIDE else {OWN}
                    if not seen <= allowed or (own and OWN not in seen):
                        mismatches.append(f"{method} {role.value} {'own' if own else 'other'}: saw {seen}")
    assert cells == len(POLICY) * len(Role) * 2
    assert not mismatches, "\n".join(mismatches)


async def test_no_token_and_a_garbled_header_are_unauthenticated(plat: Platform) -> None:
    target = Target(OWN, "job-missing")
    for method, call in CALLS.items():
        for metadata in ((), (("authorization", "Basic abc"),), bearer("not-a-jwt")):
            got, details = await _status(call(plat, target, metadata))
            assert got is grpc.StatusCode.UNAUTHENTICATED, (method, metadata, details)


async def test_expired_forged_and_revoked_tokens_are_refused(plat: Platform) -> None:
    api = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))
    billing = bpb_grpc.BillingStub(plat.channel(plat.billing))
    routing = rpb_grpc.RoutingStub(plat.channel(plat.routing))

    async def answers(token: str) -> list[tuple[grpc.StatusCode, Any]]:
        """What each of the three services answers ``token``."""
        md = bearer(token)
        return [
            await _status(api.ListQueues(spb.ListQueuesRequest(), metadata=md, timeout=10)),
            await _status(billing.GetUsage(bpb.GetUsageRequest(), metadata=md, timeout=10)),
            await _status(routing.GetNetwork(rpb.GetNetworkRequest(), metadata=md, timeout=10)),
        ]

    def codes(got: list[tuple[grpc.StatusCode, Any]]) -> set[grpc.StatusCode]:
        return {code for code, _ in got}

    now = int(time.time())
    key = load_private_key(plat.keys.private)
    # Expired: a well-signed token whose exp is an hour ago.
    expired = sign(Grant("old", OWN, frozenset({Role.VIEWER}), "tok-expired", now - 7200, now - 3600), key)
    assert await answers(expired) == [(grpc.StatusCode.UNAUTHENTICATED, "token has expired")] * 3

    # Forged: platform-admin claims signed by a key the platform never saw.
    stranger = Ed25519PrivateKey.generate()
    forged = sign(Grant("mallory", "", frozenset({Role.PLATFORM_ADMIN}), "tok-f", now, now + 3600), stranger)
    got = await answers(forged)
    assert codes(got) == {grpc.StatusCode.UNAUTHENTICATED} and all("unknown key" in str(d) for _, d in got)
    # The same claims and signature under the header (kid) of the platform's key: the signature fails.
    _, claims, signature = forged.split(".")
    header = sign(Grant("x", OWN, frozenset({Role.VIEWER}), "tok-h", now, now + 60), key).split(".")[0]
    got = await answers(f"{header}.{claims}.{signature}")
    assert codes(got) == {grpc.StatusCode.UNAUTHENTICATED} and all("signature" in str(d) for _, d in got)

    # Revoked: accepted, revoked through the ledger, then refused by every service after its refresh.
    token_id, token = await plat.issue(Role.TENANT_MEMBER)
    assert codes(await answers(token)) == {OK}
    await plat.ledger.revoke(token_id, "test", "leaked")

    async def refused_everywhere() -> bool:
        return codes(await answers(token)) == {grpc.StatusCode.UNAUTHENTICATED}

    await until(refused_everywhere, what="the revocation reached every service")
    assert {str(d) for _, d in await answers(token)} == {f"token {token_id} has been revoked"}


async def test_health_stays_open_without_a_token(plat: Platform) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    for address in (plat.scheduler, plat.billing):
        answer = await health_pb2_grpc.HealthStub(plat.channel(address)).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        assert answer.status == health_pb2.HealthCheckResponse.SERVING


async def test_request_ids_are_deduplicated_per_tenant(plat: Platform) -> None:
    api = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))
    admin = bearer(plat.tokens[Role.PLATFORM_ADMIN])

    def request(queue: str) -> spb.SubmitJobRequest:
        spec = spb.JobSpec(name="same", queue=queue, tasks=[task_spec("w")])
        return spb.SubmitJobRequest(spec=spec, request_id="shared-request-id")

    first = (await api.SubmitJob(request(OWN), metadata=admin, timeout=10)).job
    again = (await api.SubmitJob(request(OWN), metadata=admin, timeout=10)).job
    other = (await api.SubmitJob(request(OTHER), metadata=admin, timeout=10)).job
    assert again.id == first.id
    assert other.id != first.id and other.spec.queue == OTHER


async def test_an_empty_billing_tenant_means_the_callers(plat: Platform) -> None:
    billing = bpb_grpc.BillingStub(plat.channel(plat.billing))
    answer = await billing.GetUsage(
        bpb.GetUsageRequest(), metadata=bearer(plat.tokens[Role.TENANT_MEMBER]), timeout=10
    )
    assert answer.tenant == OWN


async def test_refusals_say_which_tenant_and_role(plat: Platform) -> None:
    member = bearer(plat.tokens[Role.TENANT_MEMBER])
    api = spb_grpc.SchedulerStub(plat.channel(plat.scheduler))
    billing = bpb_grpc.BillingStub(plat.channel(plat.billing))
    spec = spb.JobSpec(name="elsewhere", queue=f"{OTHER}", tasks=[task_spec("w")])
    code, details = await _status(api.SubmitJob(spb.SubmitJobRequest(spec=spec), metadata=member, timeout=10))
    assert (code, details) == (
        grpc.StatusCode.PERMISSION_DENIED,
        f"queue '{OTHER}' belongs to tenant '{OTHER}': this token is for tenant '{OWN}'",
    )
    code, details = await _status(
        billing.GetUsage(bpb.GetUsageRequest(tenant=OTHER), metadata=member, timeout=10)
    )
    assert (code, details) == (
        grpc.StatusCode.PERMISSION_DENIED,
        f"tenant '{OTHER}': this token is for tenant '{OWN}'",
    )
    code, details = await _status(
        billing.ListCharges(bpb.ListChargesRequest(tenant=OWN), metadata=member, timeout=10)
    )
    assert (code, details) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "role tenant-member may not call ListCharges",
    )
    code, details = await _status(
        api.GetJob(spb.GetJobRequest(job_id="job-nothere"), metadata=member, timeout=10)
    )
    assert code is grpc.StatusCode.NOT_FOUND
    # A service spec naming another tenant's queue, the request none: refused like the request's queue.
    serving = vpb_grpc.ServingStub(plat.channel(plat.serving))
    request = vpb.CreateServiceRequest(spec=_service_spec(OTHER, "elsewhere"))
    code, details = await _status(serving.CreateService(request, metadata=member, timeout=10))
    assert (code, details) == (
        grpc.StatusCode.PERMISSION_DENIED,
        f"queue '{OTHER}' belongs to tenant '{OTHER}': this token is for tenant '{OWN}'",
    )
