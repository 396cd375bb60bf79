"""The metering worker on the real broker: capacity, liveness, usage windows and dead letters.

One worker (a subprocess running `suanli serve metering`) serves the whole module, because a faust
worker takes several seconds to join its group; each test uses its own node and task ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from meteringkit import (
    INTERVAL_MS,
    Heartbeats,
    Received,
    TopicReader,
    WorkerProcess,
    log_digest,
    now_ms,
)

from suanli.bus import EventPublisher
from suanli.bus.headers import header
from suanli.clock import from_ms
from suanli.metering.entrypoints.topics import MeteringTopics
from suanli.metering.testing import (
    gpu,
    job_submitted,
    ms,
    node_snapshot,
    task_finished,
    task_placed,
    task_started,
)
from suanli.telemetry.tracing import continued

READY_DEADLINE_S = 45.0
# A restarted worker is ready in ~20 s on an idle machine: Tansu still names the stopped member as group
# leader after its LeaveGroup, so the first join waits out a rebalance before the new member leads.
RESTART_DEADLINE_S = 120.0


@dataclass
class Stack:
    bootstrap: str
    topics: MeteringTopics
    publisher: EventPublisher
    heartbeats: Heartbeats
    worker: WorkerProcess

    def reader(self, topic: str, *, raw: bool = False) -> TopicReader:
        return TopicReader(self.bootstrap, topic, raw=raw)


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    log_path = tmp_path_factory.mktemp("metering") / "worker.log"
    process = WorkerProcess(kafka_bootstrap, f"t-metering-{secrets.token_hex(3)}", log_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()
        digest = log_digest(log_path.read_text(errors="replace"))
        print(f"--- metering worker log ({log_path}) ---\n{digest}")


@pytest.fixture(scope="module")
async def stack(kafka_bootstrap: str, worker: WorkerProcess) -> AsyncIterator[Stack]:
    topics = worker.topics
    # The worker creates its topics first; producing before that would auto-create them with the
    # broker's default partition count, which the worker refuses.
    deadline = time.monotonic() + READY_DEADLINE_S
    while not await _topic_exists(kafka_bootstrap, topics.capacity):
        assert time.monotonic() < deadline, "metering worker never created its topics"
        await asyncio.sleep(0.2)
    publisher = EventPublisher(kafka_bootstrap)
    await publisher.start()
    heartbeats = Heartbeats(publisher, topics.snapshots)
    heartbeats.nodes["ready-probe"] = {"devices": [gpu(0)]}
    task = asyncio.create_task(heartbeats.run())
    stack = Stack(kafka_bootstrap, topics, publisher, heartbeats, worker)
    try:
        # The first view the worker publishes says it has joined its group and is consuming.
        reader = stack.reader(topics.capacity)
        await reader.start()
        try:
            await reader.until(lambda seen: len(seen) > 0, timeout_s=READY_DEADLINE_S, what="worker ready")
        finally:
            await reader.stop()
        yield stack
    finally:
        task.cancel()
        await publisher.stop()


async def _topic_exists(bootstrap: str, topic: str) -> bool:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        return topic in await consumer.topics()
    finally:
        await consumer.stop()


async def _naming(stack: Stack, topic: str, task: str) -> list[dict[str, Any]]:
    """The raw records of ``topic`` whose key or value names ``task`` (read for 2 s: a topic has no end)."""
    reader = stack.reader(topic, raw=True)
    await reader.start()
    try:
        with contextlib.suppress(AssertionError):
            await reader.until(lambda s: False, timeout_s=2.0)
    finally:
        await reader.stop()
    named = task.encode()
    return [r.record for r in reader.seen if named in (r.record["key"] or b"") + (r.record["value"] or b"")]


async def _trail(stack: Stack, task: str) -> str:
    """Every record naming ``task`` on the topics a task's charge passes through, to explain a stall."""
    t = stack.topics
    prefix = t.snapshots.removesuffix(".node.snapshots")
    lines = []
    for topic in (t.jobs, t.lifecycle, t.placements, t.facts, f"{prefix}.suanli-metering-tasks-changelog"):
        found = await _naming(stack, topic, task)
        lines.append(f"{topic}: {len(found)} record(s) naming {task}")
        lines.extend(f"  {record['value'][:160]!r}" for record in found)
    return "\n".join(lines)


