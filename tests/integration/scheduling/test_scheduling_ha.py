"""Validation over gRPC, restart from the store, leader election, level-triggered reconciliation."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .helpers import TopicReader, capacity, config, envelope, publish, started, stub, task_spec, until

pytestmark = pytest.mark.timeout(120)


async def _code(call) -> tuple[grpc.StatusCode, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code(), info.value.details() or ""


async def test_bad_requests_get_precise_statuses_and_restart_rebuilds_state(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    cfg = config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path)
    app = await started(cfg)
    channel, api = stub(app)
    try:
        bad = pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[task_spec(gpu_milli=1500)]))
        code, details = await _code(api.SubmitJob(bad))
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert details == "spec.tasks[0].resources.gpu_milli: must be 1..1000"
        code, details = await _code(
            api.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(queue="nope", tasks=[task_spec()])))
        )
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("spec.queue: unknown queue")
        code, _ = await _code(api.GetJob(pb.GetJobRequest(job_id="job-missing")))
        assert code == grpc.StatusCode.NOT_FOUND
        code, details = await _code(api.ListJobs(pb.ListJobsRequest(page_token="garbage")))
        assert code == grpc.StatusCode.INVALID_ARGUMENT and details.startswith("page_token:")

        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", "n1", "NodeCapacityChanged", capacity("n1")
        )
        request = pb.SubmitJobRequest(
            spec=pb.JobSpec(queue="acme", tasks=[task_spec("w", replicas=2)]), request_id="r-1"
        )
        job = (await api.SubmitJob(request)).job
        assert (await api.SubmitJob(request)).job.id == job.id  # idempotent retry
        other = pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[task_spec("x")]), request_id="r-1")
        code, _ = await _code(api.SubmitJob(other))
        assert code == grpc.StatusCode.ALREADY_EXISTS
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            first = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == job.id, 2)
        for i in range(3):
            await api.SubmitJob(
                pb.SubmitJobRequest(spec=pb.JobSpec(name=f"p{i}", queue="acme", tasks=[task_spec()]))
            )
        page = await api.ListJobs(pb.ListJobsRequest(queue="acme", page_size=2))
        assert len(page.jobs) == 2 and page.next_page_token
        rest = await api.ListJobs(
            pb.ListJobsRequest(queue="acme", page_size=2, page_token=page.next_page_token)
        )
        assert [*page.jobs, *rest.jobs][0].id == job.id and len(rest.jobs) == 2

        # finish the job, then cancelling it is a failed precondition
        t0 = first[0]
        for t in first:
            base = {"task_id": t["task_id"], "job_id": job.id, "node_id": "n1", "attempt": 1}
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "tasks.lifecycle",
                t["task_id"],
                "TaskFinished",
                {**envelope(t["task_id"]), **base, "exit_code": 0},
            )
        await until(lambda: _state(api, job.id, pb.JOB_STATE_SUCCEEDED), what="job succeeded")
        code, _ = await _code(api.CancelJob(pb.CancelJobRequest(job_id=job.id)))
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        before = {
            j.id: (j.state, [t.node_id for t in j.tasks])
            for j in (await api.ListJobs(pb.ListJobsRequest(page_size=100))).jobs
        }
    finally:
        await channel.close()
        await app.stop()

    # restart on the same database: state rebuilt from the store, nothing placed twice
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, schema=cfg.store_schema))
    channel, api = stub(app)
    try:
        after = {
            j.id: (j.state, [t.node_id for t in j.tasks])
            for j in (await api.ListJobs(pb.ListJobsRequest(page_size=100))).jobs
        }
        assert after == before
        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", "n1", "NodeCapacityChanged", capacity("n1")
        )
        await until(lambda: _cycles(app, 3), what="cycles over the rebuilt state")
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            await placements.wait_for(lambda n, r: n == "TaskPlaced", 5)
            target = app.c.scheduler.cycles.count + 3
            await until(lambda: _cycles(app, target), what="more cycles")
            records = await placements.poll()
        placed = [(r["task_id"], r["attempt"]) for n, r, _ in records if n == "TaskPlaced"]
        assert len(placed) == len(set(placed)) == 5, placed
        assert t0["task_id"] in {t for t, _ in placed}
    finally:
        await channel.close()
        await app.stop()


async def test_standby_takes_over_when_the_leader_session_dies_and_reconciliation_heals(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    cfg = config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path)
    first = await started(cfg)
    second = await started(
        config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, schema=cfg.store_schema), leader=False
    )
    ch1, api1 = stub(first)
    ch2, api2 = stub(second)
    try:
        assert not second.is_leader
        await publish(
            kafka_bootstrap, topic_prefix, "capacity.nodes", "n1", "NodeCapacityChanged", capacity("n1")
        )
        job = (
            await api1.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[task_spec()])))
        ).job
        code, _ = await _code(
            api2.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[task_spec()])))
        )
        assert code == grpc.StatusCode.UNAVAILABLE  # the standby does not write
        await until(lambda: _has_job(api2, job.id), what="standby follows the leader")

        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute("SELECT pg_terminate_backend($1)", first.c.leader.backend_pid)
        finally:
            await conn.close()
        await until(lambda: _leads(second), timeout=20, what="standby takes over")
        job2 = (
            await api2.SubmitJob(pb.SubmitJobRequest(spec=pb.JobSpec(queue="acme", tasks=[task_spec()])))
        ).job

        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            got = await placements.wait_for(
                lambda n, r: n == "TaskPlaced" and r["job_id"] in (job.id, job2.id), 2
            )
            # the node reports none of them and a task it should not run: placements are sent again
            # after the grace period and the unknown task is told to stop
            snapshot = {
                **envelope("n1"),
                "node_id": "n1",
                "region": "cn-east",
                "zone": "z1",
                "site": "sh",
                "labels": {},
                "sequence": 1,
                "report_interval_ms": 1000,
                "host": {
                    "cpu_cores": 64,
                    "cpu_utilisation_pct": 0.0,
                    "memory_total_mib": 1,
                    "memory_used_mib": 0,
                },
                "devices": [],
                "task_ids": ["ghost-task"],
            }
            await asyncio.sleep(cfg.reconcile_grace_s)
            snapshot.update(envelope("n1"))
            await publish(kafka_bootstrap, topic_prefix, "node.snapshots", "n1", "NodeSnapshot", snapshot)
            await placements.wait_for(lambda n, r: n == "TaskStopRequested" and r["task_id"] == "ghost-task")
            again = await placements.wait_for(
                lambda n, r: n == "TaskPlaced" and r["task_id"] == got[0]["task_id"], 2
            )
            assert again[1]["devices"] == again[0]["devices"] and again[1]["attempt"] == again[0]["attempt"]
    finally:
        await ch1.close()
        await ch2.close()
        await first.stop()
        await second.stop()


async def _state(api, job_id: str, state: int) -> bool:  # type: ignore[no-untyped-def]
    return (await api.GetJob(pb.GetJobRequest(job_id=job_id))).state == state


async def _has_job(api, job_id: str) -> bool:  # type: ignore[no-untyped-def]
    try:
        await api.GetJob(pb.GetJobRequest(job_id=job_id))
        return True
    except grpc.aio.AioRpcError:
        return False


async def _cycles(app, count: int) -> bool:  # type: ignore[no-untyped-def]
    return app.c.scheduler.cycles.count >= count


async def _leads(app) -> bool:  # type: ignore[no-untyped-def]
    return app.is_leader
