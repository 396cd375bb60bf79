"""Limits on the real gRPC server: oversize and over-cap requests are INVALID_ARGUMENT naming the field
and the cap; a 1 KB environment on 1,000 replicas is accepted and its JobSubmitted stays small; a tenant
over its pending jobs or submit rate, and a WatchJob past the stream cap, get RESOURCE_EXHAUSTED with
retry advice."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from aiokafka import AIOKafkaConsumer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.contracts import decode
from suanli.rpc import GRPC_RETRY_PUSHBACK_MS, RETRY_AFTER_MS

from .helpers import config, started, stub, until

pytestmark = pytest.mark.timeout(120)


def _job(name: str, request_id: str = "", **task: object) -> pb.SubmitJobRequest:
    task.setdefault("name", "w")
    resources = pb.ResourceRequest(cpu_milli=1000, memory_mib=1024)
    spec = pb.JobSpec(name=name, queue="acme", tasks=[pb.TaskSpec(resources=resources, **task)])  # type: ignore[arg-type]
    return pb.SubmitJobRequest(request_id=request_id, spec=spec)


async def _refused(api: pb_grpc.SchedulerStub, request: pb.SubmitJobRequest) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await api.SubmitJob(request)
    return info.value


async def test_oversize_requests_are_refused_naming_the_field_and_the_cap(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    try:
        cases = [
            (_job("huge", command="x" * 300_000), "request: at most 262144 bytes encoded (got 3000"),
            (
                _job("vars", env={f"V{i}": "1" for i in range(129)}),
                "spec.tasks[0].env: at most 128 variables (got 129)",
            ),
            (
                _job("fat", replicas=1000, env={"BLOB": "x" * 5000}),
                "spec.tasks: replicas x environment at most 4194304 bytes per job (got 5004000)",
            ),
            (
                _job("many", replicas=1001),
                "spec.tasks: at most 1000 tasks per job, replicas included (got 1001)",
            ),
            (_job("Upper"), "spec.name: must be a name of lowercase letters"),
        ]
        labelled = _job("labels")
        labelled.spec.labels.update({f"k{i}": "v" for i in range(65)})
        cases.append((labelled, "spec.labels: at most 64 labels (got 65)"))
        for request, message in cases:
            error = await _refused(api, request)
            assert error.code() is grpc.StatusCode.INVALID_ARGUMENT, error
            assert (error.details() or "").startswith(message), error.details()

        # The 1 KB request x 1,000 replicas of issue 13: accepted, and its event does not copy the env.
        env = {f"VAR_{i:02d}": "x" * 44 for i in range(20)}
        request = _job("wide", replicas=1000, env=env, command="python train.py")
        assert request.ByteSize() < 1200
        job = (await api.SubmitJob(request)).job
        size = await _submitted_size(kafka_bootstrap, f"{topic_prefix}.jobs.events", job.id)
        assert size < 128 * 1024, size  # copied per replica it would pass 1 MB
    finally:
        await channel.close()
        await app.stop()


async def _submitted_size(bootstrap: str, topic: str, job_id: str) -> int:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100
    )
    await consumer.start()
    try:

        async def probe() -> int | None:
            for records in (await consumer.getmany(timeout_ms=200)).values():
                for r in records:
                    name, record = decode(r.value)
                    if name == "JobSubmitted" and record["job_id"] == job_id:
                        assert all(dict(env) for env in record["envs"]) and len(record["tasks"]) == 1000
                        return len(r.value)
            return None

        return await until(probe, 20.0, "the JobSubmitted")
    finally:
        await consumer.stop()


def _retry_after_ms(error: grpc.aio.AioRpcError) -> dict[str, str]:
    trailing = dict(error.trailing_metadata() or ())
    return {k: str(v) for k, v in trailing.items() if k in (RETRY_AFTER_MS, GRPC_RETRY_PUSHBACK_MS)}


async def test_tenant_limits_and_watch_streams_are_resource_exhausted_with_retry_advice(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    cfg = config(
        pg_dsn,
        kafka_bootstrap,
        topic_prefix,
        tmp_path,
        max_pending_jobs=2,
        submit_rate=0.25,
        submit_burst=3,
        max_watch_streams=1,
    )
    app = await started(cfg)  # no capacity published: every job stays PENDING
    channel, api = stub(app)
    try:
        first = (await api.SubmitJob(_job("a", "r-a", command="true"))).job
        second = (await api.SubmitJob(_job("b", command="true"))).job
        error = await _refused(api, _job("c", command="true"))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.details() == "tenant 'acme' has 2 pending jobs, at most 2; retry in 5.0s"
        assert _retry_after_ms(error) == {RETRY_AFTER_MS: "5000", GRPC_RETRY_PUSHBACK_MS: "5000"}
        # A retry of a recorded submit answers with its job, limit or not.
        again = (await api.SubmitJob(_job("a", "r-a", command="true"))).job
        assert again.id == first.id

        # One pending job fewer: the submit passes the pending cap and spends the last token of the burst.
        await api.CancelJob(pb.CancelJobRequest(job_id=first.id, reason="make room"))
        third = (await api.SubmitJob(_job("c", command="true"))).job
        await api.CancelJob(pb.CancelJobRequest(job_id=third.id, reason="make room"))
        error = await _refused(api, _job("d", command="true"))
        assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (error.details() or "").startswith(
            "tenant 'acme' submits faster than 0.25/s (burst 3); retry in"
        )
        advice = int(_retry_after_ms(error)[RETRY_AFTER_MS])
        assert 0 < advice <= 4000

        # WatchJob: one stream per instance here; a second is refused until the first ends. (A watch of
        # a final job ends after its current state, so the stream held open is on the pending job.)
        watching = api.WatchJob(pb.WatchJobRequest(job_id=second.id))
        assert (await watching.read()).event == "Current"
        refused = api.WatchJob(pb.WatchJobRequest(job_id=second.id))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await refused.read()
        assert info.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert info.value.details() == "1 WatchJob streams open on this instance, at most 1; retry in 5.0s"
        watching.cancel()

        async def watch_again() -> bool:
            stream = api.WatchJob(pb.WatchJobRequest(job_id=second.id))
            try:
                return (await stream.read()).event == "Current"
            except grpc.aio.AioRpcError as exc:
                assert exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
                return False
            finally:
                stream.cancel()

        await until(watch_again, 10.0, "a WatchJob once the first stream ended")
    finally:
        await channel.close()
        await app.stop()