async def _capacity_known(stack: Stack, node: str) -> None:
    """Until the worker has published ``node``'s capacity view: its devices are known to price placements."""
    capacity = stack.reader(stack.topics.capacity)
    await capacity.start()
    try:
        await capacity.until(lambda s: node in _latest_by_node(s), what=f"{node} capacity")
    finally:
        await capacity.stop()


async def _usage(stack: Stack, done: Callable[[list[Received]], bool], what: str) -> list[Received]:
    """The usage topic read until ``done`` holds."""
    reader = stack.reader(stack.topics.usage)
    await reader.start()
    try:
        return await reader.until(done, what=what)
    finally:
        await reader.stop()


def _latest_by_node(seen: list[Received]) -> dict[str, dict[str, Any]]:
    return {r.record["node_id"]: r.record for r in seen}


async def test_snapshots_become_capacity_views_in_cu(stack: Stack) -> None:
    stack.heartbeats.nodes["cap-h200"] = {"devices": [gpu(0), gpu(1)], "cpu_cores": 32, "region": "cn-north"}
    stack.heartbeats.nodes["cap-a100"] = {
        "devices": [gpu(i, "NVIDIA A100-SXM4-80GB", 81_920) for i in range(4)],
        "cpu_cores": 64,
        "region": "cn-east",
    }
    reader = stack.reader(stack.topics.capacity)
    await reader.start()
    try:
        seen = await reader.until(
            lambda s: {"cap-h200", "cap-a100"} <= _latest_by_node(s).keys(), what="both capacity views"
        )
    finally:
        await reader.stop()
    views = _latest_by_node(seen)
    h200, a100 = views["cap-h200"], views["cap-a100"]
    assert h200["cu_total"] == pytest.approx(2 * 989.5 + 3.2)
    assert h200["total"]["gpu_milli"] == 2000
    assert [d["device_class"] for d in h200["devices"]] == ["h200", "h200"]
    assert a100["cu_total"] == pytest.approx(4 * 312.0 + 6.4)
    assert a100["region"] == "cn-east"
    assert all(d["milli_free"] == 1000 for d in a100["devices"])
    records = [r for r in seen if r.record["node_id"] == "cap-h200"]
    assert header(records[0].headers, "event-name") == "NodeCapacityChanged"


async def test_a_burst_of_snapshots_is_viewed_in_order_with_each_node_building_on_its_last_state(
    stack: Stack,
) -> None:
    # A whole fleet at once, as a batch (or a few); one node twice in the same burst.
    token = secrets.token_hex(2)
    nodes = {f"burst-{token}-{i:02d}": 1 + i % 4 for i in range(40)}
    twice = next(iter(nodes))
    at = now_ms()
    snapshots = [
        (node, node_snapshot(node, at, sequence=1, devices=[gpu(g, "Tesla T4", 15_360) for g in range(n)]))
        for node, n in nodes.items()
    ]
    later = node_snapshot(twice, at + 1, sequence=2, devices=[gpu(g, "Tesla T4", 15_360) for g in range(3)])
    snapshots.append((twice, later))
    t = stack.topics
    await asyncio.gather(*(stack.publisher.publish(t.snapshots, n, "NodeSnapshot", r) for n, r in snapshots))

    capacity, status = stack.reader(t.capacity), stack.reader(t.status)
    await capacity.start()
    await status.start()
    try:
        seen = await capacity.until(
            lambda s: (
                nodes.keys() <= _latest_by_node(s).keys()
                and _latest_by_node(s)[twice]["total"]["gpu_milli"] == 3000
            ),
            what="every burst node's view, and the second one of the node sent twice",
        )
        ready = await status.until(
            lambda s: nodes.keys() <= {r.record["node_id"] for r in s}, what="every burst node READY"
        )
    finally:
        await capacity.stop()
        await status.stop()
    views = _latest_by_node(seen)
    for node, gpus in nodes.items():
        expected = 3 if node == twice else gpus
        assert views[node]["cu_total"] == pytest.approx(expected * 65.0 + 6.4), node
    # The node's views in the order of its snapshots (one key, one partition, in order). Both snapshots in
    # one fetched batch fold to the newer one (only each node's newest snapshot of a batch is viewed), so
    # the first view may be skipped, never reordered.
    views_of_twice = [r.record["total"]["gpu_milli"] for r in seen if r.record["node_id"] == twice]
    assert views_of_twice in ([3000], [1000, 3000]), views_of_twice
    # The second snapshot saw the state the first one left: READY once, not once per snapshot.
    assert [r.record["status"] for r in ready if r.record["node_id"] == twice] == ["READY"]


