"""`SchedulerClient`: the Scheduler gRPC API for Python programs (docs/client.md).

Every call has a deadline (``deadline_s``) that bounds all its tries together. A call answered
UNAVAILABLE (the scheduler restarting, a standby asked to write, its database away for a moment) is
tried again with backoff until the deadline or ``Retry.attempts``; a submit is retried with the same
request_id, so a retry whose first try did reach the scheduler answers the same job instead of making a
second. Other errors are raised as they come (`grpc.aio.AioRpcError`: ``code()`` and ``details()``).
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.client import config as client_config
from suanli.client.channel import aio_bearer_channel, reconnect_options
from suanli.jobspec import JobSpec, to_proto

T = TypeVar("T")

DEFAULT_ADDRESS = "127.0.0.1:50051"
# Unary calls answer from the scheduler's state: a slow answer means trouble, not work in progress.
DEFAULT_DEADLINE_S = 30.0
PAGE_SIZE = 100
FINAL_STATES = frozenset({pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED})


@dataclass(frozen=True, slots=True)
class Retry:
    """How a call answered UNAVAILABLE is tried again: backoff with jitter, within its deadline."""

    attempts: int = 6  # tries in all, the first included
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.2  # each pause is drawn from +-20% of the backoff, so clients do not retry in step

    def pause_s(self, failures: int, rng: random.Random) -> float:
        """The pause after the ``failures``-th failed try."""
        base = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (failures - 1))
        return base * (1 + self.jitter * (2 * rng.random() - 1))


NO_RETRY = Retry(attempts=1)


class SchedulerClient:
    """A client of one scheduler: ``async with SchedulerClient(address) as client: ...``.

    ``token``: sent as ``authorization: Bearer``; ``ca_pem``: talk TLS trusting this CA (None:
    plaintext). ``channel``: a channel of your own instead (the client then does not close it).
    ``clock``, ``sleep`` and ``rng``: injected time and randomness (tests).
    """

    def __init__(
        self,
        address: str = DEFAULT_ADDRESS,
        *,
        token: str = "",
        ca_pem: bytes | None = None,
        deadline_s: float = DEFAULT_DEADLINE_S,
        retry: Retry | None = None,
        channel: grpc.aio.Channel | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.address = address
        self.deadline_s = deadline_s
        self.retry = retry or Retry()
        self._owns_channel = channel is None
        if channel is None:
            reconnect = reconnect_options(self.retry.initial_backoff_s, self.retry.max_backoff_s)
            channel = aio_bearer_channel(address, token, ca_pem, reconnect)
        self._channel = channel
        self._stub = pb_grpc.SchedulerStub(self._channel)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()

    @classmethod
    def from_config(
        cls,
        address: str | None = None,
        *,
        context: str | None = None,
        config: str | Path | None = None,
        token: str | None = None,
        ca: str | Path | None = None,
        **options: Any,
    ) -> SchedulerClient:
        """A client configured like the CLI: the config file's context (`suanli.client.config`).

        ``SUANLI_TOKEN`` / ``SUANLI_CA`` win over the context's, explicit arguments over both.
        """
        import os

        found = client_config.load_context(config, context)
        address = address or (found.servers.get("scheduler") if found else None) or DEFAULT_ADDRESS
        token = token or os.environ.get(client_config.TOKEN_ENV) or (found.token if found else "")
        ca = ca or os.environ.get(client_config.CA_ENV) or (found.ca if found else "")
        ca_pem = client_config.read_ca(ca) if ca else None
        return cls(address, token=token, ca_pem=ca_pem, **options)

    async def close(self) -> None:
        """Close the channel (unless it was given)."""
        if self._owns_channel:
            await self._channel.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    # -- calls ---------------------------------------------------------------------------------------

    async def submit(
        self, spec: JobSpec | pb.JobSpec, *, request_id: str | None = None, deadline_s: float | None = None
    ) -> pb.Job:
        """Submit ``spec`` (the job-spec model, `suanli.jobspec`, or its wire form); the new job.

        ``request_id``: the idempotency key (a new UUID when None). Give your own to make a submit
        that may be repeated (a restarted workflow step) name one job: the same key with the same spec
        answers the first job; with another spec, ALREADY_EXISTS.
        """
        wire = spec if isinstance(spec, pb.JobSpec) else to_proto(spec)
        request = pb.SubmitJobRequest(spec=wire, request_id=request_id or str(uuid.uuid4()))
        response = await self._call(self._stub.SubmitJob, request, deadline_s)
        job: pb.Job = response.job
        return job

    async def get(self, job_id: str, *, deadline_s: float | None = None) -> pb.Job:
        """The job ``job_id`` (NOT_FOUND when it is not there, or not the caller's tenant's)."""
        job: pb.Job = await self._call(self._stub.GetJob, pb.GetJobRequest(job_id=job_id), deadline_s)
        return job

    async def list(
        self,
        *,
        queue: str = "",
        state: pb.JobState = pb.JOB_STATE_UNSPECIFIED,
        newest_first: bool = False,
        limit: int = 0,
        deadline_s: float | None = None,
    ) -> Sequence[pb.Job]:
        """Jobs of ``queue`` (all: "") in ``state`` (all: unspecified), up to ``limit`` (0: all).

        Follows the scheduler's pages; each page is one call with its own deadline.
        """
        jobs: list[pb.Job] = []
        token = ""
        while True:
            size = PAGE_SIZE if not limit else min(PAGE_SIZE, limit - len(jobs))
            request = pb.ListJobsRequest(
                queue=queue, state=state, page_size=size, page_token=token, newest_first=newest_first
            )
            page = await self._call(self._stub.ListJobs, request, deadline_s)
            jobs.extend(page.jobs)
            token = page.next_page_token
            if not token or (limit and len(jobs) >= limit):
                return jobs

    async def cancel(self, job_id: str, reason: str = "", *, deadline_s: float | None = None) -> pb.Job:
        """Cancel ``job_id`` (repeating it answers the cancelled job); FAILED_PRECONDITION once final."""
        request = pb.CancelJobRequest(job_id=job_id, reason=reason)
        job: pb.Job = await self._call(self._stub.CancelJob, request, deadline_s)
        return job

    async def watch(self, job_id: str) -> AsyncIterator[pb.JobEvent]:
        """The job's events, the current state first, until a final state (the last event yielded).

        No deadline: a job may run for days. A stream that breaks with UNAVAILABLE is opened again
        (backoff by ``retry``, counted from the last event received); it then restarts with a
        ``Current`` event, so an event that happened meanwhile is seen as that state.
        """
        failures = 0
        while True:
            try:
                async for event in self._stub.WatchJob(pb.WatchJobRequest(job_id=job_id)):
                    failures = 0
                    yield event
                    if event.state in FINAL_STATES:
                        return
                # The server ends the stream only at a final state; anything else is a dropped stream.
                raise _dropped(job_id)
            except grpc.aio.AioRpcError as exc:
                failures += 1
                if exc.code() is not grpc.StatusCode.UNAVAILABLE or failures >= self.retry.attempts:
                    raise
                await self._sleep(self.retry.pause_s(failures, self._rng))

    async def logs(
        self, job_id: str, task: str = "", attempt: int = 0, *, follow: bool = False
    ) -> AsyncIterator[pb.JobLogChunk]:
        """The output of one attempt of one of the job's tasks, as its node's agent streams it.

        ``task``: its id or name (empty: the job's only task); ``attempt`` from 1 (0: the latest).
        ``follow`` waits for the attempt to start and streams until it ends, so it has no deadline.
        Not retried: a stream opened again would repeat the output from its start.
        """
        request = pb.StreamJobLogsRequest(job_id=job_id, task=task, attempt=attempt, follow=follow)
        async for chunk in self._stub.StreamJobLogs(request):
            yield chunk

    # -- retries -----------------------------------------------------------------------------------

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any, deadline_s: float | None) -> T:
        """One unary call, tried again on UNAVAILABLE.

        Until another answer, the attempts are used up or the deadline passes (the last error is raised).
        """
        end = self._clock() + (self.deadline_s if deadline_s is None else deadline_s)
        failures = 0
        while True:
            left = end - self._clock()
            try:
                return await method(request, timeout=max(left, 0.001))
            except grpc.aio.AioRpcError as exc:
                failures += 1
                if exc.code() is not grpc.StatusCode.UNAVAILABLE or failures >= self.retry.attempts:
                    raise
                pause = self.retry.pause_s(failures, self._rng)
                if self._clock() + pause >= end:
                    raise
                await self._sleep(pause)


def _dropped(job_id: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        details=f"the watch of job {job_id} ended before the job finished",
    )
