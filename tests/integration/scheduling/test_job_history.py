"""DescribeJob on the real broker and PostgreSQL: a job placed, started, preempted by a higher-priority
job, requeued and cancelled; its history, read back from the store, names the preemptor and the
canceller with the reason, and keeps the first attempt's placement after the requeue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .helpers import capacity, config, envelope, publish, started, stub, task_spec, until

pytestmark = pytest.mark.timeout(120)


async def _lifecycle(
    bootstrap: str, prefix: str, name: str, task: pb.TaskStatus, job_id: str, **extra: Any
) -> None:
    base = {"task_id": task.task_id, "job_id": job_id, "node_id": task.node_id, "attempt": task.attempt}
    record = {**envelope(task.task_id), **base, **extra}
    await publish(bootstrap, prefix, "tasks.lifecycle", task.task_id, name, record)


async def test_the_history_names_the_preemptor_and_the_canceller_and_keeps_earlier_attempts(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    try:
        await publish(
            kafka_bootstrap,
            topic_prefix,
            "capacity.nodes",
            "n1",
            "NodeCapacityChanged",
            capacity("n1", gpus=1),
        )

        async def nodes() -> bool:
            return len((await api.ListNodes(pb.ListNodesRequest())).nodes) == 1

        await until(nodes, what="capacity view")

        async def job(job_id: str, want: Any) -> pb.Job | None:
            found = await api.GetJob(pb.GetJobRequest(job_id=job_id))
            return found if want(found) else None

        spec = pb.JobSpec(name="low", queue="acme", priority_class="low", tasks=[task_spec("w")])
        low = (await api.SubmitJob(pb.SubmitJobRequest(spec=spec))).job
        placed = await until(lambda: job(low.id, lambda j: j.tasks[0].node_id == "n1"), what="low placed")
        first = placed.tasks[0]
        await _lifecycle(
            kafka_bootstrap, topic_prefix, "TaskStarted", first, low.id, device_indices=[0], pid=7
        )
        running = await until(lambda: job(low.id, lambda j: j.state == pb.JOB_STATE_RUNNING), what="running")
        assert running.updated_at.ToDatetime() > running.submitted_at.ToDatetime()  # Updated follows

        # A high-priority job needs the only GPU: the low one is preempted, stops, and is requeued.
        spec = pb.JobSpec(name="high", queue="acme", priority_class="high", tasks=[task_spec("w")])
        high = (await api.SubmitJob(pb.SubmitJobRequest(spec=spec))).job
        await until(lambda: job(low.id, lambda j: j.tasks[0].state == "STOPPING"), what="low preempted")
        await _lifecycle(kafka_bootstrap, topic_prefix, "TaskFinished", first, low.id, exit_code=143)
        await until(
            lambda: job(low.id, lambda j: j.restarts == 1 and j.tasks[0].state == "PENDING"), what="requeue"
        )
        await until(lambda: job(high.id, lambda j: j.tasks[0].node_id == "n1"), what="high placed")

        # Waiting jobs of the queue in the order the cycle takes them: priority, then submission.
        later = pb.JobSpec(name="low-2", queue="acme", priority_class="low", tasks=[task_spec("w")])
        low2 = (await api.SubmitJob(pb.SubmitJobRequest(spec=later))).job
        urgent = pb.JobSpec(name="high-2", queue="acme", priority_class="high", tasks=[task_spec("w")])
        high2 = (await api.SubmitJob(pb.SubmitJobRequest(spec=urgent))).job
        positions = {}
        for waiting in (low, low2, high2):
            answer = await api.DescribeJob(pb.DescribeJobRequest(job_id=waiting.id))
            positions[waiting.id] = (answer.queue_position, answer.queue_waiting)
        assert positions == {high2.id: (1, 3), low.id: (2, 3), low2.id: (3, 3)}
        running_high = await api.DescribeJob(pb.DescribeJobRequest(job_id=high.id))
        assert not running_high.HasField("queue_position")

        await api.CancelJob(pb.CancelJobRequest(job_id=low.id, reason="superseded by the high run"))
        described = await api.DescribeJob(pb.DescribeJobRequest(job_id=low.id))

        assert described.job.id == low.id and described.job.state == pb.JOB_STATE_CANCELLED
        assert not described.HasField("queue_position")
        assert [t.state for t in described.job.tasks] == ["CANCELLED"]  # requeued, then cancelled
        types = [e.type for e in described.events]
        assert types == [
            "JobSubmitted",
            "TaskPlaced",
            "TaskStarted",
            "TaskPreempted",
            "TaskFinished",
            "JobRequeued",
            "JobCancelled",
        ]
        events = {e.type: e for e in described.events}
        assert events["TaskPlaced"].node_id == "n1" and "placed on node n1" in events["TaskPlaced"].message
        assert events["TaskPreempted"].by == high.id
        assert events["TaskPreempted"].message == f"preempted by job {high.id}"
        assert events["TaskFinished"].exit_code == 143
        assert events["JobRequeued"].message.startswith("requeued: attempt 1 -> 2 (PREEMPTED")
        cancelled = events["JobCancelled"]
        assert cancelled.reason == "superseded by the high run"
        # Without authentication the canceller is the peer the request came from.
        assert cancelled.by.startswith("ipv4:127.0.0.1:") or cancelled.by.startswith("ipv6:")
        assert cancelled.message == f"cancelled by {cancelled.by}: superseded by the high run"
        times = [e.at.ToDatetime() for e in described.events]
        assert times == sorted(times)

        # The first attempt's placement is kept after the requeue, with how it ended.
        [attempt] = described.attempts
        assert (attempt.attempt, attempt.node_id, list(attempt.gpu_indices)) == (1, "n1", [0])
        assert attempt.outcome == "PREEMPTED" and attempt.exit_code == 143
        assert attempt.HasField("started_at") and attempt.HasField("ended_at")
        assert described.accounting.attempts == 2
        assert described.accounting.gpu_hours == pytest.approx(attempt.running_s / 3600)
        assert described.accounting.elapsed_s == pytest.approx(attempt.running_s)

        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await api.DescribeJob(pb.DescribeJobRequest(job_id="job-missing"))
        assert missing.value.code() is grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as empty:
            await api.DescribeJob(pb.DescribeJobRequest())
        assert empty.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    finally:
        await channel.close()
        await app.stop()