async def test_silent_node_is_lost_within_three_intervals_and_ready_when_back(stack: Stack) -> None:
    stack.heartbeats.nodes["live-a"] = {"devices": [gpu(0)]}
    reader = stack.reader(stack.topics.status)
    await reader.start()
    try:

        def status_of(node: str) -> Callable[[list[Received]], list[str]]:
            return lambda s: [r.record["status"] for r in s if r.record["node_id"] == node]

        await reader.until(lambda s: "READY" in status_of("live-a")(s), what="live-a READY")
        del stack.heartbeats.nodes["live-a"]
        silent_since = stack.heartbeats.last_sent_ms["live-a"]
        seen = await reader.until(lambda s: "LOST" in status_of("live-a")(s), what="live-a LOST")
        lost_seen_ms = now_ms()
        lost = next(
            r.record for r in seen if r.record["node_id"] == "live-a" and r.record["status"] == "LOST"
        )
        assert lost["previous_status"] == "READY"
        # Declared at 3 intervals after the last snapshot arrived; noticed within a timer tick or so.
        assert lost_seen_ms - silent_since < 3 * INTERVAL_MS + 1500
        assert lost["last_seen_at"] <= from_ms(silent_since)
        stack.heartbeats.nodes["live-a"] = {"devices": [gpu(0)]}
        await reader.until(lambda s: status_of("live-a")(s)[-1:] == ["READY"], what="live-a READY again")
    finally:
        await reader.stop()


async def test_task_lifecycle_is_metered_as_allocation_times_duration(stack: Stack) -> None:
    node, task = "usage-node", f"task-{secrets.token_hex(3)}"
    stack.heartbeats.nodes[node] = {"devices": [gpu(0), gpu(1)]}
    await _capacity_known(stack, node)
    start, end = ms("2025-01-01T10:00:30"), ms("2025-01-01T10:02:15")
    p, t = stack.publisher, stack.topics
    await p.publish(t.jobs, "job-u", "JobSubmitted", job_submitted("job-u", [task], start - 60_000))
    await p.publish(
        t.placements,
        node,
        "TaskPlaced",
        task_placed(task, node, start - 1000, job_id="job-u", devices=[(1, 500)], cpu_milli=2000),
    )
    await p.publish(t.lifecycle, task, "TaskStarted", task_started(task, node, start, job_id="job-u"))
    finished = task_finished(task, node, end, job_id="job-u")
    await p.publish(t.lifecycle, task, "TaskFinished", finished)
    await p.publish(t.lifecycle, task, "TaskFinished", finished)  # redelivered

    seen = await _usage(
        stack, lambda s: sum(r.record["task_id"] == task for r in s) >= 3, f"3 windows of {task}"
    )
    windows = {r.record["event_id"]: r.record for r in seen if r.record["task_id"] == task}
    assert len(windows) == 3
    ordered = sorted(windows.values(), key=lambda w: w["window_start"])
    assert [w["gpu_milli_seconds"] for w in ordered] == [15_000, 30_000, 7_500]
    assert sum(w["gpu_milli_seconds"] for w in ordered) == 500 * (end - start) // 1000
    assert sum(w["cpu_milli_seconds"] for w in ordered) == 2000 * (end - start) // 1000
    assert sum(w["cu_seconds"]["h200"] for w in ordered) == pytest.approx(989.5 / 2 * 105)
    assert {(w["tenant"], w["queue"], w["job_id"], w["attempt"]) for w in ordered} == {
        ("acme", "research", "job-u", 1)
    }
    assert ordered[0]["window_start"] == from_ms(start) and ordered[-1]["window_end"] == from_ms(end)
    # One worker owns every task-facts partition: each fact was applied in the batch that made it, none
    # was sent to the internal topic and read back.
    assert await _naming(stack, t.facts, task) == []


