"""Serving with the scheduler on the real broker and PostgreSQL: a service's replicas become inference
jobs placed by the scheduler, follow scaling, are replaced when their job fails, are cancelled on delete;
garbage on the consumed topics goes to their dead-letter topics and the service keeps answering."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from click.testing import Result
from scheduling.helpers import (
    TopicReader,
    capacity,
    config,
    envelope,
    publish,
    publish_raw,
    started,
    until,
)
from typer.testing import CliRunner

from suanli.api.serving.v1 import serving_pb2 as pb
from suanli.api.serving.v1 import serving_pb2_grpc as pb_grpc
from suanli.bus.headers import DLQ_ERROR_MESSAGE, DLQ_REASON
from suanli.cli.main import app
from suanli.contracts import default_registry, sample_records
from suanli.contracts.replica_env import REPLICA_ENV
from suanli.infra.broker import BrokerProcess
from suanli.serving.entrypoints.service import RunningServing, running
from suanli.serving.entrypoints.settings import ServingSettings

pytestmark = pytest.mark.timeout(180)

RUNNER = CliRunner(
    env={"COLUMNS": "240", "SUANLI_TOKEN": None, "SUANLI_CONFIG": None, "SUANLI_CONTEXT": None}
)


async def cli(*args: str) -> Result:
    """Run `suanli ARGS` off the event loop (the services under test run on it)."""
    return await asyncio.to_thread(RUNNER.invoke, app, list(args))


GPU = "A100 80GB SXM"
QUEUES = f"""
priority_classes: {{serving: 500, batch: 100}}
queues:
  - name: acme
    quotas:
      gpu:{GPU}: 64000
