"""Metering across a broker that restarts empty (its own broker: the session's is shared).

A task starts before the restart and finishes after it. The broker keeps nothing, so the task's placement
and start are gone from every topic, metering's changelogs included, and so are the usage windows of it
already published: only the worker's tables still hold what it knew. The worker keeps them across the
restart, writes them back to the new changelog and publishes the windows again, so the task is charged in
full when it finishes, also by a worker started again after the restart, which has nothing else to
rebuild its tables from.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from meteringkit import Heartbeats, Received, TopicReader, WorkerProcess, log_digest, now_ms

from suanli.bus import EventPublisher, ensure_topics
from suanli.clock import from_ms
from suanli.contracts import decode
from suanli.infra.broker import BrokerProcess
from suanli.infra.polling import until
from suanli.metering.entrypoints.topics import MeteringTopics
from suanli.metering.testing import gpu, job_submitted, task_finished, task_placed, task_started

PREFIX = "restart"
# A worker's start, group join and changelog recovery, on a loaded 2-core machine.
READY_S = 90.0
PARTITIONS = MeteringTopics().partitions

pytestmark = pytest.mark.timeout(360)


@pytest.fixture
def worker(broker: BrokerProcess, tmp_path: Path) -> Iterator[WorkerProcess]:
    log_path = tmp_path / "metering.log"
    # Looks at the broker seldom: the worker rejoins the restarted broker's group, and recovers its tables
    # there, before it writes them back (the order in which the recovery used to stop the worker).
    process = WorkerProcess(broker.bootstrap, PREFIX, log_path, {"SUANLI_METERING_BROKER_CHECK_S": "20"})
    process.start()
    try:
        yield process
    finally:
        process.stop()
        print(f"--- metering worker log ({log_path}) ---\n{log_digest(log_path.read_text(errors='replace'))}")


async def _until(
    bootstrap: str, topic: str, done: Callable[[list[Received]], bool], what: str
) -> list[Received]:
    """``topic`` read from its beginning until ``done(seen)`` holds (the topic may not exist yet)."""
    deadline = asyncio.get_running_loop().time() + READY_S
    while True:
        reader = TopicReader(bootstrap, topic, raw=True)
        try:
            await reader.start()
            left = deadline - asyncio.get_running_loop().time()
            return await reader.until(done, timeout_s=max(left, 0.1), what=what)
        except AssertionError:
            if asyncio.get_running_loop().time() >= deadline:
                raise
            await asyncio.sleep(0.5)  # not created yet
        finally:
            with contextlib.suppress(Exception):
                await reader.stop()


async def _committed(bootstrap: str, group: str, topic: str) -> None:
    """Until ``group`` has committed an offset of ``topic``: its worker has joined it and handles records."""
    # A consumer of the group that never joins it (no subscription) only asks for the group's offsets.
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]

        async def committed() -> bool:
            with contextlib.suppress(Exception):  # the group's coordinator is not there yet
                return any([await consumer.committed(tp) is not None for tp in parts])
            return False

        await until(committed, READY_S, f"{group} committing offsets on the new broker")
    finally:
        await consumer.stop()


def _naming(task: str) -> Callable[[list[Received]], bool]:
    return lambda seen: any(task.encode() in (r.record["value"] or b"") for r in seen)


async def _topics_created(bootstrap: str, topics: MeteringTopics) -> None:
    """As the platform's services do after a restart (each one's `BrokerWatch`): the catalogue's topics,
    with their partition counts, before anything is produced to them."""
    await ensure_topics(bootstrap, topics.specs(), prefix=topics.prefix)


@contextlib.asynccontextmanager
async def snapshots(
    bootstrap: str, topics: MeteringTopics, *nodes: str, running: Sequence[str] = ()
) -> AsyncIterator[EventPublisher]:
    """Snapshots of ``nodes`` sent every interval meanwhile, as their agents send them; the first node's
    list the tasks ``running`` (evidence that they still hold their resources)."""
    async with EventPublisher(bootstrap) as publisher:
        heartbeats = Heartbeats(publisher, topics.snapshots)
        heartbeats.nodes.update({node: {"devices": [gpu(0)]} for node in nodes})
        heartbeats.nodes[nodes[0]]["task_ids"] = list(running)
        beating = asyncio.create_task(heartbeats.run())
        try:
            yield publisher
        finally:
            beating.cancel()


async def _viewed(bootstrap: str, topics: MeteringTopics, node: str) -> None:
    """Until the worker has published ``node``'s capacity view: it is reading its inputs."""
    await _until(bootstrap, topics.capacity, _naming(node), f"{node}'s capacity view")


