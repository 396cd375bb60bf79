"""The scheduling service on the real broker and PostgreSQL: gRPC in, placements out, lifecycle back."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .helpers import (
    TopicReader,
    capacity,
    config,
    envelope,
    publish,
    publish_raw,
    started,
    stub,
    task_spec,
    until,
)

pytestmark = pytest.mark.timeout(120)


async def test_submit_places_gang_and_fractions_and_watch_follows_lifecycle(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    try:
        for node in ("n1", "n2"):
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "capacity.nodes",
                node,
                "NodeCapacityChanged",
                capacity(node, gpus=4),
            )
        await until(lambda: _nodes(api, 2), what="capacity view")
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            # one whole GPU: TaskPlaced with the devices, argv, env and duration the agent needs
            single = (
                await api.SubmitJob(
                    pb.SubmitJobRequest(spec=pb.JobSpec(name="one", queue="acme", tasks=[task_spec("w")]))
                )
            ).job
            [placed] = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == single.id)
            assert placed["node_id"] in ("n1", "n2") and len(placed["devices"]) == 1
            assert placed["devices"][0]["milli"] == 1000
            assert placed["command"] == ["python", "train.py", "--epochs", "1"]
            assert placed["duration_s"] == 5.0 and placed["requests"]["gpu_memory_mib"] == 4096
            assert placed["env"]["A"] == "1" and placed["attempt"] == 1

            # a gang of 4 x 1 GPU: all placed, on distinct devices
            gang = (
                await api.SubmitJob(
                    pb.SubmitJobRequest(
                        spec=pb.JobSpec(name="gang", queue="acme", tasks=[task_spec("g", replicas=4)])
                    )
                )
            ).job
            got = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == gang.id, 4)
            devices = {(r["node_id"], d["index"]) for r in got for d in r["devices"]}
            assert len(devices) == 4

            # a gang that cannot fit (8 x 1 GPU, 3 left) places nothing and says why
            big = (
                await api.SubmitJob(
                    pb.SubmitJobRequest(
                        spec=pb.JobSpec(name="big", queue="acme", tasks=[task_spec("b", replicas=8)])
                    )
                )
            ).job
            why = await until(lambda: _explained(api, big.id), what="pending reason")
            assert why.pending_reason.code in (
                "GANG_INCOMPLETE",
                "BLOCKED_BY_HIGHER_PRIORITY",
                "NO_NODE_FITS",
            )
            await api.CancelJob(pb.CancelJobRequest(job_id=big.id, reason="too big"))

            # 3 x 300 milli share devices without passing 1000 on any
            shared = [
                (
                    await api.SubmitJob(
                        pb.SubmitJobRequest(
                            spec=pb.JobSpec(name=f"s{i}", queue="acme", tasks=[task_spec("s", gpu_milli=300)])
                        )
                    )
                ).job.id
                for i in range(3)
            ]
            frac = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] in shared, 3)
            assert all(r["devices"][0]["milli"] == 300 for r in frac)
            per_device: dict[tuple[str, int], int] = {}
            for _, r, _ in placements.records:
                if r.get("job_id") in {single.id, gang.id, *shared}:
                    for d in r["devices"]:
                        key = (r["node_id"], d["index"])
                        per_device[key] = per_device.get(key, 0) + d["milli"]
            assert max(per_device.values()) <= 1000
            assert len({(r["node_id"], r["devices"][0]["index"]) for r in frac}) < 3  # they share

            # lifecycle: Pending -> Running -> Succeeded over WatchJob
            stream = api.WatchJob(pb.WatchJobRequest(job_id=single.id))
            first = await stream.read()
            assert first.event == "Current"
            base = {
                "task_id": placed["task_id"],
                "job_id": single.id,
                "node_id": placed["node_id"],
                "attempt": 1,
            }
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "tasks.lifecycle",
                placed["task_id"],
                "TaskStarted",
                {**envelope(placed["task_id"]), **base, "device_indices": [0], "pid": 7},
            )
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "tasks.lifecycle",
                placed["task_id"],
                "TaskFinished",
                {**envelope(placed["task_id"]), **base, "exit_code": 0},
            )
            states = [first.state]
            while (event := await stream.read()) is not grpc.aio.EOF:
                states.append(event.state)
            assert states[0] == pb.JOB_STATE_PENDING and states[-1] == pb.JOB_STATE_SUCCEEDED
            assert pb.JOB_STATE_RUNNING in states
            assert states.index(pb.JOB_STATE_RUNNING) < states.index(pb.JOB_STATE_SUCCEEDED)

            # garbage on the consumed topics goes to their DLQs and the service keeps serving
            await publish_raw(kafka_bootstrap, topic_prefix, "tasks.lifecycle", b"not avro")
            await publish_raw(kafka_bootstrap, topic_prefix, "capacity.nodes", b"\xc3\x01garbage")
            for topic in ("tasks.lifecycle", "capacity.nodes"):
                async with TopicReader(kafka_bootstrap, f"{topic_prefix}.{topic}.dlq") as dlq:
                    await dlq.wait_for(lambda n, r: True)
            assert (await api.GetJob(pb.GetJobRequest(job_id=single.id))).state == pb.JOB_STATE_SUCCEEDED
    finally:
        await channel.close()
        await app.stop()


async def _nodes(api, count: int) -> bool:  # type: ignore[no-untyped-def]
    return len((await api.ListNodes(pb.ListNodesRequest())).nodes) >= count


async def _explained(api, job_id: str):  # type: ignore[no-untyped-def]
    answer = await api.ExplainJob(pb.ExplainJobRequest(job_id=job_id))
    return answer if answer.pending_reason.code else None
