"""`suanli.client.SchedulerClient` against the real scheduling service (broker + PostgreSQL): submit,
watch until a final state, cancel, and retries that keep the request_id (docs/client.md)."""

from __future__ import annotations

import asyncio
import random
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.client import FINAL_STATES, Retry, SchedulerClient
from suanli.jobspec import parse_jobspec

from .helpers import TopicReader, capacity, config, envelope, publish, started, until

pytestmark = pytest.mark.timeout(120)

SPEC = """
name: train
queue: acme
tasks:
  - name: w
    resources: {cpu: "1", memory: 1Gi, gpu: 1}
    command: python train.py
    duration: 1h
"""
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FAST = Retry(attempts=5, initial_backoff_s=0.05, max_backoff_s=0.2)


async def test_submit_watch_until_succeeded_list_get_and_cancel(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    client = SchedulerClient(f"127.0.0.1:{app.port}", retry=FAST, rng=random.Random(7))
    try:
        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", "n1", "NodeCapacityChanged", capacity("n1")
        )
        await until(lambda: _schedulable(app), what="capacity view")
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            job = await client.submit(parse_jobspec(SPEC), request_id="nb-cell-1")
            assert job.spec.name == "train" and job.state == pb.JOB_STATE_PENDING
            # The same request_id again (a re-run notebook cell): the same job.
            assert (await client.submit(parse_jobspec(SPEC), request_id="nb-cell-1")).id == job.id

            events: list[pb.JobEvent] = []
            watching = asyncio.create_task(_collect(client.watch(job.id), events))
            [placed] = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == job.id)
            base = {"task_id": placed["task_id"], "job_id": job.id, "node_id": "n1", "attempt": 1}
            for name, extra in (
                ("TaskStarted", {"device_indices": [0], "pid": 7}),
                ("TaskFinished", {"exit_code": 0}),
            ):
                record = {**envelope(placed["task_id"]), **base, **extra}
                await publish(
                    kafka_bootstrap, topic_prefix, "tasks.lifecycle", placed["task_id"], name, record
                )
            await asyncio.wait_for(watching, 30)
            states = [e.state for e in events]
            assert events[0].event == "Current" and states[-1] == pb.JOB_STATE_SUCCEEDED
            assert pb.JOB_STATE_RUNNING in states and states.count(pb.JOB_STATE_SUCCEEDED) == 1

        assert (await client.get(job.id)).state == pb.JOB_STATE_SUCCEEDED
        assert [j.id for j in await client.list(queue="acme")] == [job.id]
        assert [j.id for j in await client.list(state=pb.JOB_STATE_PENDING)] == []

        other = await client.submit(parse_jobspec(SPEC.replace("train", "second")))
        cancelled = await client.cancel(other.id, "not needed")
        assert cancelled.state == pb.JOB_STATE_CANCELLED
        assert (await client.cancel(other.id)).state == pb.JOB_STATE_CANCELLED  # a repeated cancel
        assert [e.state for e in await _all(client.watch(other.id))] == [pb.JOB_STATE_CANCELLED]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await client.cancel(job.id)  # already succeeded: refused at once, not retried
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    finally:
        await client.close()
        await app.stop()


class LoseFirstAnswer(grpc.aio.UnaryUnaryClientInterceptor):
    """The network losing the scheduler's first answer: the call did reach it, the caller sees
    UNAVAILABLE. Records every request sent."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: Any, request: Any
    ) -> Any:
        self.sent.append(request)
        call = await continuation(details, request)
        answer = await call
        if len(self.sent) == 1:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="connection reset",
            )
        return answer


async def test_a_retried_submit_keeps_its_request_id_and_makes_one_job(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    lossy = LoseFirstAnswer()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}", interceptors=[lossy])
    client = SchedulerClient(channel=channel, retry=FAST, rng=random.Random(7))
    try:
        job = await client.submit(parse_jobspec(SPEC))
        assert len(lossy.sent) == 2 and lossy.sent[0].request_id == lossy.sent[1].request_id != ""
        assert [j.id for j in await client.list()] == [job.id]  # the first try's job, answered again
    finally:
        await channel.close()
        await app.stop()


async def test_unavailable_is_retried_until_the_scheduler_answers_within_the_deadline(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    from suanli.infra.net import free_loopback_port

    port = free_loopback_port()
    client = SchedulerClient(
        f"127.0.0.1:{port}",
        retry=Retry(attempts=100, initial_backoff_s=0.1, max_backoff_s=0.5),
        deadline_s=60,
    )
    nothing = SchedulerClient(f"127.0.0.1:{port}", retry=FAST, deadline_s=60)
    with pytest.raises(grpc.aio.AioRpcError) as down:
        await nothing.get("job-x")  # nobody listens: UNAVAILABLE once the attempts are spent
    assert down.value.code() is grpc.StatusCode.UNAVAILABLE
    await nothing.close()
    submitting = asyncio.create_task(client.submit(parse_jobspec(SPEC), request_id="late"))
    cfg = config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path)
    # Each phase bounded on its own, so a hang says where it was (the test's own timeout does not).
    app = await asyncio.wait_for(started(cfg.model_copy(update={"listen": f"127.0.0.1:{port}"})), 45)
    try:
        # The channel's own reconnection backoff follows the retry policy (at most 0.5 s here, not
        # gRPC's 120 s), so the retries reach the scheduler soon after it listens.
        job = await asyncio.wait_for(submitting, 30)
        assert job.state == pb.JOB_STATE_PENDING and job.id in {j.id for j in await client.list()}
        assert job.state not in FINAL_STATES
    finally:
        await client.close()
        await asyncio.wait_for(app.stop(), 30)


async def test_the_client_example_submits_and_follows_to_the_end(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    example = runpy.run_path(str(EXAMPLES / "client" / "submit_and_watch.py"))
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    address = f"127.0.0.1:{app.port}"
    try:
        client = SchedulerClient(address, retry=FAST)  # closed by the example
        running = asyncio.create_task(
            example["submit_and_watch"](str(spec), request_id="ex-1", client=client)
        )
        async with SchedulerClient(address) as operator:
            job = await until(lambda: _job(operator), what="the example's job")
            await operator.cancel(job.id, "test over")
        assert await asyncio.wait_for(running, 30) == pb.JOB_STATE_CANCELLED
    finally:
        await app.stop()


async def _job(client: SchedulerClient) -> pb.Job | None:
    jobs = await client.list()
    return jobs[0] if jobs else None


async def _collect(stream: Any, into: list[pb.JobEvent]) -> None:
    async for event in stream:
        into.append(event)


async def _all(stream: Any) -> list[pb.JobEvent]:
    out: list[pb.JobEvent] = []
    await _collect(stream, out)
    return out


async def _schedulable(app: Any) -> bool:
    return bool(app.c.capacity.schedulable())