async def test_a_window_closed_by_a_later_snapshot_is_in_the_trace_of_the_task_start(stack: Stack) -> None:
    node, task = f"trace-node-{secrets.token_hex(2)}", f"task-{secrets.token_hex(3)}"
    stack.heartbeats.nodes[node] = {"devices": [gpu(0)]}
    await _capacity_known(stack, node)
    job_trace = secrets.token_hex(16)
    # Started two minutes ago and never ended: only the agent's snapshots (no trace of the job's) close
    # its windows.
    start = now_ms() - 120_000
    p, t = stack.publisher, stack.topics
    await p.publish(t.jobs, "job-tr", "JobSubmitted", job_submitted("job-tr", [task], start - 1000))
    placed = task_placed(task, node, start - 1000, job_id="job-tr", devices=[(0, 1000)], cpu_milli=1000)
    await p.publish(t.placements, node, "TaskPlaced", placed)
    with continued(f"00-{job_trace}-{secrets.token_hex(8)}-01"):
        await p.publish(t.lifecycle, task, "TaskStarted", task_started(task, node, start, job_id="job-tr"))
    stack.heartbeats.nodes[node] = {"devices": [gpu(0)], "task_ids": [task]}

    seen = await _usage(stack, lambda s: any(r.record["task_id"] == task for r in s), f"a window of {task}")
    windows = [r for r in seen if r.record["task_id"] == task]
    assert all(r.record["window_end"] <= from_ms(now_ms()) for r in windows)
    traceparents = {header(r.headers, "traceparent") for r in windows}
    assert traceparents and all(tp and tp.split("-")[1] == job_trace for tp in traceparents), traceparents


async def test_a_task_whose_job_event_never_arrived_is_charged_to_its_placements_payer(stack: Stack) -> None:
    node, task = "payer-node", f"task-{secrets.token_hex(3)}"
    stack.heartbeats.nodes[node] = {"devices": [gpu(0)]}
    await _capacity_known(stack, node)
    start, end = ms("2025-01-01T12:00:00"), ms("2025-01-01T12:00:40")
    p, t = stack.publisher, stack.topics
    # No JobSubmitted: as when it was dead-lettered, or metering's task state was rebuilt without it.
    placed = task_placed(task, node, start, job_id="job-p", tenant="beta", queue="beta.infer")
    await p.publish(t.placements, node, "TaskPlaced", placed)
    await p.publish(t.lifecycle, task, "TaskStarted", task_started(task, node, start, job_id="job-p"))
    await p.publish(t.lifecycle, task, "TaskFinished", task_finished(task, node, end, job_id="job-p"))
    seen = await _usage(stack, lambda s: any(r.record["task_id"] == task for r in s), f"{task} window")
    (window,) = [r.record for r in seen if r.record["task_id"] == task]
    assert (window["tenant"], window["queue"], window["job_id"]) == ("beta", "beta.infer", "job-p")
    assert window["gpu_milli_seconds"] == 1000 * 40