"""
SPEC = f"""
name: chat
queue: acme
model: llama-2-7b
resources: {{gpu: 0.5, gpu_models: [{GPU}], cpu: "2", memory: 8Gi}}
command: python -m server
min_replicas: 2
max_replicas: 4
target: {{concurrency: 8}}
regions: [cn-east, cn-west]
"""


@dataclass
class Stack:
    api: pb_grpc.ServingStub
    serving: RunningServing
    bootstrap: str
    prefix: str
    schema: str


@asynccontextmanager
async def stack(pg_dsn: str, bootstrap: str, prefix: str, tmp: Path) -> AsyncIterator[Stack]:
    scheduler = await started(config(pg_dsn, bootstrap, prefix, tmp, queues_yaml=QUEUES))
    try:
        for node, region in (("n1", "cn-east"), ("n2", "cn-west")):
            record = capacity(node, gpus=2, model=GPU, region=region)
            await publish(bootstrap, prefix, "capacity.nodes", node, "NodeCapacityChanged", record)
        schema = f"srv_{secrets.token_hex(4)}"
        settings = ServingSettings.load(
            {},
            kafka_bootstrap=bootstrap,
            pg_dsn=pg_dsn,
            topic_prefix=prefix,
            db_schema=schema,
            listen="127.0.0.1:0",
            watch_poll_s=0.1,
        )
        async with running(settings) as serving:
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{serving.grpc_port}")
            try:
                yield Stack(pb_grpc.ServingStub(channel), serving, bootstrap, prefix, schema)
            finally:
                await channel.close()
    finally:
        await scheduler.stop()


async def _placed(s: Stack, count: int) -> pb.Service | None:
    service = await s.api.GetService(pb.GetServiceRequest(tenant="acme", name="chat"))
    placed = [r for r in service.replicas if r.state in ("placed", "running")]
    return service if len(placed) == count == len(service.replicas) else None


def _replica_placements(records: list[tuple[str, dict[str, Any], dict[str, bytes]]]) -> list[dict[str, Any]]:
    return [r for n, r, _ in records if n == "TaskPlaced" and REPLICA_ENV in (r.get("env") or {})]


async def test_replicas_are_placed_scaled_replaced_and_cancelled(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    async with (
        stack(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path) as s,
        TopicReader(kafka_bootstrap, f"{topic_prefix}.services.events") as events,
        TopicReader(kafka_bootstrap, f"{topic_prefix}.placements") as placements,
        TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.events") as jobs,
    ):
        created = await s.api.CreateService(pb.CreateServiceRequest(spec=SPEC))
        assert (created.tenant, created.queue, created.desired_replicas) == ("acme", "acme", 2)

        # Two inference jobs, one per allowed region (spread), placed by the scheduler.
        service = await until(lambda: _placed(s, 2), 30, "two replicas placed")
        assert sorted(r.region for r in service.replicas) == ["cn-east", "cn-west"]
        assert all(r.guaranteed and r.job_id for r in service.replicas)
        first = await placements.wait_for(lambda n, r: n == "TaskPlaced" and REPLICA_ENV in r["env"], 2)
        assert {p["node_id"] for p in first} == {"n1", "n2"}
        [submitted] = await jobs.wait_for(
            lambda n, r: n == "JobSubmitted" and r["job_id"] == service.replicas[0].job_id
        )
        assert (submitted["kind"], submitted["preemptible"], submitted["priority_class"]) == (
            "INFERENCE",
            False,
            "serving",
        )
        assert submitted["principal"]["subject"] == "serving"
        await events.wait_for(lambda n, r: n == "ServiceCreated" and r["name"] == "chat")
        [scaled] = await events.wait_for(lambda n, r: n == "ServiceScaled" and r["reason"] == "created")
        assert (scaled["from_replicas"], scaled["to_replicas"]) == (0, 2)
        await events.wait_for(lambda n, r: n == "ReplicaPlaced", 2)
        # The same history is the service's stream in its own schema.
        rows = await s.serving.store.read(f"service-{created.service_id}")
        assert [e.event_name for e in rows[:2]] == ["ServiceCreated", "ServiceScaled"]

        # The agent starts a replica's task: the replica runs.
        started_on = first[0]
        started = {
            **envelope(started_on["task_id"]),
            "task_id": started_on["task_id"],
            "job_id": started_on["job_id"],
            "node_id": started_on["node_id"],
            "attempt": started_on["attempt"],
            "device_indices": [0],
            "pid": 4242,
        }
        await publish(
            kafka_bootstrap, topic_prefix, "tasks.lifecycle", started_on["task_id"], "TaskStarted", started
        )
        await events.wait_for(lambda n, r: n == "ReplicaStarted" and r["job_id"] == started_on["job_id"])

        # Its node is lost under it: the scheduler requeues the job (a restart, not a failure) and places
        # it again; the replica waits for it (ReplicaStopped, not final) instead of being replaced.
        lost = {**started, **envelope(started_on["task_id"]), "reason": "node lost", "kind": "NODE_LOST"}
        lost = {k: v for k, v in lost.items() if k not in ("device_indices", "pid")} | {"exit_code": None}
        await publish(
            kafka_bootstrap, topic_prefix, "tasks.lifecycle", started_on["task_id"], "TaskFailed", lost
        )
        [requeued] = await events.wait_for(lambda n, r: n == "ReplicaStopped" and not r["final"], timeout=30)
        assert (requeued["job_id"], requeued["cause"], requeued["attempt"]) == (
            started_on["job_id"],
            "requeued",
            2,
        )
        await placements.wait_for(lambda n, r: n == "TaskPlaced" and r["job_id"] == started_on["job_id"], 2)
        service = await until(lambda: _placed(s, 2), 30, "the requeued replica placed again")
        again = next(r for r in service.replicas if r.job_id == started_on["job_id"])
        assert again.attempt == 2

        # Scale to 3: a third, preemptible (surge) replica.
        watch = s.api.WatchService(pb.WatchServiceRequest(tenant="acme", name="chat"))
        current = await watch.read()
        assert (current.event, current.service.desired_replicas) == ("Current", 2)
        scaled_up = await s.api.ScaleService(pb.ScaleServiceRequest(tenant="acme", name="chat", replicas=3))
        assert scaled_up.desired_replicas == 3
        changed = await asyncio.wait_for(watch.read(), 10)
        assert (changed.event, changed.service.desired_replicas) == ("Changed", 3)
        watch.cancel()
        service = await until(lambda: _placed(s, 3), 30, "three replicas placed")
        assert sum(not r.guaranteed for r in service.replicas) == 1
        with pytest.raises(grpc.aio.AioRpcError) as out_of_range:
            await s.api.ScaleService(pb.ScaleServiceRequest(tenant="acme", name="chat", replicas=9))
        assert out_of_range.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert out_of_range.value.details() == "replicas: 9 is outside min_replicas..max_replicas (2..4)"

        # A replica's task fails on its node: the scheduler fails the job, serving replaces the replica.
        victim = service.replicas[0]
        # Its newest placement (a requeued job has one per attempt).
        placed = [
            p
            for p in _replica_placements(await placements.poll())
            if (p["job_id"], p["attempt"]) == (victim.job_id, victim.attempt)
        ][-1]
        failed = {
            **envelope(placed["task_id"]),
            "task_id": placed["task_id"],
            "job_id": victim.job_id,
            "node_id": placed["node_id"],
            "attempt": placed["attempt"],
            "reason": "CUDA error: an illegal memory access",
            "kind": "DEVICE_ERROR",
            "exit_code": 1,
        }
        await publish(
            kafka_bootstrap, topic_prefix, "tasks.lifecycle", placed["task_id"], "TaskFailed", failed
        )
        [replaced] = await events.wait_for(
            lambda n, r: n == "ServiceScaled" and r["reason"] == "replica-replaced", timeout=30
        )
        assert (replaced["replica_id"], replaced["from_replicas"], replaced["to_replicas"]) == (
            victim.replica_id,
            3,
            3,
        )
        [stopped] = await events.wait_for(lambda n, r: n == "ReplicaStopped" and r["final"])
        assert (stopped["replica_id"], stopped["cause"], stopped["final"]) == (
            victim.replica_id,
            "failed",
            True,
        )
        service = await until(lambda: _placed(s, 3), 30, "the replacement placed")
        assert victim.replica_id not in {r.replica_id for r in service.replicas}

        # Delete: every replica's job is cancelled.
        live_jobs = {r.job_id for r in service.replicas}
        deleted = await s.api.DeleteService(pb.DeleteServiceRequest(tenant="acme", name="chat"))
        assert deleted.state == "deleted"
        cancelled = await jobs.wait_for(lambda n, r: n == "JobCancelled" and r["job_id"] in live_jobs, 3)
        assert {c["job_id"] for c in cancelled} == live_jobs
        assert (await s.api.GetService(pb.GetServiceRequest(tenant="acme", name="chat"))).replicas == []
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await s.api.ScaleService(pb.ScaleServiceRequest(tenant="acme", name="chat", replicas=2))
        assert gone.value.code() is grpc.StatusCode.NOT_FOUND


async def test_bad_specs_unknown_services_and_garbage_on_the_consumed_topics(
    pg_dsn: str, kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    async with stack(pg_dsn, kafka_bootstrap, topic_prefix, tmp_path) as s:
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await s.api.CreateService(
                pb.CreateServiceRequest(spec=SPEC.replace("min_replicas: 2", "min_replicas: 2\nreplica: 3"))
            )
        assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert bad.value.details() == "spec.replica: unknown field"
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await s.api.GetService(pb.GetServiceRequest(tenant="globex", name="chat"))
        assert missing.value.code() is grpc.StatusCode.NOT_FOUND

        # Not Avro; and a well-formed event that does not belong on jobs.replies.
        stray = {**sample_records(default_registry().current("QueueDeleted"))[0], **envelope("q")}
        for topic in ("jobs.replies", "placements"):
            await publish_raw(kafka_bootstrap, topic_prefix, topic, b"not avro")
        await publish(kafka_bootstrap, topic_prefix, "jobs.replies", "q", "QueueDeleted", stray)
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.jobs.replies.dlq") as dlq:
            dead = await dlq.wait_for(lambda n, r: True, 2, timeout=30)
            reasons = sorted(h[DLQ_REASON].decode() for _, _, h in dlq.records)
            assert reasons == ["decode", "handler"], dead
            [handler] = [h for _, _, h in dlq.records if h[DLQ_REASON] == b"handler"]
            assert handler[DLQ_ERROR_MESSAGE].decode() == "QueueDeleted is not an event of jobs.replies"
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.placements.dlq") as dlq:
            await dlq.wait_for(lambda n, r: True, timeout=30)

        # Still serving: a service is created (with the CLI) and its replicas placed.
        spec = tmp_path / "chat.yaml"
        spec.write_text(SPEC)
        addr = ("--serving", f"127.0.0.1:{s.serving.grpc_port}")
        created = await cli("service", "create", "-f", str(spec), *addr)
        assert created.exit_code == 0, created.output
        await until(lambda: _placed(s, 2), 30, "replicas placed after the garbage")
        listed = await cli("service", "list", "-t", "acme", "-o", "json", *addr)
        assert listed.exit_code == 0, listed.output
        [item] = json.loads(listed.stdout)["services"]
        assert (item["name"], item["placed_replicas"], json.loads(item["spec"])["model"]) == (
            "chat",
            2,
            "llama-2-7b",
        )
        # A replica's load reports (every interval, as replicas send them) show in GetService.
        placed = await s.api.GetService(pb.GetServiceRequest(tenant="acme", name="chat"))
        replica = placed.replicas[0]
        report = {
            **envelope(placed.service_id),
            "service_id": placed.service_id,
            "replica_id": replica.replica_id,
            "region": replica.region,
            "address": "10.0.0.7:8000",
            "in_flight": 3,
            "queued": 1,
            "max_batch": 16,
            "prefill_tokens_per_s": 3000.0,
            "decode_step_s": 0.05,
            "recent_latency_s": 2.5,
            "prefill_backlog_s": 0.0,
            "kv_free_tokens": 9000,
            "interval_s": 2.0,
        }

        async def loaded() -> pb.Replica | None:
            fresh = {**report, **envelope(placed.service_id)}
            await publish(
                kafka_bootstrap,
                topic_prefix,
                "services.load",
                placed.service_id,
                "ReplicaLoadReported",
                fresh,
            )
            got = await s.api.GetService(pb.GetServiceRequest(tenant="acme", name="chat"))
            found = next(r for r in got.replicas if r.replica_id == replica.replica_id)
            return found if found.HasField("load") else None

        with_load = await until(loaded, 30, "the load report in GetService")
        assert (with_load.load.in_flight, with_load.load.queued, with_load.load.address) == (
            3,
            1,
            "10.0.0.7:8000",
        )
        await publish_raw(kafka_bootstrap, topic_prefix, "services.load", b"not avro")
        await publish(
            kafka_bootstrap,
            topic_prefix,
            "services.load",
            "x",
            "ReplicaLoadReported",
            {**report, "max_batch": 0},
        )
        async with TopicReader(kafka_bootstrap, f"{topic_prefix}.services.load.dlq") as dlq:
            await dlq.wait_for(lambda n, r: True, 2, timeout=30)
            messages = sorted(h[DLQ_ERROR_MESSAGE].decode() for _, _, h in dlq.records)
            assert messages == [
                "8 bytes is shorter than the 10-byte header",
                "max_batch: must be 1 or more (got 0)",
            ]

        shown = await cli("service", "get", "chat", "-t", "acme", *addr)
        assert shown.exit_code == 0 and "2 of 2 replicas placed" in shown.output, shown.output
        refused = await cli("service", "scale", "chat", "-t", "acme", "--replicas", "9", *addr)
        assert refused.exit_code == 3, refused.output
        assert "INVALID_ARGUMENT: replicas: 9 is outside min_replicas..max_replicas (2..4)" in refused.output
        deleted = await cli("service", "delete", "chat", "-t", "acme", "-o", "name", *addr)
        assert (deleted.exit_code, deleted.stdout.strip()) == (0, "service/chat"), deleted.output
        watched = await cli("service", "watch", "chat", "-t", "acme", *addr)
        assert watched.exit_code == 0 and watched.output.startswith("Current  acme/chat deleted"), (
            watched.output
        )


async def test_after_the_broker_restarts_empty_the_consumed_topics_are_read_again(
    broker: BrokerProcess, pg_dsn: str
) -> None:
    # Its own broker (the session's is shared). Outcome on the new broker: garbage written there is
    # dead-lettered, which only a consumer reading the recreated topics does.
    bootstrap, prefix = broker.bootstrap, "restart"
    settings = ServingSettings.load(
        {},
        kafka_bootstrap=bootstrap,
        pg_dsn=pg_dsn,
        topic_prefix=prefix,
        db_schema=f"srv_{secrets.token_hex(4)}",
        listen="127.0.0.1:0",
    )
    async with running(settings) as serving:
        await publish_raw(bootstrap, prefix, "jobs.events", b"not avro")
        async with TopicReader(bootstrap, f"{prefix}.jobs.events.dlq") as dlq:
            await dlq.wait_for(lambda n, r: True, timeout=30)
        broker.stop()
        broker.start()  # the same port, nothing kept

        async def rebuilt() -> bool:  # both consumers: the scheduler's topics and the load reports
            return serving.consumer.rebuilds == serving.load_consumer.rebuilds == 1

        await until(rebuilt, 30, "the consumers replaced")
        await publish_raw(bootstrap, prefix, "jobs.events", b"not avro either")
        async with TopicReader(bootstrap, f"{prefix}.jobs.events.dlq") as dlq:
            await dlq.wait_for(lambda n, r: True, timeout=30)
            assert [h[DLQ_REASON] for _, _, h in dlq.records] == [b"decode"]  # the new broker's only
