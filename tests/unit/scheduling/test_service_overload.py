"""Overload protection in the scheduler's service layer: admission in waves, a Lost node only a suspicion
for non-preemptible work, and a stop order for every attempt requeued from a lost node."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from _scheduler import T0, Harness, harness

from suanli.scheduling.domain.jobs import (
    DEFAULT_LOST_FENCE,
    WAITING_FOR_LOST_ATTEMPT,
    WAITING_FOR_WAVE,
    AcceptedSpec,
    AcceptedTask,
    Phase,
)
from suanli.scheduling.domain.jobs import TaskRunState as TaskState
from suanli.scheduling.service_layer.commands import CancelJob, RecordTaskReport, SubmitJob
from suanli.scheduling.service_layer.disruption import DEFAULT_LOST_CONFIRM
from suanli.scheduling.testing import task_report


def _cpu_job(
    tasks: int, *, best_effort: bool = False, preemptible: bool = True, gang: int = 0
) -> AcceptedSpec:
    return AcceptedSpec(
        name="j",
        queue="acme",
        min_available=gang or tasks,
        best_effort=best_effort,
        preemptible=preemptible,
        tasks=tuple(AcceptedTask("", f"t{i}", cpu_milli=1000, argv=("run",)) for i in range(tasks)),
    )


def _gpu_job(*, preemptible: bool) -> AcceptedSpec:
    return AcceptedSpec(
        name="g",
        queue="acme",
        min_available=1,
        preemptible=preemptible,
        tasks=(AcceptedTask("", "w", cpu_milli=1000, gpu_count=1, gpu_milli=1000, argv=("run",)),),
    )


def _started(task: Any, job_id: str) -> RecordTaskReport:
    return task_report("TaskStarted", task, job_id, T0, device_indices=[], pid=None)


@dataclass(frozen=True)
class _Attempt:
    task_id: str
    node_id: str
    attempt: int


def _states(h: Harness, job_id: str) -> list[TaskState]:
    return [t.state for t in h.projection.jobs[job_id].tasks]


async def _ready(**kw: Any) -> Harness:
    h = harness(**kw)
    await h.configure()
    return h


async def test_a_large_job_is_placed_in_waves_each_once_the_previous_one_started() -> None:
    h = await _ready(wave_size=2)
    job = await h.scheduler.commands.handle(SubmitJob(_cpu_job(5, best_effort=True)))
    assert await h.scheduler.cycles.run() == 1
    assert _states(h, job.id).count(TaskState.PLACED) == 2
    # The first wave has not started: the rest waits, with a reason that says so.
    assert await h.scheduler.cycles.run() == 0
    reason = h.projection.pending_reasons[job.id]
    assert reason["code"] == WAITING_FOR_WAVE and reason["placed"] == 2 and reason["total"] == 5
    for t in h.projection.jobs[job.id].tasks[:2]:
        await h.scheduler.commands.handle(_started(t, job.id))
    assert await h.scheduler.cycles.run() == 1
    assert _states(h, job.id) == [TaskState.RUNNING] * 2 + [TaskState.PLACED] * 2 + [TaskState.PENDING]
    for t in h.projection.jobs[job.id].tasks[2:4]:
        await h.scheduler.commands.handle(_started(t, job.id))
    await h.scheduler.cycles.run()
    assert _states(h, job.id)[-1] is TaskState.PLACED
    # Cancelling it stops what was placed and leaves nothing waiting.
    await h.scheduler.commands.handle(CancelJob(job.id, "too big"))
    assert h.projection.jobs[job.id].phase is Phase.CANCELLED
    assert await h.scheduler.cycles.run() == 0
    # A job submitted after the cancel is placed at once, while the cancelled one's tasks still stop.
    probe = await h.scheduler.commands.handle(SubmitJob(_cpu_job(1)))
    assert await h.scheduler.cycles.run() == 1
    assert _states(h, probe.id) == [TaskState.PLACED]


async def test_a_gang_larger_than_a_wave_is_placed_whole() -> None:
    h = await _ready(wave_size=2)
    job = await h.scheduler.commands.handle(SubmitJob(_cpu_job(4)))  # guaranteed, a gang of 4
    assert await h.scheduler.cycles.run() == 1
    assert _states(h, job.id) == [TaskState.PLACED] * 4


async def test_a_gang_within_a_wave_is_placed_together_in_the_first_wave() -> None:
    h = await _ready(wave_size=3)
    job = await h.scheduler.commands.handle(SubmitJob(_cpu_job(5, gang=2)))
    await h.scheduler.cycles.run()
    assert _states(h, job.id).count(TaskState.PLACED) == 3


async def _running_on_lost_node(h: Harness, spec: AcceptedSpec) -> tuple[str, str]:
    job = await h.scheduler.commands.handle(SubmitJob(spec))
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job.id].tasks[0]
    await h.scheduler.commands.handle(_started(task, job.id))
    h.clock.set(T0 + timedelta(seconds=10))
    h.capacity.on_status({"node_id": task.node_id, "status": "LOST", "occurred_at": h.clock.now()})
    return job.id, task.node_id


async def test_a_suspected_loss_stops_nothing_of_a_non_preemptible_job_until_it_is_confirmed() -> None:
    h = await _ready(nodes=("n1", "n2", "n3", "n4"))
    job_id, node = await _running_on_lost_node(h, _gpu_job(preemptible=False))
    await h.scheduler.evictions.sweep()
    assert _states(h, job_id) == [TaskState.RUNNING]
    assert "TaskStopRequested" not in await h.names()
    # Lost for long enough: now it is requeued, and its lost attempt told to stop.
    h.clock.set(T0 + timedelta(seconds=10) + DEFAULT_LOST_CONFIRM)
    await h.scheduler.evictions.sweep()
    view = h.projection.jobs[job_id]
    assert view.waiting and view.restarts == 1
    stops = [r for n, r in await h.recorded() if n == "TaskStopRequested"]
    assert [(s["task_id"], s["node_id"], s["attempt"]) for s in stops] == [(view.tasks[0].task_id, node, 1)]


def _ended(task_id: str, job_id: str, node_id: str, attempt: int) -> RecordTaskReport:
    """The lost node's agent reporting that it stopped the attempt (it was alive after all)."""
    event_id = str(uuid.uuid4())
    record = {
        "event_id": event_id,
        "occurred_at": T0,
        "producer": "agent",
        "subject_id": task_id,
        "task_id": task_id,
        "job_id": job_id,
        "node_id": node_id,
        "attempt": attempt,
        "reason": f"stopped: node {node_id} was lost: attempt {attempt} is requeued",
        "kind": "KILLED",
        "exit_code": None,
    }
    return RecordTaskReport("TaskFailed", record, event_id)


