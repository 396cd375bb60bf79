"""Bounded state on the real store: finished jobs past the retention leave memory but are still answered
from their streams; the leader writes snapshots; a scheduler started on the store begins from the latest
snapshot (it holds a job whose events are gone from the table) and goes on from its position."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.eventstore import PostgresEventStore
from suanli.scheduling.service_layer.projection import Projection, Retention
from suanli.scheduling.service_layer.projection_snapshot import SNAPSHOT_FORMAT, SNAPSHOT_NAME, decode_state

from .helpers import config, started, stub, task_spec, until

pytestmark = pytest.mark.timeout(120)


def _submit(n: int) -> pb.SubmitJobRequest:
    return pb.SubmitJobRequest(
        spec=pb.JobSpec(name=f"j{n}", queue="acme", tasks=[task_spec()]), request_id=f"r{n}"
    )


async def _snapshot_at(conn: asyncpg.Connection, schema: str) -> int:
    """The position of the latest snapshot once it covers every event (0 until then)."""
    row = await conn.fetchrow(
        f"SELECT (SELECT max(position) FROM {schema}.snapshots WHERE name = $1 AND format = $2) AS snap,"
        f" (SELECT max(position) FROM {schema}.events) AS last",
        SNAPSHOT_NAME,
        SNAPSHOT_FORMAT,
    )
    return int(row["snap"]) if row["snap"] is not None and row["snap"] == row["last"] else 0


async def _restored_equals_folded(
    store: PostgresEventStore, conn: asyncpg.Connection, position: int, retention: Retention
) -> None:
    """The snapshot at ``position`` caught up from the store equals the store folded from position 0."""
    row = await conn.fetchval(
        f"SELECT state FROM {store.schema}.snapshots WHERE name = $1 AND position = $2",
        SNAPSHOT_NAME,
        position,
    )
    restored = Projection.restored(decode_state(bytes(row)), retention)
    tail = await store.read_all(position)
    assert tail, "the snapshot should leave a tail to fold"
    restored.apply_all(tail)
    folded = Projection(retention)
    folded.apply_all(await store.read_all())
    assert restored.state() == folded.state()
    assert restored.index.page(100).jobs == folded.index.page(100).jobs


async def test_evicted_jobs_are_answered_from_the_store_and_a_new_scheduler_starts_from_the_snapshot(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    # No node: the jobs wait, and a cancel makes one final at once. Two finished jobs are kept.
    cfg = config(
        pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, max_finished_jobs=2, snapshot_interval_s=0.2
    )
    schema = cfg.store_schema
    conn = await asyncpg.connect(pg_dsn)
    app = await started(cfg)
    channel, api = stub(app)
    try:
        ids = [(await api.SubmitJob(_submit(n))).job.id for n in range(6)]
        await api.CancelJob(pb.CancelJobRequest(job_id=ids[0], reason="not needed"))
        before = await api.GetJob(pb.GetJobRequest(job_id=ids[0]))  # still in memory
        described = await api.DescribeJob(pb.DescribeJobRequest(job_id=ids[0]))
        for job_id in ids[1:4]:
            await api.CancelJob(pb.CancelJobRequest(job_id=job_id, reason="not needed"))
        assert set(app.c.projection.jobs) == set(ids[2:])  # jobs 0 and 1 evicted

        assert await api.GetJob(pb.GetJobRequest(job_id=ids[0])) == before
        again = await api.DescribeJob(pb.DescribeJobRequest(job_id=ids[0]))
        assert (again.job, again.events, again.attempts) == (before, described.events, described.attempts)
        assert (await api.SubmitJob(_submit(0))).job == before  # a retry of its submit
        retried = await api.CancelJob(pb.CancelJobRequest(job_id=ids[0], reason="again"))
        assert retried == before
        listed = await api.ListJobs(pb.ListJobsRequest(page_size=2))
        rest = await api.ListJobs(pb.ListJobsRequest(page_size=2, page_token=listed.next_page_token))
        assert [j.id for j in (*listed.jobs, *rest.jobs)] == ids[2:]
        watched = [e async for e in api.WatchJob(pb.WatchJobRequest(job_id=ids[1]))]
        assert [(e.event, e.state) for e in watched] == [("Current", pb.JOB_STATE_CANCELLED)]

        first = await until(lambda: _snapshot_at(conn, schema), what="a snapshot of every event")
        ids.append((await api.SubmitJob(_submit(6))).job.id)  # a tail past that snapshot
        await _restored_equals_folded(app.c.store, conn, first, cfg.retention())
        snapshot = await until(lambda: _snapshot_at(conn, schema), what="a snapshot of the tail too")
    finally:
        await channel.close()
        await app.stop()

    # Job 3 is kept in the snapshot; with its events gone only a start from the snapshot still knows it.
    await conn.execute(f"DELETE FROM {schema}.events WHERE stream = $1", f"job-{ids[3]}")
    successor = await started(cfg)
    channel, api = stub(successor)
    try:
        assert successor.c.projection.position == snapshot
        third = await api.GetJob(pb.GetJobRequest(job_id=ids[3]))
        assert third.state == pb.JOB_STATE_CANCELLED
        assert await api.GetJob(pb.GetJobRequest(job_id=ids[0])) == before
        code = None
        try:
            await api.GetJob(pb.GetJobRequest(job_id="job-000000000000"))
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
        assert code == grpc.StatusCode.NOT_FOUND
        # It goes on from the snapshot's position: the next cancel evicts job 2, answered from its stream.
        await api.CancelJob(pb.CancelJobRequest(job_id=ids[4], reason="not needed"))
        assert successor.c.projection.position > snapshot
        assert set(successor.c.projection.jobs) == {ids[3], ids[4], ids[5], ids[6]}
        assert (await api.GetJob(pb.GetJobRequest(job_id=ids[2]))).state == pb.JOB_STATE_CANCELLED
    finally:
        await channel.close()
        await successor.stop()
        await conn.close()
