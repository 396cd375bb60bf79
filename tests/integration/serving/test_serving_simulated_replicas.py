"""Serving, the scheduler and a simulated fleet on the real broker and PostgreSQL: a service's replica runs
on the fleet as a simulated replica reporting its load; killed, it is replaced (or restarted) and the new
one reports. ~25 s on the 2-core VM (the whole chain: agents joining their group, the scheduler's cycles),
in the default run: a replica failure healed is part of issue 12's acceptance."""

from __future__ import annotations

import secrets
from pathlib import Path

import grpc
import pytest
from scheduling.helpers import TopicReader, capacity, config, publish, started
from sensing.test_sensing_agent_bus import FAST
from sensing.test_sensing_agent_bus import running as fleet_running

from suanli.api.serving.v1 import serving_pb2 as pb
from suanli.api.serving.v1 import serving_pb2_grpc as pb_grpc
from suanli.contracts.replica_env import REPLICA_ENV
from suanli.resources import default_catalogue
from suanli.sensing.bootstrap import build_fleet_host
from suanli.sensing.domain.fleet import parse_fleet
from suanli.sensing.domain.placement import StopOrder
from suanli.sensing.entrypoints.runtime import RunSettings
from suanli.sensing.service_layer.host import AgentHost
from suanli.sensing.service_layer.ports import EventSink
from suanli.serving.entrypoints.service import running
from suanli.serving.entrypoints.settings import ServingSettings

pytestmark = [pytest.mark.timeout(240)]

GPU = "A100 80GB SXM"
QUEUES = f"""
priority_classes: {{serving: 500}}
queues:
  - name: acme
    quotas:
      gpu:{GPU}: 8000
"""
SPEC = f"""
name: sim-chat
queue: acme
model: llama-2-7b
resources: {{gpu: 0.5, gpu_models: [{GPU}], cpu: "2", memory: 8Gi}}
command: python -m server
min_replicas: 1
max_replicas: 2
target: {{concurrency: 8}}
regions: [cn-east]
"""
FLEET = {
    "name": "srv-sim",
    "seed": 5,
    "regions": [
        {
            "name": "cn-east",
            "sites": [
                {
                    "name": "cn-east-s1",
                    "node_groups": [{"name": "gpu", "count": 2, "gpu_model": GPU, "gpus_per_node": 1}],
                }
            ],
        }
    ],
}


async def test_a_killed_simulated_replica_is_replaced_and_the_new_one_reports(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    fleet = parse_fleet(FLEET, default_catalogue())
    scheduler = await started(config(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path, queues_yaml=QUEUES))
    hosts: list[AgentHost] = []

    def build(sink: EventSink) -> AgentHost:
        hosts.append(
            build_fleet_host(fleet, sink, interval_s=0.5, default_duration_s=300.0, replica_interval_s=0.3)
        )
        return hosts[-1]

    agents = RunSettings(
        kafka_bootstrap,
        f"{topic_prefix}-fleet",
        topic_prefix,
        interval_s=0.5,
        probe_interval_s=30.0,
        consumer=FAST,
    )
    settings = ServingSettings.load(
        {},
        kafka_bootstrap=kafka_bootstrap,
        pg_dsn=pg_dsn,
        topic_prefix=topic_prefix,
        db_schema=f"srv_{secrets.token_hex(4)}",
        listen="127.0.0.1:0",
        watch_poll_s=0.1,
    )
    try:
        for node in fleet.nodes:
            record = capacity(node.identity.node_id, gpus=1, model=GPU, region="cn-east")
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "capacity.nodes",
                node.identity.node_id,
                "NodeCapacityChanged",
                record,
            )
        async with (
            fleet_running(agents, build),
            running(settings) as serving,
            TopicReader(kafka_bootstrap, f"{topic_prefix}.services.load") as loads,
            TopicReader(kafka_bootstrap, f"{topic_prefix}.services.events") as events,
        ):
            async with grpc.aio.insecure_channel(f"127.0.0.1:{serving.grpc_port}") as channel:
                created = await pb_grpc.ServingStub(channel).CreateService(pb.CreateServiceRequest(spec=SPEC))
            [first] = await loads.wait_for(lambda n, r: n == "ReplicaLoadReported", timeout=60)
            assert (first["service_id"], first["region"]) == (created.service_id, "cn-east")
            assert first["address"].startswith("127.0.0.1:") and first["max_batch"] == 16
            victim = first["replica_id"]
            await events.wait_for(
                lambda n, r: n == "ReplicaStarted" and r["replica_id"] == victim, timeout=30
            )

            # Killed on its node (the task ends without the scheduler asking): its server closes at once.
            [agent] = [
                a
                for a in hosts[0].agents.values()
                for r in a.table.runs()
                if r.placement.env.get(REPLICA_ENV) == victim
            ]
            [run] = [r for r in agent.table.runs() if r.placement.env.get(REPLICA_ENV) == victim]
            p = run.placement
            assert await agent.stop(
                StopOrder(p.task_id, p.job_id, p.node_id, p.attempt, "killed", preempted=False)
            )
            await events.wait_for(
                lambda n, r: n == "ReplicaStopped" and r["replica_id"] == victim, timeout=60
            )

            # Serving replaces it (or the scheduler restarts it): a replica starts again and reports
            # from a new server.
            def reports_anew(n: str, r: dict[str, object]) -> bool:
                return n == "ReplicaLoadReported" and r["address"] != first["address"]

            [again] = await loads.wait_for(reports_anew, timeout=90)
            assert again["service_id"] == created.service_id
    finally:
        await scheduler.stop()