async def test_a_preemptible_job_is_requeued_at_once_with_a_stop_order_for_its_lost_attempt() -> None:
    h = await _ready(nodes=("n1", "n2", "n3", "n4"))
    job_id, node = await _running_on_lost_node(h, _gpu_job(preemptible=True))
    await h.scheduler.evictions.sweep()
    view = h.projection.jobs[job_id]
    assert view.waiting and view.restarts == 1
    names = await h.names()
    # The stop order for the lost attempt is recorded with the requeue, before the next attempt exists.
    assert names.index("TaskStopRequested") < names.index("JobRequeued")
    stop = next(r for n, r in await h.recorded() if n == "TaskStopRequested")
    assert (stop["node_id"], stop["attempt"]) == (node, 1) and "lost" in stop["reason"]
    assert [(a.task_id, a.node_id, a.attempt) for a in view.lost_attempts] == [(stop["task_id"], node, 1)]


async def test_the_next_attempt_waits_until_the_lost_node_reports_the_old_one_ended() -> None:
    # The node was alive after all (a broker restart, a starved agent): the next attempt must not start
    # on another node before the old one has stopped, or two attempts of the task run side by side.
    h = await _ready(nodes=("n1", "n2", "n3", "n4"))
    job_id, node = await _running_on_lost_node(h, _gpu_job(preemptible=True))
    await h.scheduler.evictions.sweep()
    task_id = h.projection.jobs[job_id].tasks[0].task_id
    await h.scheduler.cycles.run()
    assert _states(h, job_id) == [TaskState.PENDING]
    reason = h.projection.pending_reasons[job_id]
    assert reason["code"] == WAITING_FOR_LOST_ATTEMPT
    assert reason["message"].startswith(f"attempt 1 of task {task_id} on lost node {node} has not reported")
    assert reason["nodes"] == [node]
    # A start of the old attempt (its placement re-sent before the loss) changes nothing.
    assert await h.scheduler.commands.handle(_started(_Attempt(task_id, node, 1), job_id)) is False
    assert await h.scheduler.commands.handle(_ended(task_id, job_id, node, 1)) is True
    assert h.projection.jobs[job_id].lost_attempts == ()
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job_id].tasks[0]
    assert (task.state, task.attempt) == (TaskState.PLACED, 2)


