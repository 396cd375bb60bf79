"""ListJobs and ListQueues as the servicer answers them from a projection: a tenant's caller pages through
its own jobs and queues only, tokens of the format servers have always issued go on where they stopped, and
a token that is not one is INVALID_ARGUMENT naming page_token."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from _listing import cancelled, flat, job

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.auth import context as auth_context
from suanli.auth.principal import Principal, Role
from suanli.scheduling.domain.queueing import QueueSpec
from suanli.scheduling.entrypoints.grpc_server import SchedulerServicer
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.projection import Projection


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class Context:
    async def abort(self, code: grpc.StatusCode, details: str, trailing_metadata: Any = None) -> None:
        raise Aborted(code, details)


def servicer(jobs: int = 30) -> SchedulerServicer:
    """A servicer over jobs 1..jobs (of _listing.QUEUES; those of queue acme, every third, cancelled)."""
    projection = Projection()
    for n in range(1, jobs + 1):
        view = cancelled(job(n)) if n % 3 == 0 else job(n)
        projection.jobs[view.id] = view
        projection.index.put(view)
    for name in ("acme", "acme/nlp", "acme/vision", "globex", "globex/a", "initech"):
        projection.queues[name] = QueueSpec(name)
    return SchedulerServicer(None, projection, CapacityView(), lambda nodes, job: None, history=None)  # type: ignore[arg-type]


@pytest.fixture
def as_acme() -> Iterator[None]:
    token = auth_context.PRINCIPAL.set(Principal("ann", "acme", frozenset({Role.TENANT_MEMBER}), "t1", 0))
    yield
    auth_context.PRINCIPAL.reset(token)


async def job_pages(api: SchedulerServicer, **fields: Any) -> list[list[str]]:
    pages, token = [], ""
    while True:
        answer = await api.ListJobs(pb.ListJobsRequest(page_token=token, **fields), Context())  # type: ignore[arg-type]
        pages.append([j.id for j in answer.jobs])
        token = answer.next_page_token
        if not token:
            return pages


async def queue_pages(api: SchedulerServicer, size: int) -> list[list[str]]:
    pages, token = [], ""
    while True:
        request = pb.ListQueuesRequest(page_size=size, page_token=token)
        answer = await api.ListQueues(request, Context())  # type: ignore[arg-type]
        pages.append([q.name for q in answer.queues])
        token = answer.next_page_token
        if not token:
            return pages


async def test_a_tenant_pages_through_its_own_jobs_only_in_either_order(as_acme: None) -> None:
    api = servicer(30)
    acme = [f"job-{n}" for n in range(1, 31) if n % 3 != 2]  # acme (n % 3 == 0) and acme/vision
    newest = await job_pages(api, page_size=7, newest_first=True)
    assert [len(p) for p in newest] == [7, 7, 6] and flat(newest) == acme[::-1]
    assert flat(await job_pages(api, page_size=6)) == acme
    waiting = [f"job-{n}" for n in range(1, 31) if n % 3 == 1]  # acme/vision: never cancelled
    assert flat(await job_pages(api, page_size=4, state=pb.JOB_STATE_PENDING)) == waiting
    assert flat(await job_pages(api, page_size=4, queue="acme", state=pb.JOB_STATE_CANCELLED)) == [
        f"job-{n}" for n in range(3, 31, 3)
    ]
    assert await job_pages(api, queue="globex") == [[]]  # another tenant's queue: nothing, not an error


async def test_a_platform_wide_caller_and_a_server_without_authentication_see_every_job() -> None:
    api = servicer(12)
    everyone = [f"job-{n}" for n in range(1, 13)]
    assert flat(await job_pages(api, page_size=5)) == everyone
    token = auth_context.PRINCIPAL.set(Principal("ops", "", frozenset({Role.PLATFORM_ADMIN}), "t2", 0))
    try:
        assert flat(await job_pages(api, page_size=5, newest_first=True)) == everyone[::-1]
    finally:
        auth_context.PRINCIPAL.reset(token)


def _token(filters: dict[str, Any], after: Any) -> str:
    """A page token as every server so far has written it: base64 JSON of the filters and the last seq."""
    return base64.urlsafe_b64encode(json.dumps({"f": filters, "a": after}).encode()).decode()


async def test_a_token_from_before_the_index_goes_on_and_a_forged_one_is_refused() -> None:
    api = servicer(12)
    ctx: Any = Context()
    old = _token({"queue": "", "state": 0, "newest_first": True}, 5)
    page = await api.ListJobs(pb.ListJobsRequest(page_size=3, newest_first=True, page_token=old), ctx)
    assert [j.id for j in page.jobs] == ["job-4", "job-3", "job-2"] and page.next_page_token
    old = _token({"queue": "acme/vision", "state": 0}, 4)
    page = await api.ListJobs(pb.ListJobsRequest(queue="acme/vision", page_token=old), ctx)
    assert [j.id for j in page.jobs] == ["job-7", "job-10"] and not page.next_page_token
    for bad in (_token({"queue": "", "state": 0}, "job-5"), _token({"queue": "", "state": 0}, True), "x"):
        with pytest.raises(Aborted) as refused:
            await api.ListJobs(pb.ListJobsRequest(page_token=bad), ctx)
        assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert "page_token" in refused.value.details


async def test_queues_come_a_page_at_a_time_in_name_order_and_a_tenant_sees_its_own() -> None:
    api = servicer(3)
    names = ["acme", "acme/nlp", "acme/vision", "globex", "globex/a", "initech"]
    assert await queue_pages(api, 4) == [names[:4], names[4:]]
    assert await queue_pages(api, 0) == [names]  # 0: up to 500 in one answer, as before paging
    assert await queue_pages(api, 6) == [names]
    token = auth_context.PRINCIPAL.set(Principal("ann", "acme", frozenset({Role.VIEWER}), "t1", 0))
    try:
        assert await queue_pages(api, 2) == [["acme", "acme/nlp"], ["acme/vision"]]
    finally:
        auth_context.PRINCIPAL.reset(token)
    ctx: Any = Context()
    jobs_token = (await api.ListJobs(pb.ListJobsRequest(page_size=1), ctx)).next_page_token
    assert jobs_token
    for request in (pb.ListQueuesRequest(page_size=501), pb.ListQueuesRequest(page_token=_token({}, 3))):
        with pytest.raises(Aborted) as refused:
            await api.ListQueues(request, ctx)
        assert refused.value.code is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(Aborted) as refused:
        await api.ListQueues(pb.ListQueuesRequest(page_token=jobs_token), ctx)
    assert "page_token" in refused.value.details


async def test_a_queue_counts_the_live_jobs_of_its_subtree_and_no_finished_one() -> None:
    api = servicer(0)
    projection = api.projection
    for n, queue in enumerate(("acme", "acme/vision", "acme/vision", "globex"), 1):
        view = job(n, queue)
        projection.jobs[view.id] = projection.live[view.id] = view
    projection.jobs["job-2"] = cancelled(projection.jobs["job-2"])
    del projection.live["job-2"]
    answer = await api.ListQueues(pb.ListQueuesRequest(), Context())  # type: ignore[arg-type]
    pending = {q.name: q.pending_jobs for q in answer.queues}
    assert pending == {"acme": 2, "acme/nlp": 0, "acme/vision": 1, "globex": 1, "globex/a": 0, "initech": 0}
