"""The use cases without faust: what a snapshot, a placement, task facts and the liveness check produce."""

from __future__ import annotations

import pytest
from metering_harness import Harness, run_task, statuses, usage_ids

from suanli.clock import from_ms
from suanli.metering.adapters import records
from suanli.metering.domain import NodeStatus, Placed, Seen
from suanli.metering.testing import (
    gpu,
    job_submitted,
    ms,
    node_snapshot,
    task_finished,
    task_placed,
    task_preempted,
    task_started,
)

T0 = ms("2025-01-01T10:00:00")
INTERVAL = 1_000


def snapshot(node: str, seq: int, at: int, tasks: tuple[str, ...] = (), gpus: int = 2) -> dict:
    devices = [gpu(i) for i in range(gpus)]
    return node_snapshot(node, at, sequence=seq, devices=devices, task_ids=tasks, interval_ms=INTERVAL)


async def test_a_snapshot_publishes_the_view_and_ready_then_only_what_changed() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 1, T0), b))
    h.clock.now_ms = T0 + INTERVAL
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 2, T0 + INTERVAL), b))
    h.clock.now_ms = T0 + 2 * INTERVAL
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 3, T0 + 2 * INTERVAL, gpus=1), b))
    views = [r for _, r in h.capacity.events()]
    assert [v["total"]["gpu_milli"] for v in views] == [2000, 1000]  # the unchanged view is not repeated
    assert views[0]["cu_total"] == pytest.approx(2 * 989.5 + 6.4)
    assert statuses(h.status, "n1") == ["READY"]
    assert h.nodes.keys() == {b"n1"}


async def test_a_stale_snapshot_changes_nothing() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 2, T0), b))
    written = dict(h.nodes)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 1, T0 - 10, gpus=1), b))
    assert len(h.capacity.sent) == 1 and h.nodes == written


async def test_a_placement_on_an_unseen_node_is_priced_at_its_first_snapshot() -> None:
    h = Harness(T0)
    alloc = records.allocation_of(task_placed("t1", "n1", T0, devices=[(1, 500)]))
    await h.run(lambda b: h.metering.apply_placement(alloc, b))
    assert h.facts.sent == [] and h.capacity.sent == []
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 1, T0 + 100, ("t1",)), b))
    placed, seen = h.facts.facts()
    assert isinstance(placed, Placed) and placed.allocation.devices[0].cu == pytest.approx(989.5 / 2)
    assert seen == Seen("t1", "n1", T0 + 100)
    [(_, view)] = h.capacity.events()
    assert view["used"]["gpu_milli"] == 500


async def test_preemption_ends_the_charge_and_frees_the_node_at_once() -> None:
    h = Harness(T0)
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 1, T0), b))
    alloc = records.allocation_of(task_placed("t1", "n1", T0))
    await h.run(lambda b: h.metering.apply_placement(alloc, b))
    ended = records.preempted_fact(task_preempted("t1", "n1", T0 + 500))
    await h.run(lambda b: h.metering.apply_preemption("n1", ended, b))
    assert h.facts.facts()[-1] == ended
    h.clock.now_ms = T0 + 600
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 2, T0 + 600, ("t1",)), b))
    assert h.capacity.events()[-1][1]["used"]["gpu_milli"] == 0


async def test_task_facts_from_every_input_become_each_window_once() -> None:
    h = Harness(T0)
    start, end = ms("2025-01-01T10:00:30"), ms("2025-01-01T10:02:15")
    await h.run(lambda b: h.metering.apply_snapshot(snapshot("n1", 1, start - 2000), b))
    facts = [
        *records.job_facts(job_submitted("job-1", ["t1"], start - 60_000)),
        records.lifecycle_fact("TaskStarted", task_started("t1", "n1", start)),
        records.lifecycle_fact("TaskFinished", task_finished("t1", "n1", end)),
        records.lifecycle_fact("TaskFinished", task_finished("t1", "n1", end)),  # redelivered
    ]
    alloc = records.allocation_of(task_placed("t1", "n1", start - 1000, devices=[(1, 500)], cpu_milli=2000))
    await h.run(lambda b: h.metering.apply_placement(alloc, b))
    await h.run(lambda b: h.metering.forward_facts([f for f in facts if f is not None], b))
    await h.feed_facts()
    windows = [r for _, r in h.usage.events()]
    assert [w["gpu_milli_seconds"] for w in windows] == [15_000, 30_000, 7_500]
    assert {(w["tenant"], w["queue"], w["job_id"]) for w in windows} == {("acme", "research", "job-1")}
    assert windows[0]["window_start"] == from_ms(start) and windows[-1]["window_end"] == from_ms(end)
    assert len({w["event_id"] for w in windows}) == 3
    assert h.tasks.keys() == {b"t1"}


async def test_a_silent_node_is_lost_only_where_it_is_checked_and_counted_in_the_summary() -> None:
    h = Harness(T0)
    for node in ("mine", "theirs"):
        await h.run(lambda b, n=node: h.metering.apply_snapshot(snapshot(n, 1, T0), b))
    h.clock.now_ms = T0 + 3 * INTERVAL - 1
    summary = await h.run(lambda b: h.metering.check_liveness(b, lambda node: node == "mine"))
    assert statuses(h.status, "mine") == ["READY"]
    assert summary.nodes == {("cn-north", NodeStatus.READY): 2}
    h.clock.now_ms = T0 + 3 * INTERVAL
    summary = await h.run(lambda b: h.metering.check_liveness(b, lambda node: node == "mine"))
    assert statuses(h.status, "mine") == ["READY", "LOST"]
    assert statuses(h.status, "theirs") == ["READY"]  # another worker's to declare
    lost = h.status.events()[-1][1]
    assert lost["occurred_at"] == from_ms(T0 + 3 * INTERVAL)  # when the deadline passed
    assert summary.nodes == {("cn-north", NodeStatus.LOST): 1, ("cn-north", NodeStatus.READY): 1}
    assert summary.by_region["cn-north"].allocatable == pytest.approx(2 * 989.5 + 6.4)
    # Checked again: already Lost, nothing new.
    await h.run(lambda b: h.metering.check_liveness(b, lambda node: True))
    assert statuses(h.status, "mine") == ["READY", "LOST"]


async def test_after_a_start_over_the_owned_records_publish_their_windows_again_with_their_ids() -> None:
    h = Harness(T0)
    await run_task(h, "t1", T0 + 30_000, T0 + 135_000)
    await run_task(h, "t2", T0 + 10_000, T0 + 40_000)
    first = {task: usage_ids(h, task) for task in ("t1", "t2")}
    assert len(first["t1"]) == 3 and len(first["t2"]) == 1
    tables_before = dict(h.tasks)
    published = await h.run(lambda b: h.metering.remeter_tasks(b, lambda task: task == "t1"))
    assert published == 3
    assert usage_ids(h, "t1") == first["t1"] * 2  # the same windows again: billing claims each id once
    assert usage_ids(h, "t2") == first["t2"]  # another worker's record: not this worker's to publish
    assert dict(h.tasks) == tables_before  # how far each was metered is unchanged: nothing to write
