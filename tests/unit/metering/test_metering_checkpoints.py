"""Changelog writes only for what lasts: a node's stamps and a task's evidence wait for a checkpoint.

A snapshot of an unchanged node, or a usage sample of a running task, changes only what the next one
brings again; such states stay in the table's memory and reach the changelog at the key's next lasting
write or once its checkpoint interval has passed. What charges and node history depend on is written at
once, so a restart never loses a placement, a status, a published view or how far a task was metered.
"""

from __future__ import annotations

from dataclasses import replace

from metering_harness import Clock, Harness, Table

from suanli.metering.adapters import records
from suanli.metering.adapters.decoded import Checkpoints, DecodedStates
from suanli.metering.adapters.effects import Effects
from suanli.metering.domain import (
    NodeState,
    NodeStatus,
    Sampled,
    Started,
    material_node_change,
    material_task_change,
    on_snapshot,
    rate,
    step,
    with_liveness,
)
from suanli.metering.testing import gpu, job_submitted, ms, node_snapshot, task_placed, task_started
from suanli.resources import default_catalogue

T0 = ms("2025-01-01T10:00:00")
INTERVAL = 1_000


def snapshot(seq: int, at: int, tasks: tuple[str, ...] = ()) -> dict:
    devices = [gpu(0), gpu(1)]
    return node_snapshot("n1", at, sequence=seq, devices=devices, task_ids=tasks, interval_ms=INTERVAL)


def test_a_snapshot_of_an_unchanged_node_is_no_material_change() -> None:
    catalogue = default_catalogue()
    first = on_snapshot(None, snapshot(1, T0), received_at_ms=T0, catalogue=catalogue).state
    second = on_snapshot(first, snapshot(2, T0 + INTERVAL), received_at_ms=T0 + INTERVAL, catalogue=catalogue)
    assert second.state.sequence == 2 and second.state.liveness.received_at_ms == T0 + INTERVAL
    assert material_node_change(None, first)
    assert not material_node_change(first, second.state)
    lost = with_liveness(second.state, replace(second.state.liveness, status=NodeStatus.LOST))
    assert material_node_change(second.state, lost)  # a status is history no snapshot carries


def test_a_sample_is_no_material_change_of_a_task_but_its_start_and_windows_are() -> None:
    placed = on_snapshot(None, snapshot(1, T0), received_at_ms=T0, catalogue=default_catalogue())
    alloc = records.allocation_of(task_placed("t1", "n1", T0))
    state, _ = step(None, records.job_facts(job_submitted("job-1", ["t1"], T0))[0])
    state, _ = step(state, rate(alloc, placed.state.capacity, default_catalogue()))
    started, _ = step(state, Started("t1", "job-1", 1, "n1", T0))
    assert material_task_change(state, started)
    sampled, windows = step(started, Sampled("t1", 1, T0 + 1_000, 1_000, 50.0, 1, 1000))
    assert windows == [] and not material_task_change(started, sampled)
    later, windows = step(sampled, Sampled("t1", 1, T0 + 61_000, 1_000, 50.0, 1, 1000))
    assert len(windows) == 1 and material_task_change(sampled, later)  # metered further: it lasts


async def test_a_passing_write_reaches_the_changelog_only_when_its_checkpoint_is_due() -> None:
    clock, nodes = Clock(0), Table("nodes")
    states = DecodedStates(checkpoints=Checkpoints(30_000, clock))

    async def write(sequence: int, *, lasting: bool) -> None:
        out = Effects()
        states.write(out, nodes, b"n1", NodeState("n1", sequence=sequence), lasting=lasting)
        await out.commit()
        states.committed(out)

    def read() -> NodeState | None:
        return states.read(Effects(), nodes, b"n1", NodeState)

    await write(1, lasting=False)  # never logged: due at once
    clock.now_ms = 10_000
    await write(2, lasting=False)
    assert read() == NodeState("n1", sequence=2) and nodes.changelog == [b"n1"]  # held, not logged
    await write(3, lasting=True)
    assert nodes.changelog == [b"n1", b"n1"]
    clock.now_ms = 39_000
    await write(4, lasting=False)
    clock.now_ms = 40_000
    await write(5, lasting=False)
    assert nodes.changelog == [b"n1"] * 3  # 30 s after the lasting write
    assert DecodedStates().read(Effects(), nodes, b"n1", NodeState) == NodeState("n1", sequence=5)


async def test_a_write_in_the_batch_after_a_logged_one_is_logged_and_a_failed_batch_holds_nothing() -> None:
    clock, nodes = Clock(0), Table("nodes")
    states = DecodedStates(checkpoints=Checkpoints(30_000, clock))
    out = Effects()
    states.write(out, nodes, b"n1", NodeState("n1", sequence=1), lasting=True)
    states.write(out, nodes, b"n1", NodeState("n1", sequence=2), lasting=False)
    assert states.read(out, nodes, b"n1", NodeState) == NodeState("n1", sequence=2)
    await out.commit()
    states.committed(out)
    assert nodes.changelog == [b"n1"]
    assert DecodedStates().read(Effects(), nodes, b"n1", NodeState) == NodeState("n1", sequence=2)
    failed = Effects()
    states.write(failed, nodes, b"n1", NodeState("n1", sequence=3), lasting=False)
    assert states.read(failed, nodes, b"n1", NodeState) == NodeState("n1", sequence=3)
    # never committed (an output failed): the next batch sees the committed state
    assert states.read(Effects(), nodes, b"n1", NodeState) == NodeState("n1", sequence=2)


async def test_snapshots_of_a_steady_node_write_its_changelog_once_per_checkpoint() -> None:
    clock = Clock(0)
    h = Harness(T0, checkpoints=Checkpoints(30_000, clock))
    for seq in range(1, 11):
        at = T0 + seq * INTERVAL
        h.clock.now_ms, clock.now_ms = at, seq * 1_000
        await h.run(lambda b, s=seq, a=at: h.metering.apply_snapshot(snapshot(s, a), b))
    assert h.nodes.changelog == [b"n1"]  # the first; nine more snapshots stayed in memory
    alloc = records.allocation_of(task_placed("t1", "n1", T0 + 10 * INTERVAL))
    await h.run(lambda b: h.metering.apply_placement(alloc, b))
    assert h.nodes.changelog == [b"n1", b"n1"]  # a placement is written at once
    h.clock.now_ms = T0 + 11 * INTERVAL
    started = records.lifecycle_fact("TaskStarted", task_started("t1", "n1", T0 + 11 * INTERVAL))
    await h.run(lambda b: h.metering.forward_facts([started], b))
    await h.feed_facts()
    assert h.tasks.changelog.count(b"t1") >= 1