async def test_a_task_running_across_an_empty_broker_restart_is_charged_in_full(
    broker: BrokerProcess, worker: WorkerProcess
) -> None:
    bootstrap, t = broker.bootstrap, worker.topics
    node, task = "restart-node", f"task-{secrets.token_hex(3)}"
    changelog = f"{PREFIX}.suanli-metering-tasks-changelog"
    # Started 150 s ago: the node's snapshots listing it close its first windows before the restart.
    start = now_ms() - 150_000
    await _topics_created(bootstrap, t)
    async with snapshots(bootstrap, t, node, running=[task]) as publisher:
        await _viewed(bootstrap, t, node)
        await publisher.publish(t.jobs, "job-x", "JobSubmitted", job_submitted("job-x", [task], start))
        placed = task_placed(task, node, start, job_id="job-x")
        await publisher.publish(t.placements, node, "TaskPlaced", placed)
        started = task_started(task, node, start, job_id="job-x")
        await publisher.publish(t.lifecycle, task, "TaskStarted", started)
        await _until(bootstrap, changelog, _naming(task), "the task's record in the tasks changelog")
        # Published to the broker that is about to lose them, before billing could read them.
        await _until(bootstrap, t.usage, _naming(task), "the task's first windows")
    # Started again, the worker reads its tables back from the changelogs: it has read them to an offset
    # that the changelogs after the broker's restart do not reach.
    worker.stop()
    worker.start()
    async with snapshots(bootstrap, t, node, "probe-1", running=[task]):
        await _viewed(bootstrap, t, "probe-1")

    broker.stop()
    broker.start()  # the same port, nothing kept
    await _topics_created(bootstrap, t)
    async with snapshots(bootstrap, t, node, "probe-2", running=[task]):
        await _viewed(bootstrap, t, "probe-2")  # the same worker, still running, reads the new broker
        # It writes the task's record back to the new changelog.
        await _until(bootstrap, changelog, _naming(task), "the task's record written back after the restart")
        # And rejoins its group on the new broker: the recovery that follows found the changelogs ending
        # before the offsets it had read them to (before: ConsistencyError, and the worker stopped).
        await _committed(bootstrap, worker.group, t.snapshots)
    # A worker started now has only the new changelog to rebuild its tables from.
    worker.stop()
    worker.start()
    async with snapshots(bootstrap, t, node) as publisher:
        end = now_ms()
        finished = task_finished(task, node, end, job_id="job-x")
        await publisher.publish(t.lifecycle, task, "TaskFinished", finished)
        await _until(bootstrap, t.usage, _window_ending(task, end), f"the last window of {task}")
    reader = TopicReader(bootstrap, t.usage)
    await reader.start()
    try:
        # Read for a while: windows of the task written later than the last one read are read too.
        with contextlib.suppress(AssertionError):
            await reader.until(lambda s: False, timeout_s=3.0)
    finally:
        await reader.stop()
    # On the new broker: every window of the attempt, those published to the old one included (a window
    # published twice has one id, which billing claims once).
    by_id = {r.record["event_id"]: r.record for r in reader.seen if r.record["task_id"] == task}
    windows = sorted(by_id.values(), key=lambda w: w["window_start"])
    assert windows[0]["window_start"] == from_ms(start) and windows[-1]["window_end"] == from_ms(end)
    assert all(a["window_end"] == b["window_start"] for a, b in itertools.pairwise(windows))
    assert sum(w["gpu_milli_seconds"] for w in windows) == end - start  # one whole GPU, in milli-seconds
    assert {(w["tenant"], w["queue"], w["job_id"]) for w in windows} == {("acme", "research", "job-x")}


def _window_ending(task: str, end_ms: int) -> Callable[[list[Received]], bool]:
    """Whether a raw usage record of ``task`` ends at ``end_ms``."""

    def done(seen: list[Received]) -> bool:
        return any(
            r.record["value"]
            and task.encode() in r.record["value"]
            and decode(r.record["value"])[1]["window_end"] == from_ms(end_ms)
            for r in seen
        )

    return done
