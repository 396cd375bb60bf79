"""What one ListJobs page costs the scheduler's event loop (issue 13), before and after the job index.

The projection holds ``--jobs`` jobs of ``--tenants`` tenants (two queues each, submitted round robin;
all but the last ``--pending`` per tenant finished). One tenant's caller (a tenant-bound token) asks for a
page of ``--page`` jobs, as ``suanli job list`` does: newest first, then oldest first, then PENDING only,
then the next page with the first page's token. Each is timed both ways in the same run:

- before: the selection ListJobs made until the index (every job of every tenant filtered and sorted),
  kept here verbatim as ``scan_page``;
- after: the servicer's own selection (``SchedulerServicer._jobs_page``, the index);
- and the whole ListJobs handler after (selection, start estimates, messages), for scale.

    .venv/bin/python bench/list_jobs.py [--jobs 200000] [--tenants 50] [--page 100] [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.auth import context as auth_context
from suanli.auth.principal import Principal, Role
from suanli.scheduling.domain.jobs import (
    AcceptedSpec,
    AcceptedTask,
    JobSubmitted,
    JobSucceeded,
    JobView,
    Phase,
    evolve,
    submitted,
)
from suanli.scheduling.entrypoints import convert
from suanli.scheduling.entrypoints.grpc_server import SchedulerServicer
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.projection import Projection

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fill(projection: Projection, jobs: int, tenants: int, pending: int) -> None:
    last = jobs - tenants * pending  # the jobs after this one stay PENDING
    for seq in range(1, jobs + 1):
        tenant = seq % tenants
        queue = f"t{tenant:02d}" if seq % 2 else f"t{tenant:02d}/batch"
        spec = AcceptedSpec(f"j{seq}", queue, (AcceptedTask(f"j{seq}-t", "t", cpu_milli=100),))
        job = submitted(JobSubmitted(f"job-{seq}", spec), seq, T0)
        if seq <= last:
            job = evolve(job, JobSucceeded(job.id, spec.tenant, queue), 2, T0)
        else:
            projection.live[job.id] = job
        projection.jobs[job.id] = job
        projection.index.put(job)


def scan_page(
    projection: Projection, queue: str, size: int, last: int | None, newest: bool, phase: Phase | None
) -> list[JobView]:
    """ListJobs' selection before the index, as it was."""
    matching = sorted(
        (
            j
            for j in projection.jobs.values()
            if (last is None or (j.seq < last if newest else j.seq > last))
            and auth_context.sees(j.spec.tenant)
            and (not queue or j.spec.queue == queue)
            and (phase is None or j.phase is phase)
        ),
        key=lambda j: j.seq,
        reverse=newest,
    )
    return matching[:size]


def timed(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median milliseconds of ``repeat`` calls, and the last answer."""
    times, answer = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, answer


async def handler_ms(api: SchedulerServicer, request: pb.ListJobsRequest, repeat: int) -> tuple[float, Any]:
    """Median milliseconds of the ListJobs handler, on one event loop as the server runs it."""
    times, answer = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        answer = await api.ListJobs(request, Context())  # type: ignore[arg-type]
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, answer


class Context:
    async def abort(self, code: Any, details: str, trailing_metadata: Any = None) -> None:
        raise RuntimeError(f"{code}: {details}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--pending", type=int, default=20, help="PENDING jobs per tenant (the newest)")
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    projection = Projection()
    started = time.perf_counter()
    fill(projection, args.jobs, args.tenants, args.pending)
    built = time.perf_counter() - started
    api = SchedulerServicer(None, projection, CapacityView(), lambda nodes, job: None, history=None)  # type: ignore[arg-type]
    auth_context.PRINCIPAL.set(Principal("ann", "t07", frozenset({Role.TENANT_MEMBER}), "tok", 0))
    size = args.page
    first = api._jobs_page("", size, None, True, None).jobs
    cases: list[tuple[str, int | None, bool, Phase | None]] = [
        ("first page, newest first", None, True, None),
        ("first page, oldest first", None, False, None),
        ("first page, PENDING only", None, True, Phase.PENDING),
        ("second page (token)", first[-1].seq, True, None),
    ]
    print(
        f"{args.jobs:,} jobs of {args.tenants} tenants (projection and index built in {built:.1f} s); "
        f"one tenant's page of {size}, median of {args.repeat}; {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} cores"
    )
    print(f"{'case':<28} {'before (scan)':>14} {'after (index)':>14} {'speed-up':>9}")
    for name, last, newest, phase in cases:
        before, old = timed(lambda: scan_page(projection, "", size, last, newest, phase), args.repeat)  # noqa: B023
        after, new = timed(lambda: api._jobs_page("", size, last, newest, phase).jobs, args.repeat)  # noqa: B023
        assert [j.id for j in old] == [j.id for j in new], name  # the same page both ways
        print(f"{name:<28} {before:>11.1f} ms {after:>11.3f} ms {before / after:>8.0f}x")
    request = pb.ListJobsRequest(page_size=size, newest_first=True)
    handler, answer = asyncio.run(handler_ms(api, request, args.repeat))
    token = convert.decode_token(answer.next_page_token, {"queue": "", "state": 0, "newest_first": True})
    shown = f"{len(answer.jobs)} jobs, next after seq {token}"
    print(f"whole ListJobs handler, first page (after): {handler:.2f} ms ({shown})")


if __name__ == "__main__":
    main()
