"""Helpers of the scheduling integration tests: a service per test (own schema, own topics), node
capacity published like metering does, a reader of what the scheduler published, deadline polling."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import grpc
from aiokafka import AIOKafkaConsumer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.bus import EventPublisher, topic_name
from suanli.contracts import decode, new_envelope
from suanli.infra.polling import until
from suanli.scheduling.entrypoints.app import SchedulingApp
from suanli.scheduling.entrypoints.settings import SchedulingSettings

T = TypeVar("T")

QUEUES = """
priority_classes: {high: 100, low: 0}
queues:
  - name: acme
    quotas:
      gpu:A100: 64000
"""


def config(
    pg_dsn: str,
    bootstrap: str,
    prefix: str,
    tmp: Path,
    schema: str | None = None,
    queues_yaml: str = QUEUES,
    **overrides: Any,
) -> SchedulingSettings:
    queues = tmp / "queues.yaml"
    queues.write_text(queues_yaml)
    # An explicit (empty) environment: the test's values only, whatever the process has set.
    return SchedulingSettings.load(
        {},
        dsn=pg_dsn,
        bootstrap=bootstrap,
        queues_path=queues,
        store_schema=schema or f"sch_{secrets.token_hex(4)}",
        topic_prefix=prefix,
        listen="127.0.0.1:0",
        interval_s=0.2,
        reconcile_grace_s=3.0,
        topic_check_s=2.0,
        standby_poll_s=0.2,
        **overrides,
    )


async def started(cfg: SchedulingSettings, leader: bool = True) -> SchedulingApp:
    app = SchedulingApp(cfg)
    await app.start()
    if leader:
        await until(lambda: _leads(app), what="leadership")
    return app


async def _leads(app: SchedulingApp) -> bool:
    return app.is_leader and bool(app.c.projection.queues)


def stub(app: SchedulingApp) -> tuple[grpc.aio.Channel, pb_grpc.SchedulerStub]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    return channel, pb_grpc.SchedulerStub(channel)


def envelope(subject: str) -> dict[str, Any]:
    return new_envelope("test", subject, event_id=uuid.uuid4(), occurred_at=datetime.now(UTC))


def capacity(
    node_id: str, gpus: int = 4, model: str = "A100", region: str = "cn-east", zone: str = "z1"
) -> dict[str, Any]:
    res = {
        "cpu_milli": 64000,
        "memory_mib": 262144,
        "gpu_count": gpus,
        "gpu_milli": gpus * 1000,
        "gpu_memory_mib": gpus * 81920,
    }
    return {
        **envelope(node_id),
        "node_id": node_id,
        "region": region,
        "zone": zone,
        "site": f"{region}-site",
        "total": res,
        "allocatable": res,
        "used": {**res, "cpu_milli": 0, "memory_mib": 0, "gpu_count": 0, "gpu_milli": 0, "gpu_memory_mib": 0},
        "cu_total": 1.0,
        "cu_allocatable": 1.0,
        "cu_used": 0.0,
        "devices": [
            {
                "index": i,
                "uuid": f"GPU-{node_id}-{i}",
                "model": model,
                "device_class": "a100",
                "cu": 1.0,
                "memory_total_mib": 81920,
                "memory_free_mib": 81920,
                "milli_free": 1000,
                "healthy": True,
            }
            for i in range(gpus)
        ],
    }


async def publish(
    bootstrap: str, prefix: str, topic: str, key: str, name: str, record: dict[str, Any]
) -> None:
    async with EventPublisher(bootstrap) as bus:
        await bus.publish(topic_name(topic, prefix), key, name, record)


async def publish_raw(bootstrap: str, prefix: str, topic: str, value: bytes) -> None:
    async with EventPublisher(bootstrap) as bus:
        await bus.publish_raw(topic_name(topic, prefix), b"k", value, [])


class TopicReader:
    """Reads a topic from the start, decoding every record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
        )
        self.records: list[tuple[str, dict[str, Any], dict[str, bytes]]] = []

    async def __aenter__(self) -> TopicReader:
        await self.consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()

    async def poll(self) -> list[tuple[str, dict[str, Any], dict[str, bytes]]]:
        batches = await self.consumer.getmany(timeout_ms=200)
        for records in batches.values():
            for r in records:
                headers = dict(r.headers or ())
                try:
                    name, record = decode(r.value)
                except Exception:
                    name, record = "<undecodable>", {}
                self.records.append((name, record, headers))
        return self.records

    async def wait_for(
        self, match: Callable[[str, dict[str, Any]], bool], count: int = 1, timeout: float = 20.0
    ) -> list[dict[str, Any]]:
        async def probe() -> list[dict[str, Any]] | None:
            found = [r for n, r, _ in await self.poll() if match(n, r)]
            return found if len(found) >= count else None

        return await until(probe, timeout, f"{count} matching record(s)")


def task_spec(name: str = "w", gpu_count: int = 1, gpu_milli: int = 1000, replicas: int = 1) -> pb.TaskSpec:
    return pb.TaskSpec(
        name=name,
        replicas=replicas,
        command="python train.py",
        args=["--epochs", "1"],
        env={"A": "1"},
        duration_s=5.0,
        resources=pb.ResourceRequest(
            cpu_milli=1000, memory_mib=1024, gpu_count=gpu_count, gpu_milli=gpu_milli, gpu_memory_mib=4096
        ),
    )


async def node_seen(
    api: pb_grpc.SchedulerStub, bootstrap: str, prefix: str, node_id: str, gpus: int = 4
) -> None:
    """Publish a node's capacity as metering would, and wait until the scheduler's view lists it."""
    await publish(
        bootstrap, prefix, "capacity.nodes", node_id, "NodeCapacityChanged", capacity(node_id, gpus)
    )

    async def listed() -> bool:
        return any(n.id == node_id for n in (await api.ListNodes(pb.ListNodesRequest())).nodes)

    await until(listed, what=f"node {node_id} in the capacity view")
