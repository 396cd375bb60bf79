"""The metering worker as its integration tests run it: a `suanli serve metering` subprocess, snapshots
sent as agents send them, and topics read from the beginning.

A plain module (the tests folders are not packages), imported by the metering test modules.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from servekit import ServeProcess

from suanli.bus import EventPublisher
from suanli.contracts import decode
from suanli.metering.entrypoints.topics import MeteringTopics
from suanli.metering.testing import node_snapshot

INTERVAL_MS = 500
DEADLINE_S = 15.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class Received:
    name: str
    record: dict[str, Any]
    headers: list[tuple[str, bytes]]


class TopicReader:
    """Reads a topic from the beginning, without a consumer group, until a condition holds."""

    def __init__(self, bootstrap: str, topic: str, *, raw: bool = False) -> None:
        self.topic = topic
        self.raw = raw
        self.seen: list[Received] = []
        self._consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)

    async def start(self) -> None:
        await self._consumer.start()
        await self._consumer.topics()  # metadata, so the partitions are known
        parts = self._consumer.partitions_for_topic(self.topic) or set()
        assert parts, f"{self.topic} does not exist"
        self._consumer.assign([TopicPartition(self.topic, p) for p in parts])
        await self._consumer.seek_to_beginning()

    async def stop(self) -> None:
        await self._consumer.stop()

    async def until(
        self, done: Callable[[list[Received]], bool], *, timeout_s: float = DEADLINE_S, what: str = ""
    ) -> list[Received]:
        deadline = time.monotonic() + timeout_s
        while not done(self.seen):
            if time.monotonic() > deadline:
                names = [(r.name, r.record.get("node_id") or r.record.get("task_id")) for r in self.seen]
                raise AssertionError(f"timed out on {self.topic} waiting for {what}; saw {names}")
            batches = await self._consumer.getmany(timeout_ms=200)
            for messages in batches.values():
                for m in messages:
                    headers = list(m.headers or ())
                    if self.raw:
                        self.seen.append(Received("", {"key": m.key, "value": m.value}, headers))
                    else:
                        name, record = decode(m.value)
                        self.seen.append(Received(name, record, headers))
        return self.seen


@dataclass
class Heartbeats:
    """Sends a snapshot for every live node each interval, as sensing agents do."""

    publisher: EventPublisher
    topic: str
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    sequence: int = 0
    last_sent_ms: dict[str, int] = field(default_factory=dict)

    async def beat(self) -> None:
        self.sequence += 1
        for node_id, spec in list(self.nodes.items()):
            at = now_ms()
            record = node_snapshot(node_id, at, sequence=self.sequence, interval_ms=INTERVAL_MS, **spec)
            await self.publisher.publish(self.topic, node_id, "NodeSnapshot", record)
            self.last_sent_ms[node_id] = at

    async def run(self) -> None:
        while True:
            await self.beat()
            await asyncio.sleep(INTERVAL_MS / 1000)  # the agent's cadence, not a wait for an outcome


class WorkerProcess(ServeProcess):
    """`suanli serve metering`, stoppable and restartable under the same app id."""

    def __init__(
        self, bootstrap: str, prefix: str, log_path: Path, settings: Mapping[str, str] | None = None
    ) -> None:
        self.topics = MeteringTopics(prefix)
        env = {
            **(settings or {}),
            "SUANLI_METERING_INTERVAL_S": "0.1",
            # The tests' tasks run at fixed times of 2025-01-01; facts that old about attempts not held
            # would be refused as late (pruned) under the default retention of a day.
            "SUANLI_METERING_TASK_RETENTION_S": str(10 * 365 * 86_400),
        }
        super().__init__("metering", bootstrap, prefix, log_path, env, stop_timeout_s=20)
        self.group = f"{prefix}.suanli-metering"  # its consumer group (MeteringSettings.group_id)


_DIGEST_MARKS = (
    "Worker]: Starting",
    "Worker]: Ready",
    "group",
    "Recovery]: ",
    "WARNING",
    "ERROR",
    "Traceback",
)


def log_digest(text: str, limit: int = 12_000) -> str:
    """What explains a failure: group joins, recovery and ready per start, warnings and errors."""
    lines = [line for line in text.splitlines() if any(mark in line for mark in _DIGEST_MARKS)]
    return "\n".join(lines)[-limit:]
