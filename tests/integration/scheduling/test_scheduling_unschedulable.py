"""Impossible jobs on the real broker and PostgreSQL: a GPU model nobody knows is INVALID_ARGUMENT at
submit; a task no node could hold even empty waits as UNSCHEDULABLE with the detail, the same every cycle,
and is placed once a node that can hold it joins; a possible job over its quota still says QUOTA_EXCEEDED."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.scheduling.entrypoints.app import SchedulingApp

from .helpers import TopicReader, capacity, config, publish, started, stub, task_spec, until

pytestmark = pytest.mark.timeout(120)

# A10 nodes have one GPU each (as in deploy/fleets/small.yaml); acme may use 8 A10s, initech 4.
QUEUES = """
queues:
  - name: acme
    quotas:
      gpu:A10: 8000
  - name: initech
    quotas:
      gpu:A10: 4000
"""


def _a10_job(name: str, queue: str, tasks: int, gpus: int, models: tuple[str, ...] = ("A10",)) -> pb.JobSpec:
    task = task_spec("w", gpu_count=gpus, replicas=tasks)
    task.resources.gpu_models.extend(models)
    return pb.JobSpec(name=name, queue=queue, tasks=[task])


async def _node(bootstrap: str, prefix: str, node_id: str, gpus: int) -> None:
    record = capacity(node_id, gpus=gpus, model="A10", region="tokyo")
    await publish(bootstrap, prefix, "capacity.nodes", node_id, "NodeCapacityChanged", record)


async def _nodes(api: pb_grpc.SchedulerStub, count: int) -> bool:
    return len((await api.ListNodes(pb.ListNodesRequest())).nodes) >= count


async def _reason(api: pb_grpc.SchedulerStub, job_id: str, code: str) -> pb.Explanation | None:
    answer = await api.ExplainJob(pb.ExplainJobRequest(job_id=job_id))
    return answer if answer.pending_reason.code == code else None


async def _reasons_over_cycles(
    app: SchedulingApp, api: pb_grpc.SchedulerStub, job_ids: list[str], cycles: int
) -> list[dict[str, tuple[str, str]]]:
    """Each job's (code, message) after each of the next `cycles` cycles."""
    seen = []
    for _ in range(cycles):
        target = app.c.scheduler.cycles.count + 1

        async def cycled(target: int = target) -> bool:
            return app.c.scheduler.cycles.count >= target

        await until(cycled, what="a scheduling cycle")
        reasons = {}
        for job_id in job_ids:
            got = (await api.GetJob(pb.GetJobRequest(job_id=job_id))).pending_reason
            reasons[job_id] = (got.code, got.message)
        seen.append(reasons)
    return seen


async def test_unknown_models_are_refused_and_impossible_tasks_wait_as_unschedulable_until_a_node_joins(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, queues_yaml=QUEUES))
    channel, api = stub(app)
    try:
        for node_id in ("tok-a10-1", "tok-a10-2"):
            await _node(kafka_bootstrap, topic_prefix, node_id, gpus=1)
        await until(lambda: _nodes(api, 2), what="capacity view")

        # A model neither the catalogue nor a node knows: refused, naming the field and what exists.
        for model, hint in (("Quantum9000", ""), ("A100-SXM4-80GB", " (did you mean 'A100 80GB SXM'?)")):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await api.SubmitJob(pb.SubmitJobRequest(spec=_a10_job("bad", "acme", 1, 1, (model,))))
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            details = info.value.details() or ""
            assert details.startswith(
                f"spec.tasks[0].resources.gpu_models[0]: unknown GPU model {model!r}{hint}; "
                "known models: H200, "
            ), details
            assert "A10, " in details and "T4" in details
        assert not (await api.ListJobs(pb.ListJobsRequest())).jobs  # nothing was recorded

        # 4 tasks x 4 A10 where A10 nodes have one GPU: was QUOTA_EXCEEDED (16000 > 4000) forever.
        x4 = (await api.SubmitJob(pb.SubmitJobRequest(spec=_a10_job("x4", "initech", 4, 4)))).job
        # 2 x 4 A10 within acme's quota: possible once nodes with 4 A10s exist.
        big = (await api.SubmitJob(pb.SubmitJobRequest(spec=_a10_job("big", "acme", 2, 4)))).job
        explained = await until(lambda: _reason(api, x4.id, "UNSCHEDULABLE"), what="UNSCHEDULABLE")
        details = dict(explained.pending_reason.details)
        assert (details["task"], details["resource"], details["requested"], details["largest"]) == (
            f"{x4.id}-w-0",
            "gpu",
            "4",
            "1",
        )
        assert details["node"] == "tok-a10-1"
        assert explained.pending_reason.message == (
            f"task {x4.id}-w-0 fits no node of the fleet, even an empty one: asks for 4 A10 GPUs on one "
            "node; the largest A10 node has 1 (tok-a10-1) (regions tokyo); it waits for a node that can "
            "hold it to join"
        )
        assert [(r.region, r.verdict) for r in explained.regions] == [
            ("tokyo", "asks for 4 A10 GPUs on one node; the largest A10 node has 1 (tok-a10-1)")
        ]
        assert json.loads(details["regions"]) == [
            {"region": "tokyo", "verdict": explained.regions[0].verdict}
        ]

        # The same reason cycle after cycle: no flipping between quota and placement.
        seen = await _reasons_over_cycles(app, api, [x4.id, big.id], cycles=4)
        assert all(s == seen[0] for s in seen), seen
        assert {code for code, _ in seen[0].values()} == {"UNSCHEDULABLE"}

        # Nodes with 4 A10s join: big is placed there; x4 is possible now, and initech's quota is short.
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            for node_id in ("tok-a10x4-1", "tok-a10x4-2"):
                await _node(kafka_bootstrap, topic_prefix, node_id, gpus=4)
            placed = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == big.id, 2)
            assert {r["node_id"] for r in placed} == {"tok-a10x4-1", "tok-a10x4-2"}
            assert all(len(r["devices"]) == 4 for r in placed)
        quota = await until(lambda: _reason(api, x4.id, "QUOTA_EXCEEDED"), what="QUOTA_EXCEEDED")
        assert quota.pending_reason.message == (
            "quota of queue initech exceeded for gpu:A10: requested 16000, available 4000"
        )
        await api.CancelJob(pb.CancelJobRequest(job_id=x4.id, reason="test done"))
    finally:
        await channel.close()
        await app.stop()
