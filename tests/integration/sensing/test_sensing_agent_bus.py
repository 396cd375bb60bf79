"""The agent against the real broker: a simulated fleet reports itself, a real agent runs a placed process,
and garbage on ``placements`` is dead-lettered without stopping the agent; a real replica's task is given
a port and its scraped load is published on ``services.load`` until it is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from suanli import contracts
from suanli.bus import ConsumerSettings, topic_name
from suanli.bus.headers import DLQ_ERROR_MESSAGE, DLQ_ORIGINAL_TOPIC, header
from suanli.contracts.replica_env import MAX_BATCH_ENV, MODEL_ENV, REPLICA_ENV, SERVICE_ID_ENV
from suanli.resources import default_catalogue
from suanli.sensing.adapters.bus import ensure_agent_topics
from suanli.sensing.adapters.nvml import NvmlUnavailable
from suanli.sensing.bootstrap import (
    GPU_UNAVAILABLE_LABEL,
    RealAgent,
    RealAgentConfig,
    build_fleet_host,
    build_real_agent,
)
from suanli.sensing.domain.fleet import parse_fleet
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.entrypoints.runtime import RunSettings, serve
from suanli.sensing.service_layer.host import AgentHost
from suanli.sensing.service_layer.ports import EventSink

DEADLINE_S = 25.0
VLLM_LIKE_SERVER = Path(__file__).with_name("vllm_like_server.py")
FAST = ConsumerSettings(
    fetch_max_wait_ms=100, poll_timeout_ms=100, session_timeout_ms=6_000, heartbeat_interval_ms=300
)

FLEET = {
    "name": "it",
    "seed": 11,
    "regions": [
        {
            "name": name,
            "sites": [
                {
                    "name": f"{name}-s1",
                    "node_groups": [
                        {"name": "gpu", "count": 1, "gpu_model": model, "gpus_per_node": 2},
                        {"name": "cpu", "count": 1, "cpu_cores": 8, "memory_gib": 32},
                    ],
                }
            ],
        }
        for name, model in (("north", "H100 SXM"), ("east", "A100 80GB SXM"), ("south", "T4"))
    ],
}


class Tail:
    """Decoded events of some topics, read from the beginning without a consumer group."""

    def __init__(self, consumer: AIOKafkaConsumer) -> None:
        self._consumer = consumer
        self.events: list[tuple[str, str, dict[str, Any], list[tuple[str, bytes]]]] = []

    def named(self, name: str) -> list[dict[str, Any]]:
        return [record for _, event, record, _ in self.events if event == name]

    async def until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} within {DEADLINE_S}s")
            for records in (await self._consumer.getmany(timeout_ms=100)).values():
                for r in records:
                    try:
                        name, record = contracts.decode(r.value)
                    except contracts.EventDecodeError:
                        name, record = "<undecodable>", {}
                    self.events.append((r.topic, name, record, list(r.headers)))


@contextlib.asynccontextmanager
async def tail(bootstrap: str, *topics: str) -> AsyncIterator[Tail]:
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    await consumer.start()
    try:
        yield Tail(consumer)
    finally:
        await consumer.stop()


@contextlib.asynccontextmanager
async def running(settings: RunSettings, build: Callable[[EventSink], AgentHost]) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, build, stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, DEADLINE_S)


def real_run(bootstrap: str, topic_prefix: str, group: str) -> RunSettings:
    """How a test runs a real agent: fast reports, probes out of the way, its own consumer group."""
    return RunSettings(
        bootstrap,
        f"{topic_prefix}-{group}",
        topic_prefix,
        interval_s=0.5,
        probe_interval_s=30.0,
        consumer=FAST,
    )


def placed(node_id: str, task_id: str, command: list[str]) -> dict[str, Any]:
    envelope = contracts.new_envelope(
        "scheduling/test", node_id, event_id=uuid.uuid4(), occurred_at=dt.datetime.now(dt.UTC)
    )
    return {
        **envelope,
        "job_id": "job-1",
        "task_id": task_id,
        "node_id": node_id,
        "region": "r",
        "site": "s",
        "devices": [],
        "requests": {
            "cpu_milli": 1000,
            "memory_mib": 256,
            "gpu_count": 0,
            "gpu_milli": 1000,
            "gpu_memory_mib": 0,
            "gpu_model": None,
        },
        "attempt": 1,
        "cycle": 1,
        "command": command,
        "env": {"SUANLI_SIM_DURATION_S": "60"},
    }


async def test_simulated_fleet_registers_reports_and_runs_placements(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_agent_topics(kafka_bootstrap, topic_prefix)
    fleet = parse_fleet(FLEET, default_catalogue())
    settings = RunSettings(
        kafka_bootstrap,
        f"{topic_prefix}-fleet",
        topic_prefix,
        interval_s=0.5,
        probe_interval_s=1.0,
        consumer=FAST,
    )
    topics = [
        topic_name(t, topic_prefix)
        for t in ("node.snapshots", "links.measured", "tasks.lifecycle", "usage.samples")
    ]
    async with (
        tail(kafka_bootstrap, *topics) as seen,
        running(
            settings, lambda sink: build_fleet_host(fleet, sink, interval_s=0.5, default_duration_s=300.0)
        ),
    ):
        await seen.until(lambda: len(seen.named("NodeRegistered")) == 6, "NodeRegistered per node")
        registered = {r["node_id"]: r for r in seen.named("NodeRegistered")}
        assert {r["region"] for r in registered.values()} == {"north", "east", "south"}
        assert [d["model"] for d in registered["north-s1-gpu-001"]["devices"]] == ["H100 SXM"] * 2
        assert registered["east-s1-cpu-001"]["cpu_milli"] == 8000

        def snapshots_per_node() -> dict[str, list[dict[str, Any]]]:
            by_node: dict[str, list[dict[str, Any]]] = {}
            for s in seen.named("NodeSnapshot"):
                by_node.setdefault(s["node_id"], []).append(s)
            return by_node

        def two_each() -> bool:
            by_node = snapshots_per_node()
            return len(by_node) == 6 and all(len(v) >= 2 for v in by_node.values())

        await seen.until(two_each, "two snapshots per node")
        for node_id, snapshots in snapshots_per_node().items():
            assert [s["sequence"] for s in snapshots] == sorted(s["sequence"] for s in snapshots)
            assert snapshots[0]["report_interval_ms"] == 500
            assert snapshots[0]["region"] == registered[node_id]["region"]
        t4 = snapshots_per_node()["south-s1-gpu-001"][0]
        assert len(t4["devices"]) == 2 and t4["devices"][0]["memory_total_mib"] == 16 * 1024
        await seen.until(lambda: len(seen.named("LinkMeasured")) >= 6, "links between the 3 sites")
        link = seen.named("LinkMeasured")[0]
        assert link["src_region"] != link["dst_region"] and link["rtt_ms"] > 0

        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False)
        await producer.start()
        try:
            record = placed("north-s1-gpu-001", "sim-task", ["train"])
            record["devices"] = [{"index": 0, "milli": 1000}]
            await producer.send_and_wait(
                topic_name("placements", topic_prefix),
                contracts.encode("TaskPlaced", record),
                key=b"north-s1-gpu-001",
            )
        finally:
            await producer.stop()
        await seen.until(lambda: any(r["task_id"] == "sim-task" for r in seen.named("TaskStarted")), "start")
        await seen.until(
            lambda: any(s["task_ids"] == ["sim-task"] for s in seen.named("NodeSnapshot")),
            "the task in the node's snapshot",
        )
        await seen.until(lambda: any(u["task_id"] == "sim-task" for u in seen.named("UsageSampled")), "usage")


async def test_real_agent_runs_a_placed_process_and_dead_letters_garbage(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_agent_topics(kafka_bootstrap, topic_prefix)
    config = RealAgentConfig(NodeIdentity("real-it", "r", "z", "s"), interval_s=0.5, stop_grace_s=10.0)
    real: list[RealAgent] = []

    def build(sink: EventSink) -> AgentHost:
        real.append(build_real_agent(config, sink))
        return real[0].host

    settings = real_run(kafka_bootstrap, topic_prefix, "real")
    placements = topic_name("placements", topic_prefix)
    topics = [
        topic_name("node.snapshots", topic_prefix),
        topic_name("tasks.lifecycle", topic_prefix),
        f"{placements}.dlq",
    ]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        async with tail(kafka_bootstrap, *topics) as seen, running(settings, build):
            await producer.send_and_wait(placements, b"\x00not avro at all", key=b"real-it")
            exit3 = placed("real-it", "exit-3", [sys.executable, "-c", "import sys; sys.exit(3)"])
            await producer.send_and_wait(placements, contracts.encode("TaskPlaced", exit3), key=b"real-it")
            await seen.until(lambda: bool(seen.named("TaskFinished")), "TaskFinished")
            (finished,) = seen.named("TaskFinished")
            assert (finished["task_id"], finished["node_id"]) == ("exit-3", "real-it")
            assert finished["exit_code"] == 3
            assert [r["task_id"] for r in seen.named("TaskStarted")] == ["exit-3"]
            dead = [h for topic, _, _, h in seen.events if topic.endswith(".dlq")]
            assert len(dead) == 1 and header(dead[0], DLQ_ORIGINAL_TOPIC) == placements
            (registered,) = seen.named("NodeRegistered")
            if isinstance(real[0].gpu, NvmlUnavailable):
                assert registered["labels"][GPU_UNAVAILABLE_LABEL] == real[0].gpu.reason
                assert registered["devices"] == []
            await seen.until(
                lambda: any(s["node_id"] == "real-it" for s in seen.named("NodeSnapshot")), "a snapshot"
            )
    finally:
        await producer.stop()


async def test_forged_placements_are_dead_lettered_and_write_nothing_outside_the_agent(
    kafka_bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    await ensure_agent_topics(kafka_bootstrap, topic_prefix)
    agent_dir = tmp_path / "agent"
    logs = agent_dir / "logs"
    config = RealAgentConfig(
        NodeIdentity("real-hard", "r", "z", "s"), interval_s=0.5, stop_grace_s=10.0, log_dir=logs
    )

    def build(sink: EventSink) -> AgentHost:
        return build_real_agent(config, sink).host

    settings = real_run(kafka_bootstrap, topic_prefix, "hard")
    placements = topic_name("placements", topic_prefix)
    marker = tmp_path / "escaped"
    touch = [sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    traversal = placed("real-hard", "../../etc/x", touch)
    # Routed to this node (its key) but naming another: a forged order, refused rather than skipped.
    misrouted = placed("other-node", "misrouted", touch)
    good = placed("real-hard", "good-1", [sys.executable, "-c", "pass"])
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        topics = [topic_name("tasks.lifecycle", topic_prefix), f"{placements}.dlq"]
        async with tail(kafka_bootstrap, *topics) as seen, running(settings, build):
            for record in (traversal, misrouted, good):
                await producer.send_and_wait(
                    placements, contracts.encode("TaskPlaced", record), key=b"real-hard"
                )
            await seen.until(lambda: bool(seen.named("TaskFinished")), "TaskFinished of the good placement")
            await seen.until(
                lambda: len([t for t, *_ in seen.events if t.endswith(".dlq")]) == 2, "two dead letters"
            )
            dead = [h for topic, _, _, h in seen.events if topic.endswith(".dlq")]
            reasons = sorted(header(h, DLQ_ERROR_MESSAGE) or "" for h in dead)
            assert "keyed for node 'real-hard' names node_id 'other-node'" in reasons[0]
            assert "task_id '../../etc/x': must be 1..253 letters" in reasons[1]
            assert [r["task_id"] for r in seen.named("TaskStarted")] == ["good-1"]
    finally:
        await producer.stop()
    assert not marker.exists()
    outside = [p for p in tmp_path.rglob("*") if agent_dir not in (p, *p.parents)]
    assert outside == []
    # The log and beside it whose it is (the tenant the logs endpoint checks).
    assert sorted(p.name for p in logs.iterdir()) == ["good-1.1.json", "good-1.1.log"]


async def test_a_real_replica_serves_on_its_port_and_its_scraped_load_is_published_until_stopped(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_agent_topics(kafka_bootstrap, topic_prefix)
    config = RealAgentConfig(
        NodeIdentity("real-replica", "r", "z", "s"),
        interval_s=0.5,
        stop_grace_s=5.0,
        replica_host="127.0.0.1",
        replica_interval_s=0.2,
    )

    def build(sink: EventSink) -> AgentHost:
        return build_real_agent(config, sink).host

    settings = real_run(kafka_bootstrap, topic_prefix, "replica")
    placements = topic_name("placements", topic_prefix)
    # Not a simulated model: the speed figures are the documented constants.
    env = {
        SERVICE_ID_ENV: "svc-real",
        REPLICA_ENV: "svc-real-r1",
        MODEL_ENV: "org/real-7b",
        MAX_BATCH_ENV: "8",
    }
    replica = placed("real-replica", "replica-1", [sys.executable, str(VLLM_LIKE_SERVER), "2", "1"])
    replica["env"] = env
    topics = [topic_name("tasks.lifecycle", topic_prefix), topic_name("services.load", topic_prefix)]
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        async with tail(kafka_bootstrap, *topics) as seen, running(settings, build):
            await producer.send_and_wait(
                placements, contracts.encode("TaskPlaced", replica), key=b"real-replica"
            )
            await seen.until(lambda: bool(seen.named("ReplicaLoadReported")), "a load report")
            first = seen.named("ReplicaLoadReported")[0]
            assert (first["service_id"], first["replica_id"], first["region"]) == (
                "svc-real",
                "svc-real-r1",
                "r",
            )
            assert first["producer"] == "sensing/real-replica" and first["address"].startswith("127.0.0.1:")
            assert (first["in_flight"], first["queued"], first["max_batch"]) == (2, 1, 8)
            assert (first["arrived_total"], first["finished_total"]) == (3, 0)
            assert first["kv_free_tokens"] == 800  # half of 100 blocks of 16 tokens
            assert first["prefill_tokens_per_s"] > 0 and first["decode_step_s"] > 0

            # The address reported is the one the replica serves at: a request there is counted.
            async with aiohttp.ClientSession() as http:
                body = {"context_tokens": 100, "max_tokens": 20, "latency_s": 0.8}
                async with http.post(f"http://{first['address']}/generate", json=body) as answer:
                    assert (await answer.json())["replica_id"] == "svc-real-r1"

            def served() -> list[dict[str, Any]]:
                return [r for r in seen.named("ReplicaLoadReported") if r["finished_total"] == 1]

            await seen.until(lambda: bool(served()), "a report counting the request")
            after = served()[0]
            assert (after["context_tokens_total"], after["generated_tokens_total"]) == (100, 20)
            assert after["recent_latency_s"] == 0.8 and after["arrived_total"] == 4

            stop = {
                **contracts.new_envelope(
                    "scheduling/test", "replica-1", event_id=uuid.uuid4(), occurred_at=dt.datetime.now(dt.UTC)
                ),
                "job_id": "job-1",
                "task_id": "replica-1",
                "node_id": "real-replica",
                "attempt": 1,
                "reason": "scaled in",
            }
            await producer.send_and_wait(
                placements, contracts.encode("TaskStopRequested", stop), key=b"real-replica"
            )
            await seen.until(lambda: bool(seen.named("TaskFailed")), "the replica's end")
            assert seen.named("TaskFailed")[0]["kind"] == "KILLED"
            reports = len(seen.named("ReplicaLoadReported"))
            quiet_until = time.monotonic() + 1.0  # five report intervals
            await seen.until(lambda: time.monotonic() > quiet_until, "a second of quiet")
            assert len(seen.named("ReplicaLoadReported")) == reports
    finally:
        await producer.stop()
