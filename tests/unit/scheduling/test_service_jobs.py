"""The job commands and the cycle runner over the real writer on the in-memory event store: no broker,
no database."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from _scheduler import T0, Harness, fgdx, harness

from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask, Phase
from suanli.scheduling.domain.jobs import TaskRunState as TaskState
from suanli.scheduling.domain.queueing import Placer
from suanli.scheduling.service_layer.commands import (
    CancelJob,
    MarkNodeLost,
    ReconcileNode,
    RecordTaskReport,
    SubmitJob,
)
from suanli.scheduling.service_layer.cycle import CycleMemo, cluster_state
from suanli.scheduling.service_layer.ports import Append
from suanli.scheduling.testing import task_report


def _spec(tasks: int = 1, gpu_milli: int = 1000, max_retries: int = 0, **kw: Any) -> AcceptedSpec:
    return AcceptedSpec(
        name="j",
        queue="acme",
        min_available=tasks,
        max_retries=max_retries,
        tasks=tuple(
            AcceptedTask("", f"t{i}", cpu_milli=1000, gpu_count=1, gpu_milli=gpu_milli, argv=("run",))
            for i in range(tasks)
        ),
        **kw,
    )


async def _ready(**kw: Any) -> Harness:
    h = harness(**kw)
    await h.configure()
    return h


def _report(name: str, task: Any, job_id: str, **extra: Any) -> RecordTaskReport:
    return task_report(name, task, job_id, T0, **extra)


async def test_gang_is_placed_whole_and_runs_to_success() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=3)))
    assert job.phase is Phase.PENDING and job.tasks[0].task_id == f"{job.id}-t0"
    assert await h.scheduler.cycles.run() == 1
    job = h.projection.jobs[job.id]
    assert [t.state for t in job.tasks] == [TaskState.PLACED] * 3
    assert len({(t.node_id, t.gpu_indices) for t in job.tasks}) == 3
    for t in job.tasks:
        assert await h.scheduler.commands.handle(
            _report("TaskStarted", t, job.id, device_indices=[], pid=None)
        )
    assert h.projection.jobs[job.id].phase is Phase.RUNNING
    for t in job.tasks:
        await h.scheduler.commands.handle(_report("TaskFinished", t, job.id, exit_code=0))
    assert h.projection.jobs[job.id].phase is Phase.SUCCEEDED
    assert [n for n, _ in (await h.recorded())].count("JobSucceeded") == 1


async def test_redelivered_and_stale_reports_change_nothing() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job.id].tasks[0]
    report = _report("TaskStarted", task, job.id, device_indices=[], pid=None)
    assert await h.scheduler.commands.handle(report)
    assert not await h.scheduler.commands.handle(report)  # the same event again
    stale = _report("TaskFinished", task, job.id, exit_code=0)
    stale.record["attempt"] = 7  # type: ignore[index]
    assert not await h.scheduler.commands.handle(stale)


async def test_failure_with_retries_requeues_the_whole_gang_then_fails_for_good() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=2, max_retries=1)))
    await h.scheduler.cycles.run()
    first, second = h.projection.jobs[job.id].tasks
    await h.scheduler.commands.handle(_report("TaskFinished", first, job.id, exit_code=3))
    view = h.projection.jobs[job.id]
    assert view.tasks[1].state is TaskState.STOPPING  # its sibling is told to stop
    assert (await h.recorded())[-1][0] == "TaskStopRequested"
    await h.scheduler.commands.handle(
        _report("TaskFailed", second, job.id, reason="stopped", kind="KILLED", exit_code=-15)
    )
    view = h.projection.jobs[job.id]
    assert view.phase is Phase.PENDING and view.attempt == 2 and view.restarts == 1 and view.waiting
    await h.scheduler.cycles.run()
    again = h.projection.jobs[job.id].tasks[0]
    assert again.attempt == 2
    await h.scheduler.commands.handle(
        _report("TaskFailed", again, job.id, reason="oom", kind="OOM", exit_code=None)
    )
    view = h.projection.jobs[job.id]
    assert view.phase is Phase.FAILED
    assert "retries exhausted" in dict((await h.recorded())[-1][1])["reason"]


async def test_lost_node_requeues_without_charging_retries_and_cancel_is_final() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=1)))
    await h.scheduler.cycles.run()
    node = h.projection.jobs[job.id].tasks[0].node_id
    h.clock.set(T0 + timedelta(seconds=10))
    assert await h.scheduler.commands.handle(MarkNodeLost(node, h.clock.now())) == 1
    view = h.projection.jobs[job.id]
    assert view.waiting and view.restarts == 1 and view.failures == 0
    cancelled = await h.scheduler.commands.handle(CancelJob(job.id, "no longer needed"))
    assert cancelled.phase is Phase.CANCELLED
    assert (await h.scheduler.commands.handle(CancelJob(job.id))).phase is Phase.CANCELLED  # a retried cancel


async def test_fractional_jobs_never_push_a_device_past_1000() -> None:
    h = await _ready()
    for _ in range(6):
        await h.scheduler.commands.handle(SubmitJob(_spec(gpu_milli=300)))
    await h.scheduler.cycles.run()
    per_device: dict[tuple[str, int], int] = {}
    for job in h.projection.jobs.values():
        for t in job.active:
            for i, m in zip(t.gpu_indices, t.gpu_milli, strict=True):
                per_device[(t.node_id, i)] = per_device.get((t.node_id, i), 0) + m
    assert sum(per_device.values()) == 1800 and max(per_device.values()) <= 1000
    assert len(per_device) == 2  # packed: three per device


async def test_reconcile_resends_placements_and_stops_unknown_tasks_after_grace() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job.id].tasks[0]
    snapshot = {"node_id": task.node_id, "occurred_at": T0, "task_ids": ["ghost"]}
    h.clock.set(T0)
    assert (
        await h.scheduler.commands.handle(ReconcileNode(snapshot)) == 1
    )  # only the ghost: the placement is fresh
    assert (await h.recorded())[-1][1]["task_id"] == "ghost" and (await h.recorded())[-1][
        0
    ] == "TaskStopRequested"
    h.clock.set(T0 + timedelta(seconds=6))
    later = {**snapshot, "occurred_at": h.clock.now()}
    assert (
        await h.scheduler.commands.handle(ReconcileNode(later)) == 2
    )  # past the grace: the placement, the stop again
    sent = {name: record for name, record in (await h.recorded())[-2:]}
    assert sent["TaskPlaced"]["task_id"] == task.task_id and sent["TaskPlaced"]["attempt"] == 1
    assert sent["TaskStopRequested"]["task_id"] == "ghost"
    assert await h.scheduler.commands.handle(ReconcileNode(later)) == 0  # the grace period starts again
    stale = {**snapshot, "occurred_at": T0 - timedelta(minutes=5)}
    assert await h.scheduler.commands.handle(ReconcileNode(stale)) == 0


async def test_cycle_reuses_unchanged_workloads_and_forgets_finished_jobs() -> None:
    h = await _ready()
    waiting = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=1, gpu_milli=1000)))
    too_big = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=8)))  # cannot fit: stays pending
    nodes = h.capacity.schedulable()
    memo = CycleMemo()
    first = cluster_state(h.projection, nodes, memo)
    second = cluster_state(h.projection, nodes, memo)
    assert [w.job for w in second.pending] == [w.job for w in first.pending]
    assert all(a is b for a, b in zip(first.pending, second.pending, strict=True))  # reused, not rebuilt
    assert {key[0] for key in memo.workloads} == {waiting.id, too_big.id}
    await h.scheduler.commands.handle(CancelJob(waiting.id, "done with it"))
    cluster_state(h.projection, nodes, memo)
    assert {key[0] for key in memo.workloads} == {too_big.id}


async def test_cycle_reuses_running_workloads_while_the_job_and_the_fleet_are_unchanged() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=1)))
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job.id].tasks[0]
    await h.scheduler.commands.handle(_report("TaskStarted", task, job.id, device_indices=[], pid=None))
    memo, nodes = CycleMemo(), h.capacity.schedulable()
    (first,) = cluster_state(h.projection, nodes, memo).running
    (second,) = cluster_state(h.projection, nodes, memo).running
    assert second is first  # the books count only what is not the very same object
    (other_fleet,) = cluster_state(h.projection, tuple(list(nodes)), memo).running  # another tuple
    assert other_fleet is not first and other_fleet == first
    await h.scheduler.commands.handle(_report("TaskFinished", task, job.id, exit_code=0))
    assert cluster_state(h.projection, nodes, memo).running == ()
    assert memo.running == {}


async def test_concurrent_commands_are_committed_together_in_arrival_order() -> None:
    h = await _ready()
    before = len(h.store.commits)
    submitted = await asyncio.gather(*(h.scheduler.commands.handle(SubmitJob(_spec())) for _ in range(5)))
    assert h.store.commits[before:] == [5]  # one transaction for the five
    assert [j.seq for j in submitted] == sorted(j.seq for j in submitted)
    assert len({j.seq for j in submitted}) == 5
    assert all(h.projection.jobs[j.id].waiting for j in submitted)


async def test_a_redelivered_report_in_a_batch_answers_alone() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=2)))
    await h.scheduler.cycles.run()
    first, second = h.projection.jobs[job.id].tasks
    started = _report("TaskStarted", first, job.id, device_indices=[], pid=None)
    assert await h.scheduler.commands.handle(started)
    # A recorded event id again, in a report the projection cannot recognise as seen (so only the store's
    # duplicate check catches it), next to a new submit: the store refuses the batch, each command then
    # gets its own answer; the third touches the same job as the first and waits for the next batch.
    other = await h.scheduler.commands.handle(SubmitJob(_spec()))
    # (A valid TaskFinished record: the real writer encodes it before the store checks its id.)
    fields = {k: v for k, v in started.record.items() if k not in ("device_indices", "pid")}
    replayed = RecordTaskReport("TaskFinished", {**fields, "exit_code": 0}, started.event_id)
    results = await asyncio.gather(
        h.scheduler.commands.handle(replayed),
        h.scheduler.commands.handle(SubmitJob(_spec())),
        h.scheduler.commands.handle(_report("TaskStarted", second, job.id, device_indices=[], pid=None)),
    )
    assert results[0] is False
    assert results[1].id != other.id and results[1].id in h.projection.jobs
    assert results[2] is True
    assert h.projection.jobs[job.id].tasks[1].state is TaskState.RUNNING


async def test_two_reports_of_one_job_in_a_batch_are_both_recorded_in_order() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await h.scheduler.cycles.run()
    (task,) = h.projection.jobs[job.id].tasks
    started = _report("TaskStarted", task, job.id, device_indices=[], pid=None)
    finished = _report("TaskFinished", task, job.id, exit_code=0)
    assert await asyncio.gather(
        h.scheduler.commands.handle(started), h.scheduler.commands.handle(finished)
    ) == [True, True]
    assert h.projection.jobs[job.id].phase is Phase.SUCCEEDED


async def test_a_caller_that_gives_up_does_not_undo_the_batch() -> None:
    h = await _ready()
    async with h.scheduler.write_lock.held():  # hold the batch back until both callers are queued
        gone = asyncio.create_task(h.scheduler.commands.handle(SubmitJob(replace(_spec(), name="gone"))))
        kept = asyncio.create_task(h.scheduler.commands.handle(SubmitJob(replace(_spec(), name="kept"))))
        await asyncio.sleep(0)
        gone.cancel()
    job = await kept
    assert job.spec.name == "kept"
    assert sorted(j.spec.name for j in h.projection.jobs.values()) == ["gone", "kept"]


async def test_cycle_with_nothing_waiting_commits_nothing() -> None:
    h = await _ready()
    before = len(h.store.commits)
    assert await h.scheduler.cycles.run() == 0
    assert h.store.commits[before:] == []


async def test_a_reconciliation_planned_again_in_the_next_batch_still_sends_its_stop() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job.id].tasks[0]
    h.clock.set(T0 + timedelta(seconds=6))  # past the grace: the placement would be re-sent
    snapshot = {"node_id": task.node_id, "occurred_at": h.clock.now(), "task_ids": ["ghost"]}
    started = _report("TaskStarted", task, job.id, device_indices=[], pid=None)
    # Both touch the job's stream, so the reconciliation waits for the next batch and is planned again
    # on the recorded start (nothing to re-send); its first plan's stop was never sent and must not count.
    assert await asyncio.gather(
        h.scheduler.commands.handle(started), h.scheduler.commands.handle(ReconcileNode(snapshot))
    ) == [True, 1]
    assert [r["task_id"] for n, r in (await h.recorded()) if n == "TaskStopRequested"] == ["ghost"]


async def test_only_commits_that_may_let_a_job_in_wake_the_cycle() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    assert h.scheduler.loop.woken  # a new job
    await h.scheduler.cycles.run()
    (task,) = h.projection.jobs[job.id].tasks
    async with h.scheduler.write_lock.held():
        await h.scheduler.loop.turn_if_woken()  # the wake is consumed (by a cycle with nothing to do)
    assert not h.scheduler.loop.woken
    await h.scheduler.commands.handle(_report("TaskStarted", task, job.id, device_indices=[], pid=None))
    assert not h.scheduler.loop.woken  # a start gives nothing back
    await h.scheduler.commands.handle(_report("TaskFinished", task, job.id, exit_code=0))
    assert h.scheduler.loop.woken  # its room is free again


async def test_a_store_error_fails_that_batch_only_and_the_next_command_is_served() -> None:
    h = await _ready()
    commit = h.writer.commit

    async def broken(appends: Sequence[Append], pending: Mapping[str, Any] | None = None) -> None:
        h.writer.commit = commit  # type: ignore[method-assign]
        raise OSError("connection reset")

    h.writer.commit = broken  # type: ignore[method-assign]
    with pytest.raises(OSError, match="connection reset"):
        await h.scheduler.commands.handle(SubmitJob(_spec()))
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    assert list(h.projection.jobs) == [job.id]


async def _drained(h: Harness) -> None:
    async with (
        h.scheduler.write_lock.held()
    ):  # the group commit holds the lock until its queue and turns are done
        pass


async def test_eager_cycles_place_a_submitted_job_before_the_lock_is_released() -> None:
    h = await _ready(eager_cycles=True)
    job = await h.scheduler.commands.handle(SubmitJob(_spec(tasks=2)))
    await _drained(h)
    assert [t.state for t in h.projection.jobs[job.id].tasks] == [TaskState.PLACED] * 2
    assert [n for n, _ in (await h.recorded())].count("TaskPlaced") == 2
    assert not h.scheduler.loop.woken  # the turn consumed the wake; the cycle loop has nothing to do


async def test_eager_cycles_run_only_after_a_batch_that_woke_them() -> None:
    h = await _ready(eager_cycles=True)
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await _drained(h)
    cycles = h.scheduler.cycles.count
    (task,) = h.projection.jobs[job.id].tasks
    await h.scheduler.commands.handle(_report("TaskStarted", task, job.id, device_indices=[], pid=None))
    await _drained(h)
    assert h.scheduler.cycles.count == cycles  # a start gives no room back: no cycle
    await h.scheduler.commands.handle(_report("TaskFinished", task, job.id, exit_code=0))
    await _drained(h)
    assert h.scheduler.cycles.count == cycles + 1


async def test_a_failing_eager_cycle_leaves_the_wake_set_and_later_commands_are_served() -> None:
    broke: list[bool] = []

    def breaks_once(requests: Any, cycle: int) -> Placer:
        if not broke:
            broke.append(True)
            raise RuntimeError("placer broke")
        return fgdx(requests, cycle)

    h = await _ready(eager_cycles=True, placer_factory=breaks_once)
    first = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await _drained(h)
    assert h.projection.jobs[first.id].waiting
    assert h.scheduler.loop.woken  # the cycle loop tries again
    second = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await _drained(h)
    placed = [t.state for j in (first, second) for t in h.projection.jobs[j.id].tasks]
    assert placed == [TaskState.PLACED] * 2


async def test_a_cancel_gets_the_lock_between_batches_while_submits_keep_coming() -> None:
    h = await _ready(eager_cycles=True)
    job = await h.scheduler.commands.handle(SubmitJob(_spec()))
    await _drained(h)
    commit, entered, gate = h.writer.commit, asyncio.Event(), asyncio.Event()

    async def held(appends: Sequence[Append], pending: Mapping[str, Any] | None = None) -> None:
        entered.set()
        await gate.wait()
        await commit(appends, pending)

    h.writer.commit = held  # type: ignore[method-assign]
    first = asyncio.create_task(h.scheduler.commands.handle(SubmitJob(replace(_spec(), name="first"))))
    await asyncio.wait_for(entered.wait(), 5)  # the drainer holds the lock, mid-commit
    later = [
        asyncio.create_task(h.scheduler.commands.handle(SubmitJob(replace(_spec(), name="later"))))
        for _ in range(3)
    ]
    cancel = asyncio.create_task(h.scheduler.commands.handle(CancelJob(job.id, "stop")))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, cancel, *later)
    names = [r.get("name") if n == "JobSubmitted" else n for n, r in (await h.recorded())]
    tail = [n for n in names if n in ("first", "later", "JobCancelled")]
    # Submits were still queued when the first batch ended: the cancel went in before them, not after.
    assert tail == ["first", "JobCancelled", "later", "later", "later"]
