"""Metering's use cases over its real batch adapters, with dicts for tables and lists for topics.

No faust and no broker: a topic acknowledges each send at once (or fails it, when told to), so the
tests see exactly what a batch publishes and what it writes, and in which order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli.contracts import decode
from suanli.metering.adapters import records
from suanli.metering.adapters.batch import FACTS, OutputTopics, TableBatch
from suanli.metering.adapters.decoded import Checkpoints, DecodedStates
from suanli.metering.domain import MeteringPolicy, TaskFact
from suanli.metering.service_layer.metering import Metering
from suanli.metering.testing import (
    gpu,
    job_submitted,
    node_snapshot,
    task_finished,
    task_placed,
    task_started,
)
from suanli.resources import default_catalogue


class Table(dict[bytes, bytes]):
    """A table whose changelog is the list of keys written through ``table[key] = value``."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.changelog: list[bytes] = []

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.changelog.append(key)
        super().__setitem__(key, value)


@dataclass
class Topic:
    name: str
    sent: list[tuple[bytes, bytes]] = field(default_factory=list)
    failures: list[Exception] = field(default_factory=list)  # raised by the next sends' acknowledgements

    async def send(self, *, key: bytes, value: bytes, headers: Any = None) -> asyncio.Future[None]:
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.failures:
            ack.set_exception(self.failures.pop(0))
        else:
            self.sent.append((key, value))
            ack.set_result(None)
        return ack

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        return [decode(value) for _, value in self.sent]

    def facts(self) -> list[TaskFact]:
        return [FACTS.loads(value) for _, value in self.sent]


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


@dataclass
class Counters:
    """The task table's counters, kept as numbers (`TaskCounters`)."""

    pruned_rows: int = 0
    late: list[str] = field(default_factory=list)

    def pruned(self, rows: int) -> None:
        self.pruned_rows += rows

    def late_fact(self, kind: str) -> None:
        self.late.append(kind)


DAY_MS = 86_400_000


class Harness:
    def __init__(
        self,
        now_ms: int,
        *,
        lost_after: int = 3,
        task_retention_ms: int = DAY_MS,
        checkpoints: Checkpoints | None = None,
    ) -> None:
        self.clock = Clock(now_ms)
        self.counters = Counters()
        self.metering = Metering(
            clock=self.clock,
            catalogue=default_catalogue(),
            policy=MeteringPolicy(),
            lost_after=lost_after,
            task_retention_ms=task_retention_ms,
            counters=self.counters,
        )
        self.nodes, self.tasks = Table("nodes"), Table("tasks")
        self.capacity, self.status = Topic("capacity"), Topic("status")
        self.usage, self.facts = Topic("usage"), Topic("facts")
        self.topics = OutputTopics(self.capacity, self.status, self.usage, self.facts)
        self.decoded = DecodedStates(checkpoints=checkpoints)

    def begin(self) -> TableBatch:
        return TableBatch(self.nodes, self.tasks, self.topics, self.decoded)

    async def run(self, use: Callable[[TableBatch], Any]) -> Any:
        """One batch: the use case, then the commit; returns what the use case returned."""
        batch = self.begin()
        result = use(batch)
        await batch.commit()
        return result

    async def feed_facts(self) -> None:
        """Hand every fact sent so far to the task side, as the task-facts agent would."""
        facts, self.facts.sent = self.facts.facts(), []
        for fact in facts:
            await self.run(lambda b, f=fact: self.metering.apply_fact(f, b))


def statuses(topic: Topic, node_id: str) -> list[str]:
    return [r["status"] for _, r in topic.events() if r["node_id"] == node_id]


def by_name(events: list[tuple[str, Mapping[str, Any]]], name: str) -> list[Mapping[str, Any]]:
    return [r for n, r in events if n == name]


def metric_points(reader: InMemoryMetricReader) -> dict[tuple[str, tuple[tuple[str, Any], ...]], Any]:
    """Each data point ``reader`` holds, by metric name and sorted attributes: its value."""
    data = reader.get_metrics_data()
    return {
        (m.name, tuple(sorted(p.attributes.items()))): p.value
        for rm in (data.resource_metrics if data else ())
        for sm in rm.scope_metrics
        for m in sm.metrics
        for p in m.data.data_points
    }


def everyone(_: str) -> bool:
    """Owns every key (one worker holding every partition)."""
    return True


async def run_task(h: Harness, task: str, start: int, end: int, *, attempt: int = 1) -> None:
    """A node that knows its devices, then the task's job, placement, start and end through the facts."""
    snapshot = node_snapshot("n1", start - 2000, sequence=start, devices=[gpu(0), gpu(1)])
    await h.run(lambda b: h.metering.apply_snapshot(snapshot, b))
    placed = task_placed(task, "n1", start - 1000, attempt=attempt, devices=[(1, 500)])
    await h.run(lambda b: h.metering.apply_placement(records.allocation_of(placed), b))
    facts = [
        *records.job_facts(job_submitted("job-1", [task], start - 60_000)),
        *records.payer_of(placed),
        records.lifecycle_fact("TaskStarted", task_started(task, "n1", start, attempt=attempt)),
        records.lifecycle_fact("TaskFinished", task_finished(task, "n1", end, attempt=attempt)),
    ]
    await h.run(lambda b: h.metering.forward_facts([f for f in facts if f is not None], b))
    await h.feed_facts()


def usage_ids(h: Harness, task: str) -> list[str]:
    return [r["event_id"] for _, r in h.usage.events() if r["task_id"] == task]
