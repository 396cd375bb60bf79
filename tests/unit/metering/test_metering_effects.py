"""A batch's effects: outputs acknowledged before any table is written; reads see the batch's own writes.

Also: table states decoded once, and the worker's consumer built with metering's fetch wait, not faust's
fixed 1.5 s.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from suanli.metering.adapters import decoded
from suanli.metering.adapters.decoded import DecodedStates
from suanli.metering.adapters.effects import Effects
from suanli.metering.adapters.jsoncodec import dumps
from suanli.metering.bootstrap import metering_app
from suanli.metering.domain import NodeState
from suanli.metering.entrypoints.settings import MeteringSettings


class Topic:
    """Hands out one acknowledgement future per send; the test decides when the broker answers."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.acks: list[asyncio.Future[None]] = []

    async def send(self, *, key: bytes, value: bytes, headers: Any = None) -> asyncio.Future[None]:
        self.sent.append((key, value))
        ack: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks.append(ack)
        return ack


class Table(dict[bytes, bytes]):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


async def test_the_prepare_hook_sees_each_written_table_once_after_the_sends_and_before_any_write() -> None:
    # What the worker's hook (changelog.ChangelogTopics) relies on: a changelog declared again after a
    # broker restart exists before the first write of the batch reaches it.
    topic, nodes, tasks = Topic(), Table("nodes"), Table("tasks")
    seen: list[tuple[list[str], int, int]] = []

    async def prepare(tables: list[Any]) -> None:
        seen.append((sorted(t.name for t in tables), len(topic.acks), len(nodes) + len(tasks)))

    out = Effects(prepare)
    out.send(topic, b"n1", b"view-1")
    out.put(nodes, b"n1", b"state-1")
    out.put(nodes, b"n2", b"state-2")
    out.put(tasks, b"t1", b"task-1")
    committing = asyncio.create_task(out.commit())
    while not topic.acks:
        await asyncio.sleep(0)
    topic.acks[0].set_result(None)
    await committing
    assert seen == [(["nodes", "tasks"], 1, 0)]
    assert dict(nodes) == {b"n1": b"state-1", b"n2": b"state-2"} and dict(tasks) == {b"t1": b"task-1"}

    idle = Effects(prepare)
    await idle.commit()  # nothing to write: no call
    assert len(seen) == 1


async def test_tables_are_written_only_after_every_output_is_acknowledged() -> None:
    topic, nodes = Topic(), Table("nodes")
    out = Effects()
    out.send(topic, b"n1", b"view-1")
    out.put(nodes, b"n1", b"state-1")
    out.send(topic, b"n2", b"view-2")
    out.put(nodes, b"n2", b"state-2")

    committing = asyncio.create_task(out.commit())
    while len(topic.acks) < 2:
        await asyncio.sleep(0)
    assert topic.sent == [(b"n1", b"view-1"), (b"n2", b"view-2")]  # all sent before any ack, in order
    topic.acks[1].set_result(None)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not nodes and not committing.done()  # one output still unacknowledged: nothing written
    topic.acks[0].set_result(None)
    await committing
    assert nodes == {b"n1": b"state-1", b"n2": b"state-2"}


async def test_a_failed_acknowledgement_writes_nothing() -> None:
    topic, nodes = Topic(), Table("nodes")
    out = Effects()
    out.send(topic, b"n1", b"view")
    out.put(nodes, b"n1", b"state")
    committing = asyncio.create_task(out.commit())
    while not topic.acks:
        await asyncio.sleep(0)
    topic.acks[0].set_exception(ConnectionError("broker away"))
    with pytest.raises(ConnectionError):
        await committing
    assert not nodes


def test_reads_see_the_batchs_own_writes_and_only_the_last_value_of_a_key_is_written() -> None:
    nodes, tasks = Table("nodes"), Table("tasks")
    nodes[b"n1"] = b"stored"
    out = Effects()
    assert out.get(nodes, b"n1") == b"stored"
    out.put(nodes, b"n1", b"first")
    out.put(nodes, b"n1", b"second")
    assert out.get(nodes, b"n1") == b"second"
    assert out.get(tasks, b"n1") is None  # same key, another table
    asyncio.run(out.commit())
    assert nodes == {b"n1": b"second"}


def test_a_state_is_decoded_once_unless_the_table_holds_other_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []
    real_loads = decoded.loads

    def counting_loads(cls: type, raw: bytes) -> object:
        parsed.append(raw)
        return real_loads(cls, raw)

    monkeypatch.setattr(decoded, "loads", counting_loads)
    nodes = Table("nodes")
    nodes[b"n1"] = dumps(NodeState("n1", sequence=1))  # as recovered from the changelog
    states = DecodedStates()
    out = Effects()
    assert states.read(out, nodes, b"n1", NodeState) == NodeState("n1", sequence=1)
    assert states.read(out, nodes, b"n1", NodeState) == NodeState("n1", sequence=1)
    assert len(parsed) == 1
    states.write(out, nodes, b"n1", NodeState("n1", sequence=2))
    asyncio.run(out.commit())
    assert states.read(Effects(), nodes, b"n1", NodeState) == NodeState("n1", sequence=2)
    assert len(parsed) == 1  # what it wrote itself is not parsed back
    nodes[b"n1"] = dumps(NodeState("n1", sequence=3))  # written by someone else (a recovery)
    assert states.read(Effects(), nodes, b"n1", NodeState) == NodeState("n1", sequence=3)
    assert len(parsed) == 2
    assert states.read(Effects(), nodes, b"none", NodeState) is None


def test_the_memo_forgets_the_longest_remembered_first() -> None:
    nodes = Table("nodes")
    states = DecodedStates(limit=2)
    out = Effects()
    for i in range(3):
        states.write(out, nodes, f"n{i}".encode(), NodeState(f"n{i}"))
    asyncio.run(out.commit())
    # All three still read right; the first is decoded from the table again.
    assert [states.read(Effects(), nodes, f"n{i}".encode(), NodeState) for i in range(3)] == [
        NodeState(f"n{i}") for i in range(3)
    ]


async def test_the_workers_consumer_waits_at_most_the_configured_fetch_wait() -> None:
    service = metering_app(MeteringSettings(bootstrap="127.0.0.1:9", fetch_wait_ms=70))
    thread = service.app.consumer._new_consumer_thread()
    consumer = thread._create_worker_consumer(service.app.transport)
    try:
        assert consumer._fetch_max_wait_ms == 70  # faust's own default is 1500
    finally:
        await consumer.stop()