async def test_a_lost_attempt_never_reported_is_waited_for_one_fence_then_the_job_runs() -> None:
    h = await _ready(nodes=("n1", "n2", "n3", "n4"))
    job_id, _ = await _running_on_lost_node(h, _gpu_job(preemptible=True))
    await h.scheduler.evictions.sweep()
    stop_sent = h.clock.now()
    h.clock.set(stop_sent + DEFAULT_LOST_FENCE - timedelta(milliseconds=1))
    await h.scheduler.cycles.run()
    assert _states(h, job_id) == [TaskState.PENDING]
    # The node's agent has fenced itself by now (SUANLI_AGENT_SELF_FENCE_S <= the scheduler's fence).
    h.clock.set(stop_sent + DEFAULT_LOST_FENCE)
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job_id].tasks[0]
    assert (task.state, task.attempt) == (TaskState.PLACED, 2)


async def test_the_reports_of_one_large_job_share_one_commit() -> None:
    h = await _ready()
    job = await h.scheduler.commands.handle(SubmitJob(_cpu_job(50, best_effort=True)))
    await h.scheduler.cycles.run()
    tasks = h.projection.jobs[job.id].tasks
    before = len(h.store.commits)
    answers = await asyncio.gather(*(h.scheduler.commands.handle(_started(t, job.id)) for t in tasks))
    assert answers == [True] * 50
    assert _states(h, job.id) == [TaskState.RUNNING] * 50
    # One batch, one append to the job's stream: not one commit per report.
    assert h.store.commits[before:] == [1]


async def _running(h: Harness) -> tuple[str, str]:
    job = await h.scheduler.commands.handle(SubmitJob(_gpu_job(preemptible=True)))
    await h.scheduler.cycles.run()
    task = h.projection.jobs[job.id].tasks[0]
    await h.scheduler.commands.handle(_started(task, job.id))
    return job.id, task.node_id


def _status(h: Harness, node: str, status: str, at: timedelta) -> None:
    h.capacity.on_status({"node_id": node, "status": status, "occurred_at": T0 + at})


async def test_lost_statuses_held_up_by_an_outage_are_judged_as_one_burst() -> None:
    nodes = ("n1", "n2", "n3", "n4")
    h = await _ready(nodes=nodes, lost_settle=timedelta(seconds=2))
    job_id, node = await _running(h)
    # The broker was away for 25 s: metering's Lost statuses arrive once it is back, one after the other.
    h.clock.set(T0 + timedelta(seconds=30))
    _status(h, node, "LOST", timedelta(seconds=5))
    await h.scheduler.evictions.sweep()  # the first of the burst alone: one node of four
    for other in nodes:
        _status(h, other, "LOST", timedelta(seconds=5))
    h.clock.set(T0 + timedelta(seconds=33))
    await h.scheduler.evictions.sweep()  # the whole burst: every node Lost, evictions held
    for other in nodes:
        _status(h, other, "READY", timedelta(seconds=31))
    await h.scheduler.evictions.sweep()
    assert _states(h, job_id) == [TaskState.RUNNING]
    assert "TaskStopRequested" not in await h.names()


async def test_a_node_lost_alone_is_evicted_once_its_loss_has_settled() -> None:
    h = await _ready(nodes=("n1", "n2", "n3", "n4"), lost_settle=timedelta(seconds=2))
    job_id, node = await _running(h)
    h.clock.set(T0 + timedelta(seconds=10))
    _status(h, node, "LOST", timedelta(seconds=10))
    await h.scheduler.evictions.sweep()
    assert _states(h, job_id) == [TaskState.RUNNING]
    h.clock.set(T0 + timedelta(seconds=12))
    await h.scheduler.evictions.sweep()
    assert h.projection.jobs[job_id].waiting and h.projection.jobs[job_id].restarts == 1