async def test_garbage_goes_to_the_dead_letter_topic_and_the_next_snapshot_is_processed(stack: Stack) -> None:
    node = "dlq-node"
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        await producer.send_and_wait(stack.topics.snapshots, b"this is not an event", key=node.encode())
    finally:
        await producer.stop()
    misplaced = task_started("misplaced-task", node, now_ms())  # well-formed, wrong topic
    await stack.publisher.publish(stack.topics.snapshots, "misplaced", "TaskStarted", misplaced)
    stack.heartbeats.nodes[node] = {"devices": [gpu(0, "Tesla T4", 15_360)]}
    dlq = stack.reader(f"{stack.topics.snapshots}.dlq", raw=True)
    capacity = stack.reader(stack.topics.capacity)
    await dlq.start()
    await capacity.start()
    try:
        keys = {node.encode(), b"misplaced"}
        dead = await dlq.until(lambda s: keys <= {r.record["key"] for r in s}, what="dead letters")
        views = await capacity.until(lambda s: node in _latest_by_node(s), what=f"{node} capacity")
    finally:
        await dlq.stop()
        await capacity.stop()
    letter = next(r for r in dead if r.record["key"] == node.encode())
    assert letter.record["value"] == b"this is not an event"
    assert header(letter.headers, "dlq-original-topic") == stack.topics.snapshots
    assert "CorruptEventError" in (header(letter.headers, "dlq-error-class") or "")
    assert header(letter.headers, "dlq-error-message")
    # The bus's dead-letter path: a record that does not decode is never retried.
    assert header(letter.headers, "dlq-attempts") == "0"
    wrong_topic = next(r for r in dead if r.record["key"] == b"misplaced")
    assert "UnexpectedEventError" in (header(wrong_topic.headers, "dlq-error-class") or "")
    assert _latest_by_node(views)[node]["cu_total"] == pytest.approx(65.0 + 6.4)


async def test_restarted_worker_recovers_its_tables_and_charges_nothing_twice(stack: Stack) -> None:
    node, task = "restart-node", f"task-{secrets.token_hex(3)}"
    stack.heartbeats.nodes[node] = {"devices": [gpu(0)]}
    p, t = stack.publisher, stack.topics
    start, end = ms("2025-01-01T11:00:00"), ms("2025-01-01T11:01:30")
    capacity = stack.reader(t.capacity)
    await capacity.start()
    try:
        await capacity.until(lambda s: node in _latest_by_node(s), what=f"{node} capacity")
    finally:
        await capacity.stop()
    await p.publish(t.jobs, "job-r", "JobSubmitted", job_submitted("job-r", [task], start))
    await p.publish(t.placements, node, "TaskPlaced", task_placed(task, node, start, job_id="job-r"))
    await p.publish(t.lifecycle, task, "TaskStarted", task_started(task, node, start, job_id="job-r"))
    finished = task_finished(task, node, end, job_id="job-r")
    await p.publish(t.lifecycle, task, "TaskFinished", finished)
    usage = stack.reader(t.usage)
    await usage.start()
    try:
        await usage.until(lambda s: sum(r.record["task_id"] == task for r in s) >= 2, what="first attempt")

        stack.worker.stop()
        stack.worker.start()
        # Redelivered after the restart, then a second attempt of the same task: it shares the task's
        # partition, so once its windows are out the redelivery has been handled too.
        await p.publish(t.lifecycle, task, "TaskFinished", finished)
        retry_start, retry_end = end + 5_000, end + 20_000
        await p.publish(
            t.placements, node, "TaskPlaced", task_placed(task, node, retry_start, job_id="job-r", attempt=2)
        )
        await p.publish(
            t.lifecycle, task, "TaskStarted", task_started(task, node, retry_start, job_id="job-r", attempt=2)
        )
        await p.publish(
            t.lifecycle, task, "TaskFinished", task_finished(task, node, retry_end, job_id="job-r", attempt=2)
        )
        try:
            seen = await usage.until(
                lambda s: any(r.record["task_id"] == task and r.record["attempt"] == 2 for r in s),
                timeout_s=RESTART_DEADLINE_S,
                what="second attempt after restart",
            )
        except AssertionError as timed_out:
            raise AssertionError(f"{timed_out}\n{await _trail(stack, task)}") from None
    finally:
        await usage.stop()
    first = [r.record for r in seen if r.record["task_id"] == task and r.record["attempt"] == 1]
    assert len(first) == 2  # 11:00:00-11:01:00 and 11:01:00-11:01:30, each exactly once
    assert sum(w["gpu_milli_seconds"] for w in first) == 1000 * 90
