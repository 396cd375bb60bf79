"""Queue position and estimated start on the real broker and PostgreSQL: a job waits behind a running
one that declared its duration; GetJob, ListJobs and DescribeJob give its place and when it may start."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .helpers import config, envelope, node_seen, publish, started, stub, task_spec, until

pytestmark = pytest.mark.timeout(120)


def _spec(name: str, duration_s: float) -> pb.JobSpec:
    task = task_spec("w")
    task.duration_s = duration_s
    return pb.JobSpec(name=name, queue="acme", tasks=[task])


async def test_a_waiting_job_gets_its_position_and_the_start_the_running_one_frees(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    try:
        await node_seen(api, kafka_bootstrap, topic_prefix, "n1", gpus=1)
        first = (await api.SubmitJob(pb.SubmitJobRequest(spec=_spec("first", 600.0)))).job

        async def placed() -> pb.Job | None:
            job = await api.GetJob(pb.GetJobRequest(job_id=first.id))
            return job if job.tasks[0].node_id == "n1" else None

        task = (await until(placed, what="first placed")).tasks[0]
        started_at = datetime.now(UTC)
        record = {
            **envelope(task.task_id),
            "task_id": task.task_id,
            "job_id": first.id,
            "node_id": "n1",
            "attempt": task.attempt,
            "device_indices": [0],
            "pid": 7,
        }
        await publish(kafka_bootstrap, topic_prefix, "tasks.lifecycle", task.task_id, "TaskStarted", record)

        async def running() -> bool:
            return (await api.GetJob(pb.GetJobRequest(job_id=first.id))).state == pb.JOB_STATE_RUNNING

        await until(running, what="first running")
        assert not (await api.GetJob(pb.GetJobRequest(job_id=first.id))).HasField("queue_position")

        second = (await api.SubmitJob(pb.SubmitJobRequest(spec=_spec("second", 60.0)))).job
        third = (await api.SubmitJob(pb.SubmitJobRequest(spec=_spec("third", 60.0)))).job
        # The submission's answer replays no queue (api.md): the place and the estimate come from GetJob.
        assert not second.HasField("queue_position") and not third.HasField("estimated_start_at")

        async def estimated() -> pb.Job | None:
            job = await api.GetJob(pb.GetJobRequest(job_id=third.id))
            return job if job.HasField("estimated_start_at") else None

        got = await until(estimated, what="an estimate for the third job")
        # Behind the second job, which starts when the first ends (600 s) and runs 60 s.
        assert (got.queue_position, got.queue_waiting) == (2, 2)
        wait_s = (got.estimated_start_at.ToDatetime(UTC) - started_at).total_seconds()
        assert 655 <= wait_s <= 665, wait_s

        listed = await api.ListJobs(pb.ListJobsRequest(queue="acme", state=pb.JOB_STATE_PENDING))
        by_id = {j.id: j for j in listed.jobs}
        assert by_id[second.id].queue_position == 1
        ahead_s = (by_id[second.id].estimated_start_at.ToDatetime(UTC) - started_at).total_seconds()
        assert 595 <= ahead_s <= 605, ahead_s

        described = await api.DescribeJob(pb.DescribeJobRequest(job_id=third.id))
        assert (described.queue_position, described.queue_waiting) == (2, 2)
        assert described.job.estimated_start_at == got.estimated_start_at
    finally:
        await channel.close()
        await app.stop()
