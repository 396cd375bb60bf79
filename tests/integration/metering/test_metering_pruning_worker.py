"""The metering worker prunes a finished task's record and charges a late duplicate of it nothing.

A worker of its own (a short task retention, frequent rounds) on the real broker; the task runs at the
current time, since the retention is judged on metering's clock.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from meteringkit import Heartbeats, WorkerProcess, log_digest, now_ms
from test_metering_worker import READY_DEADLINE_S, Stack, _latest_by_node, _topic_exists

from suanli.bus import EventPublisher
from suanli.metering.testing import gpu, job_submitted, task_finished, task_placed, task_started

# Long enough that the first delivery is never judged late on a loaded machine, short enough to wait out.
RETENTION_S = 15
PRUNED_DEADLINE_S = RETENTION_S + 30.0
WINDOWS_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def pruning_worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    log_path = tmp_path_factory.mktemp("metering-pruning") / "worker.log"
    process = WorkerProcess(kafka_bootstrap, f"t-mprune-{secrets.token_hex(3)}", log_path)
    process.env["SUANLI_METERING_TASK_RETENTION_S"] = str(RETENTION_S)
    process.env["SUANLI_METERING_PRUNE_INTERVAL_S"] = "0.5"
    process.start()
    try:
        yield process
    finally:
        process.stop()
        digest = log_digest(log_path.read_text(errors="replace"))
        print(f"--- metering worker log ({log_path}) ---\n{digest}")


@pytest.fixture(scope="module")
async def pruning_stack(kafka_bootstrap: str, pruning_worker: WorkerProcess) -> AsyncIterator[Stack]:
    topics = pruning_worker.topics
    deadline = time.monotonic() + READY_DEADLINE_S
    while not await _topic_exists(kafka_bootstrap, topics.capacity):
        assert time.monotonic() < deadline, "metering worker never created its topics"
        await asyncio.sleep(0.2)
    publisher = EventPublisher(kafka_bootstrap)
    await publisher.start()
    heartbeats = Heartbeats(publisher, topics.snapshots)
    heartbeats.nodes["prune-node"] = {"devices": [gpu(0), gpu(1)]}
    beating = asyncio.create_task(heartbeats.run())
    stack = Stack(kafka_bootstrap, topics, publisher, heartbeats, pruning_worker)
    try:
        reader = stack.reader(topics.capacity)
        await reader.start()
        try:
            await reader.until(
                lambda seen: "prune-node" in _latest_by_node(seen),
                timeout_s=READY_DEADLINE_S,
                what="worker ready",
            )
        finally:
            await reader.stop()
        yield stack
    finally:
        beating.cancel()
        await publisher.stop()


async def run_attempt(stack: Stack, task: str, attempt: int, start: int, end: int) -> list[dict[str, Any]]:
    """The events of one attempt, as scheduling and the agent publish them; returns them for redelivery."""
    p, t, node = stack.publisher, stack.topics, "prune-node"
    sent = [
        (t.jobs, "job-p", "JobSubmitted", job_submitted("job-p", [task], start - 1000)),
        (t.placements, node, "TaskPlaced", task_placed(task, node, start, job_id="job-p", attempt=attempt)),
        (t.lifecycle, task, "TaskStarted", task_started(task, node, start, job_id="job-p", attempt=attempt)),
        (t.lifecycle, task, "TaskFinished", task_finished(task, node, end, job_id="job-p", attempt=attempt)),
    ]
    for topic, key, name, record in sent:
        await p.publish(topic, key, name, record)
    return [{"topic": topic, "key": key, "name": name, "record": record} for topic, key, name, record in sent]


def metered(seen: list[Any], task: str, attempt: int) -> int:
    """GPU milli-seconds metered so far for the task's attempt."""
    return sum(
        w.record["gpu_milli_seconds"]
        for w in seen
        if w.record["task_id"] == task and w.record["attempt"] == attempt
    )


async def test_a_pruned_task_redelivered_is_not_charged_twice(pruning_stack: Stack) -> None:
    stack, task = pruning_stack, f"task-{secrets.token_hex(3)}"
    start = now_ms()
    first = await run_attempt(stack, task, 1, start, start + 1500)
    usage = stack.reader(stack.topics.usage)
    await usage.start()
    prefix = stack.topics.snapshots.removesuffix(".node.snapshots")
    changelog = stack.reader(f"{prefix}.suanli-metering-tasks-changelog", raw=True)
    await changelog.start()
    try:
        # The windows of an attempt add up to exactly allocation x duration: 1,000 milli x 1.5 s.
        seen = await usage.until(
            lambda s: metered(s, task, 1) == 1500, timeout_s=WINDOWS_DEADLINE_S, what="the first attempt"
        )
        charged = sorted(w.record["event_id"] for w in seen if w.record["task_id"] == task)

        def tombstone(records: list[Any]) -> bool:
            return any(r.record["key"] == task.encode() and r.record["value"] is None for r in records)

        await changelog.until(tombstone, timeout_s=PRUNED_DEADLINE_S, what=f"{task} pruned")

        for e in first:  # every event of the finished attempt delivered again, after its record is gone
            await stack.publisher.publish(e["topic"], e["key"], e["name"], e["record"])
        # A second attempt shares the task's partition: once its window is out, the redelivery was handled.
        retry = now_ms()
        await run_attempt(stack, task, 2, retry, retry + 1000)
        seen = await usage.until(
            lambda s: metered(s, task, 2) == 1000, timeout_s=WINDOWS_DEADLINE_S, what="the second attempt"
        )
    finally:
        await usage.stop()
        await changelog.stop()
    again = sorted(
        w.record["event_id"] for w in seen if w.record["task_id"] == task and w.record["attempt"] == 1
    )
    assert again == charged and metered(seen, task, 1) == 1500  # each window once: nothing charged twice
    second = [w.record for w in seen if w.record["task_id"] == task and w.record["attempt"] == 2]
    assert {(w["tenant"], w["queue"]) for w in second} == {("acme", "research")}
    text = stack.worker.log_path.read_text(errors="replace")
    assert f"Started of task {task} ignored: older than the task retention" in text
    assert "pruned 1 finished task records" in text or "finished task records older than" in text
