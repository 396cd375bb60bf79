"""Gang topology and CPU pools through the running scheduler on the real broker and PostgreSQL: a
4 x 1-GPU gang lands on the one node that holds it (not over the smaller nodes listed first), a CPU-only
job lands on the GPU-less node, and ExplainJob's first node is the node the gang was placed on."""

from __future__ import annotations

from pathlib import Path

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb

from .helpers import TopicReader, capacity, config, publish, started, stub, task_spec, until

pytestmark = pytest.mark.timeout(120)

NODES = (("a-1", 2), ("a-2", 2), ("a-3", 2), ("b-1", 4), ("cpu-1", 0))


async def _nodes(api: object, count: int) -> bool:
    listed = await api.ListNodes(pb.ListNodesRequest())  # type: ignore[attr-defined]
    return len(listed.nodes) >= count


async def test_gang_on_one_node_cpu_job_on_the_cpu_pool_and_explain_agrees(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    app = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path))
    channel, api = stub(app)
    try:
        for node, gpus in NODES:
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "capacity.nodes",
                node,
                "NodeCapacityChanged",
                capacity(node, gpus=gpus),
            )
        await until(lambda: _nodes(api, len(NODES)), what="capacity view")
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements:
            ddp = pb.JobSpec(name="ddp", queue="acme", tasks=[task_spec("w", replicas=4)])
            gang = (await api.SubmitJob(pb.SubmitJobRequest(spec=ddp))).job
            got = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == gang.id, 4)
            assert {r["node_id"] for r in got} == {"b-1"}

            cpu_task = pb.TaskSpec(
                name="etl",
                replicas=2,
                command="python etl.py",
                duration_s=5.0,
                resources=pb.ResourceRequest(cpu_milli=4000, memory_mib=4096),
            )
            batch = pb.JobSpec(name="etl", queue="acme", min_available=1, tasks=[cpu_task])
            etl = (await api.SubmitJob(pb.SubmitJobRequest(spec=batch))).job
            got = await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == etl.id, 2)
            assert {r["node_id"] for r in got} == {"cpu-1"}

            why = await api.ExplainJob(pb.ExplainJobRequest(job_id=gang.id))
            assert why.top_nodes[0].node_id == "b-1"
            assert why.top_nodes[0].plugin_scores["topology"] > why.top_nodes[1].plugin_scores["topology"]
    finally:
        await channel.close()
        await app.stop()
