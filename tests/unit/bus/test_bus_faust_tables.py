"""`write_back` and `TablesKeeper` on scripted tables and broker answers: which records go back to the
changelog after the broker started over, when, and what happens to a send the broker refuses."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner
from faust.types import TP

from suanli.bus import BrokerWatch, EnsureResult, TopicSpec, topics
from suanli.bus.faust_tables import TablesKeeper, WriteBackError, write_back

PARTITIONS = 8


def partition_of(key: bytes) -> int:
    every = list(range(PARTITIONS))
    return int(DefaultPartitioner()(key, every, every))


@dataclass
class Changelog:
    name: str
    refusals: int = 0  # the first this many sends fail, as a topic just created refused them
    sent: list[tuple[bytes, bytes]] = field(default_factory=list)
    before_send: Any = None

    def get_topic_name(self) -> str:
        return self.name

    def send_soon(self, *, key: bytes, value: bytes, partition: int | None, **_: Any) -> asyncio.Future[None]:
        assert partition is None  # the producer's partitioner places it, as the table writes do
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.refusals:
            self.refusals -= 1
            done.set_exception(RuntimeError("UnknownError"))
        else:
            self.sent.append((key, value))
            done.set_result(None)
        return done


@dataclass(eq=False)  # hashed by identity, as faust's tables are
class Table:
    """What `write_back` uses of a faust table (and faust's own ``send_changelog``)."""

    name: str
    data: dict[bytes, bytes]
    changelog_topic: Changelog
    partitions: int = PARTITIONS
    key_serializer: str = "raw"
    value_serializer: str = "raw"

    def _on_changelog_sent(self, *_: Any) -> None:
        pass


def table(name: str, keys: Sequence[bytes], refusals: int = 0) -> Table:
    return Table(name, {k: b"v-" + k for k in keys}, Changelog(f"{name}-changelog", refusals))


KEYS = [f"task-{i}".encode() for i in range(40)]


async def test_only_the_records_of_the_given_partitions_go_back() -> None:
    tasks = table("tasks", KEYS)
    mine = {0, 3, 5}
    assert await write_back(tasks, mine) == sum(partition_of(k) in mine for k in KEYS)
    assert sorted(tasks.changelog_topic.sent) == sorted(
        (k, b"v-" + k) for k in KEYS if partition_of(k) in mine
    )


async def test_a_refused_send_goes_again_with_the_value_then_and_a_deleted_record_not_at_all() -> None:
    tasks = table("tasks", KEYS[:3], refusals=3)
    first, second, third = KEYS[:3]
    original = tasks.changelog_topic.send_soon

    def send_then_change(**kwargs: Any) -> asyncio.Future[None]:
        sent = original(**kwargs)
        # A batch writes one record and deletes another while the first sends are awaited.
        tasks.data[first] = b"newer"
        tasks.data.pop(second, None)
        return sent

    tasks.changelog_topic.send_soon = send_then_change  # type: ignore[method-assign]
    assert await write_back(tasks, set(range(PARTITIONS)), backoff_s=0) == 3
    assert sorted(tasks.changelog_topic.sent) == sorted([(first, b"newer"), (third, b"v-" + third)])


async def test_records_still_refused_after_every_try_raise() -> None:
    tasks = table("tasks", KEYS[:2], refusals=100)
    with pytest.raises(WriteBackError, match="2 records of tasks not written back after 3 tries"):
        await write_back(tasks, set(range(PARTITIONS)), tries=3, backoff_s=0)


# -- the keeper ----------------------------------------------------------------------------------------


class Cluster:
    def partitions_for_topic(self, name: str) -> set[int]:
        return set(range(PARTITIONS))  # known: nothing to declare


class Client:
    cluster = Cluster()

    async def force_metadata_update(self) -> bool:
        return True


class Producer:
    def _ensure_producer(self) -> Any:
        return self

    client = Client()


@dataclass
class Assignor:
    actives: set[TP] = field(default_factory=set)

    def assigned_actives(self) -> set[TP]:
        return self.actives


@dataclass
class App:
    in_recovery: bool = False
    assignor: Assignor = field(default_factory=Assignor)
    producer: Producer = field(default_factory=Producer)


def keeper(
    app: App, tables: Sequence[Table], *clusters: str, tries: int = 5, then: list[int] | None = None
) -> TablesKeeper:
    answers = [EnsureResult((), ("placements",), c) for c in clusters]

    async def ensure(bootstrap: str, specs: Sequence[TopicSpec], prefix: str | None) -> EnsureResult:
        answer = answers.pop(0)
        if answer.cluster_id == "down":
            raise ConnectionError("the broker does not answer")
        return answer

    watch = BrokerWatch("b:9092", (topics.PLACEMENTS,), ensure=ensure)

    async def after() -> None:
        if then is not None:
            then.append(len(then) + 1)

    return TablesKeeper(app, tables, watch, tries=tries, backoff_s=0, then=after)


async def test_nothing_is_written_back_until_the_broker_started_over() -> None:
    tasks = table("tasks", KEYS)
    app = App(assignor=Assignor({TP("tasks-changelog", p) for p in range(PARTITIONS)}))
    kept = keeper(app, [tasks], "c1", "c1", "down", "c1")
    await kept.first_look()
    assert [await kept.check() for _ in range(3)] == [0, 0, 0]
    assert tasks.changelog_topic.sent == []


async def test_after_a_start_over_the_held_partitions_are_written_back_once_joined_and_recovered() -> None:
    tasks, nodes = table("tasks", KEYS), table("nodes", [b"node-a", b"node-b"])
    app = App(in_recovery=False)
    then: list[int] = []
    kept = keeper(app, [tasks, nodes], "c1", "down", "c2", "c2", "c2", "c2", "c2", then=then)
    await kept.first_look()
    assert await kept.check() == 0  # the broker does not answer
    assert await kept.check() == 0  # started over, but no partition held yet: not rejoined
    assert kept.pending
    app.assignor.actives = {TP("tasks-changelog", 1), TP("tasks-changelog", 2), TP("nodes-changelog", 0)}
    app.in_recovery = True
    assert await kept.check() == 0  # recovering: after it
    assert then == []
    app.in_recovery = False
    held = [k for k in KEYS if partition_of(k) in {1, 2}] + [
        k for k in (b"node-a", b"node-b") if partition_of(k) == 0
    ]
    assert await kept.check() == len(held)
    assert not kept.pending and kept.written_back == len(held)
    assert await kept.check() == 0  # once
    assert then == [1]  # what the processor does besides, after the write-back, once
    assert {k for k, _ in tasks.changelog_topic.sent + nodes.changelog_topic.sent} == set(held)


async def test_a_write_back_that_fails_is_tried_again_at_the_next_look() -> None:
    tasks = table("tasks", KEYS[:1], refusals=1)
    app = App(assignor=Assignor({TP("tasks-changelog", p) for p in range(PARTITIONS)}))
    kept = keeper(app, [tasks], "c1", "c2", "c2", tries=1)
    await kept.first_look()
    assert await kept.check() == 0
    assert kept.pending
    assert await kept.check() == 1
    assert tasks.changelog_topic.sent == [(KEYS[0], b"v-" + KEYS[0])]


async def test_a_step_after_the_write_back_that_fails_leaves_it_all_for_the_next_look() -> None:
    tasks = table("tasks", KEYS[:1])
    app = App(assignor=Assignor({TP("tasks-changelog", p) for p in range(PARTITIONS)}))
    failures = [RuntimeError("the broker refused the windows")]
    ran: list[str] = []

    async def then() -> None:
        if failures:
            raise failures.pop()
        ran.append("republished")

    answers = [EnsureResult((), ("placements",), c) for c in ("c1", "c2", "c2")]

    async def ensure(bootstrap: str, specs: Sequence[TopicSpec], prefix: str | None) -> EnsureResult:
        return answers.pop(0)

    kept = TablesKeeper(app, [tasks], BrokerWatch("b:9092", (topics.PLACEMENTS,), ensure=ensure), then=then)
    await kept.first_look()
    assert await kept.check() == 0  # no error out of the timer: the worker keeps running
    assert kept.pending and ran == []
    assert await kept.check() == 1  # written back again, then the step
    assert ran == ["republished"] and not kept.pending
