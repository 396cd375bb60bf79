"""Batches of what has arrived: one commit per batch, and a failing batch handled again record by record
on the bus's path: retried by the bus's policy, or dead-lettered with the bus's reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from metering_harness import Harness, statuses

from suanli.bus import RetryPolicy
from suanli.bus.deadletter import DECODE, HANDLER, RETRIES_EXHAUSTED
from suanli.contracts import catalogue, encode
from suanli.metering.entrypoints.inputs import UnexpectedEventError, event_intakes
from suanli.metering.service_layer.batches import Batches
from suanli.metering.testing import gpu, ms, node_snapshot, task_placed, task_started

T0 = ms("2025-01-01T10:00:00")
FAST = RetryPolicy(max_attempts=3, initial_backoff_s=0.0, max_backoff_s=0.0)


@dataclass(frozen=True)
class Consumed:
    value: bytes
    offset: int


@dataclass
class DeadLetters:
    letters: list[tuple[int, Exception, int, str]]
    retried: list[int] = field(default_factory=list)  # offsets, once per failure tried again

    def retry(self, record: Consumed) -> None:
        self.retried.append(record.offset)

    async def __call__(self, record: Consumed, error: Exception, /, *, attempts: int, reason: str) -> None:
        self.letters.append((record.offset, error, attempts, reason))


def snapshot(node: str, seq: int, at: int = T0, gpus: int = 1) -> bytes:
    record = node_snapshot(node, at, sequence=seq, devices=[gpu(i) for i in range(gpus)], interval_ms=1000)
    return encode("NodeSnapshot", record)


def setup(h: Harness) -> tuple[Batches[Consumed], DeadLetters, Any]:
    dead = DeadLetters([])
    batches: Batches[Consumed] = Batches(
        h.begin, retry=FAST, dead_letter=dead, describe=lambda r: f"snapshots@{r.offset}", retried=dead.retry
    )
    return batches, dead, event_intakes(h.metering)


async def test_a_batch_is_one_commit_and_each_record_builds_on_the_last() -> None:
    h = Harness(T0)
    batches, dead, intakes = setup(h)
    await batches.handle([Consumed(snapshot("n1", 1, gpus=2), 0)], intakes[catalogue.NODE_SNAPSHOTS])
    placed = [
        encode("TaskPlaced", task_placed("t1", "n1", T0, devices=[(0, 1000)])),
        encode("TaskPlaced", task_placed("t2", "n1", T0, devices=[(1, 1000)])),
    ]
    await batches.handle([Consumed(v, i) for i, v in enumerate(placed)], intakes[catalogue.PLACEMENTS])
    await batches.handle([Consumed(snapshot("n1", 2, T0 + 1, gpus=2), 2)], intakes[catalogue.NODE_SNAPSHOTS])
    # the second placement saw the state the first left: both hold the node's GPUs
    assert h.capacity.events()[-1][1]["used"]["gpu_milli"] == 2000
    assert dead.letters == []


async def test_of_several_snapshots_of_a_node_in_a_batch_only_the_newest_is_applied() -> None:
    h = Harness(T0)
    batches, dead, intakes = setup(h)
    values = [snapshot("n1", 1), snapshot("n2", 1), snapshot("n1", 2, T0 + 1, gpus=2)]
    await batches.handle([Consumed(v, i) for i, v in enumerate(values)], intakes[catalogue.NODE_SNAPSHOTS])
    views = [r for _, r in h.capacity.events()]
    assert [(v["node_id"], v["total"]["gpu_count"]) for v in views] == [("n2", 1), ("n1", 2)]
    assert statuses(h.status, "n1") == ["READY"]
    assert h.nodes.keys() == {b"n1", b"n2"} and dead.letters == []


async def test_a_record_that_does_not_decode_costs_only_itself() -> None:
    h = Harness(T0)
    batches, dead, intakes = setup(h)
    misplaced = encode("TaskStarted", task_started("t1", "n1", T0))  # well-formed, wrong topic
    records = [Consumed(snapshot("n1", 1), 0), Consumed(b"not an event", 1), Consumed(misplaced, 2)]
    await batches.handle(records, intakes[catalogue.NODE_SNAPSHOTS])
    assert [(offset, attempts, reason) for offset, _, attempts, reason in dead.letters] == [
        (1, 0, DECODE),
        (2, 0, DECODE),
    ]
    assert isinstance(dead.letters[1][1], UnexpectedEventError)
    assert [r["node_id"] for _, r in h.capacity.events()] == ["n1"]
    assert h.nodes.keys() == {b"n1"}


async def test_a_placement_that_cannot_be_on_its_node_is_dead_lettered_by_the_handler() -> None:
    h = Harness(T0)
    batches, dead, intakes = setup(h)
    await batches.handle([Consumed(snapshot("n1", 1), 0)], intakes[catalogue.NODE_SNAPSHOTS])
    impossible = encode("TaskPlaced", task_placed("t1", "n1", T0, devices=[(7, 500)]))
    fine = encode("TaskPlaced", task_placed("t2", "n1", T0, devices=[(0, 500)]))
    await batches.handle([Consumed(impossible, 1), Consumed(fine, 2)], intakes[catalogue.PLACEMENTS])
    assert [(offset, attempts, reason) for offset, _, attempts, reason in dead.letters] == [(1, 1, HANDLER)]
    # t2 is rated and its payer forwarded; nothing of t1 got out.
    assert [(type(f).__name__, f.task_id) for f in h.facts.facts()] == [("Placed", "t2"), ("JobKnown", "t2")]


async def test_a_broker_error_writes_nothing_of_the_batch_and_its_records_are_retried() -> None:
    h = Harness(T0)
    batches, dead, intakes = setup(h)
    h.capacity.failures = [ConnectionError("broker away")]
    await batches.handle(
        [Consumed(snapshot("n1", 1), 0), Consumed(snapshot("n2", 1), 1)], intakes[catalogue.NODE_SNAPSHOTS]
    )
    # The batch wrote no state; each record was then handled alone and passed. n2's view had been
    # acknowledged in the failed batch and is sent again: with the same id, which consumers de-duplicate.
    views = [r for _, r in h.capacity.events()]
    assert [v["node_id"] for v in views] == ["n2", "n1", "n2"]
    assert views[0]["event_id"] == views[2]["event_id"]
    assert h.nodes.keys() == {b"n1", b"n2"} and dead.letters == []
    assert dead.retried == []  # the batch's failure is not a retry: each record then passed at once


async def test_a_broker_error_that_outlasts_the_policy_is_dead_lettered_as_retries_exhausted() -> None:
    h = Harness(T0)
    batches, dead, intakes = setup(h)
    h.capacity.failures = [ConnectionError("broker away")] * (1 + FAST.max_attempts)
    await batches.handle([Consumed(snapshot("n1", 1), 0)], intakes[catalogue.NODE_SNAPSHOTS])
    assert [(attempts, reason) for _, _, attempts, reason in dead.letters] == [
        (FAST.max_attempts, RETRIES_EXHAUSTED)
    ]
    assert not h.nodes  # never written: its outputs were never acknowledged
    assert dead.retried == [0] * (FAST.max_attempts - 1)  # every try after the record's first alone
