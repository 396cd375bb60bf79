"""The Job aggregate and the service's handlers over fakes: no broker, no database."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

import pytest

from suanli.contracts import encode
from suanli.eventstore import ConcurrencyConflict, DuplicateEventId, StoredEvent
from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec, ResourceQuota
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import (
    CancelJob,
    ConfigureQueues,
    MarkNodeLost,
    ReconcileNode,
    RecordTaskReport,
    RunCycle,
    SubmitJob,
)
from suanli.scheduling.service_layer.cycle import WorkloadCache, cluster_state
from suanli.scheduling.service_layer.jobs import Phase, TaskState
from suanli.scheduling.service_layer.ports import Append
from suanli.scheduling.service_layer.projection import JSON_EVENTS, Projection
from suanli.scheduling.service_layer.queues_config import QueueConfig
from suanli.scheduling.service_layer.service import SchedulingService
from suanli.scheduling.service_layer.spec import JobSpec, TaskSpec

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.at = T0

    def now(self) -> datetime:
        return self.at


class FakeWriter:
    """Records what would be committed, and folds it into the projection like the store would."""

    def __init__(self) -> None:
        self.log: list[StoredEvent] = []
        self.published: list[tuple[str, dict[str, Any]]] = []
        self.commits: list[int] = []  # appends per transaction
        self._ids: set[uuid.UUID] = set()
        self._versions: dict[str, int] = {}
        self._pos = count(1)

    async def commit(self, appends: Sequence[Append], pending: Mapping[str, Any] | None = None) -> None:
        ids = [e.event_id for a in appends for e in a.events]
        if self._ids & set(ids):
            raise DuplicateEventId(sorted(self._ids & set(ids)))
        for a in appends:
            if self._versions.get(a.stream, 0) != a.expected_version:
                raise ConcurrencyConflict(a.stream, a.expected_version, self._versions.get(a.stream, 0))
        self.commits.append(len(appends))
        for a in appends:
            self._versions[a.stream] = a.expected_version + len(a.events)
            for i, e in enumerate(a.events):
                self._ids.add(e.event_id)
                if e.name in JSON_EVENTS:
                    payload = json.dumps(dict(e.record), default=str).encode()
                else:
                    payload = encode(e.name, dict(e.record))
                self.log.append(
                    StoredEvent(
                        a.stream,
                        a.expected_version + i + 1,
                        next(self._pos),
                        e.event_id,
                        e.name,
                        payload,
                        T0,
                        e.metadata,
                    )
                )
                self.published.append((e.name, dict(e.record)))

    async def catch_up(self, projection: Projection) -> None:
        projection.apply_all(e for e in self.log if e.position > projection.position)


def _service(*, eager_cycles: bool = False) -> tuple[SchedulingService, FakeWriter, Clock]:
    writer, clock = FakeWriter(), Clock()
    capacity = CapacityView()
    for node in ("n1", "n2"):
        res = {"cpu_milli": 64000, "memory_mib": 262144}
        capacity.on_capacity(
            {
                "node_id": node,
                "region": "r",
                "zone": "z",
                "site": "s",
                "allocatable": res,
                "devices": [{"index": i, "model": "A100", "memory_total_mib": 1} for i in range(2)],
            }
        )
    service = SchedulingService(
        writer,
        Projection(),
        capacity,
        lambda reqs, cycle: FrameworkPlacer.for_policy("fgdx", DEFAULT_TYPICAL),
        clock=clock,
        ids=uuid.uuid4,
        reconcile_grace=timedelta(seconds=5),
        eager_cycles=eager_cycles,
    )
    return service, writer, clock


def _spec(tasks: int = 1, gpu_milli: int = 1000, max_retries: int = 0, **kw: Any) -> JobSpec:
    return JobSpec(
        name="j",
        queue="acme",
        min_available=tasks,
        max_retries=max_retries,
        tasks=tuple(
            TaskSpec("", f"t{i}", cpu_milli=1000, gpu_count=1, gpu_milli=gpu_milli, argv=("run",))
            for i in range(tasks)
        ),
        **kw,
    )


async def _ready(*, eager_cycles: bool = False) -> tuple[SchedulingService, FakeWriter, Clock]:
    service, writer, clock = _service(eager_cycles=eager_cycles)
    await service.handle(
        ConfigureQueues(
            QueueConfig(
                (QueueSpec("acme", (ResourceQuota("gpu:A100", 4000),)),), (PriorityClass("high", 10),)
            )
        )
    )
    return service, writer, clock


def _report(name: str, task: Any, job_id: str, **extra: Any) -> RecordTaskReport:
    record = {
        "event_id": str(uuid.uuid4()),
        "occurred_at": T0,
        "producer": "agent",
        "subject_id": task.task_id,
        "task_id": task.task_id,
        "job_id": job_id,
        "node_id": task.node_id,
        "attempt": task.attempt,
        **extra,
    }
    return RecordTaskReport(name, record, record["event_id"])


async def test_gang_is_placed_whole_and_runs_to_success() -> None:
    service, writer, _ = await _ready()
    job = await service.handle(SubmitJob(_spec(tasks=3)))
    assert job.phase is Phase.PENDING and job.tasks[0].task_id == f"{job.id}-t0"
    assert await service.handle(RunCycle()) == 1
    job = service.projection.jobs[job.id]
    assert [t.state for t in job.tasks] == [TaskState.PLACED] * 3
    assert len({(t.node_id, t.gpu_indices) for t in job.tasks}) == 3
    for t in job.tasks:
        assert await service.handle(_report("TaskStarted", t, job.id, device_indices=[], pid=None))
    assert service.projection.jobs[job.id].phase is Phase.RUNNING
    for t in job.tasks:
        await service.handle(_report("TaskFinished", t, job.id, exit_code=0))
    assert service.projection.jobs[job.id].phase is Phase.SUCCEEDED
    assert [n for n, _ in writer.published].count("JobSucceeded") == 1


async def test_redelivered_and_stale_reports_change_nothing() -> None:
    service, _, _ = await _ready()
    job = await service.handle(SubmitJob(_spec()))
    await service.handle(RunCycle())
    task = service.projection.jobs[job.id].tasks[0]
    report = _report("TaskStarted", task, job.id, device_indices=[], pid=None)
    assert await service.handle(report)
    assert not await service.handle(report)  # the same event again
    stale = _report("TaskFinished", task, job.id, exit_code=0)
    stale.record["attempt"] = 7  # type: ignore[index]
    assert not await service.handle(stale)


async def test_failure_with_retries_requeues_the_whole_gang_then_fails_for_good() -> None:
    service, writer, _ = await _ready()
    job = await service.handle(SubmitJob(_spec(tasks=2, max_retries=1)))
    await service.handle(RunCycle())
    first, second = service.projection.jobs[job.id].tasks
    await service.handle(_report("TaskFinished", first, job.id, exit_code=3))
    view = service.projection.jobs[job.id]
    assert view.tasks[1].state is TaskState.STOPPING  # its sibling is told to stop
    assert writer.published[-1][0] == "TaskStopRequested"
    await service.handle(
        _report("TaskFailed", second, job.id, reason="stopped", kind="KILLED", exit_code=-15)
    )
    view = service.projection.jobs[job.id]
    assert view.phase is Phase.PENDING and view.attempt == 2 and view.restarts == 1 and view.waiting
    await service.handle(RunCycle())
    again = service.projection.jobs[job.id].tasks[0]
    assert again.attempt == 2
    await service.handle(_report("TaskFailed", again, job.id, reason="oom", kind="OOM", exit_code=None))
    view = service.projection.jobs[job.id]
    assert view.phase is Phase.FAILED
    assert "retries exhausted" in dict(writer.published[-1][1])["reason"]


async def test_lost_node_requeues_without_charging_retries_and_cancel_is_final() -> None:
    service, _, clock = await _ready()
    job = await service.handle(SubmitJob(_spec(tasks=1)))
    await service.handle(RunCycle())
    node = service.projection.jobs[job.id].tasks[0].node_id
    clock.at = T0 + timedelta(seconds=10)
    assert await service.handle(MarkNodeLost(node, clock.at)) == 1
    view = service.projection.jobs[job.id]
    assert view.waiting and view.restarts == 1 and view.failures == 0
    cancelled = await service.handle(CancelJob(job.id, "no longer needed"))
    assert cancelled.phase is Phase.CANCELLED
    assert (await service.handle(CancelJob(job.id))).phase is Phase.CANCELLED  # a retried cancel


async def test_fractional_jobs_never_push_a_device_past_1000() -> None:
    service, _, _ = await _ready()
    for _ in range(6):
        await service.handle(SubmitJob(_spec(gpu_milli=300)))
    await service.handle(RunCycle())
    per_device: dict[tuple[str, int], int] = {}
    for job in service.projection.jobs.values():
        for t in job.active:
            for i, m in zip(t.gpu_indices, t.gpu_milli, strict=True):
                per_device[(t.node_id, i)] = per_device.get((t.node_id, i), 0) + m
    assert sum(per_device.values()) == 1800 and max(per_device.values()) <= 1000
    assert len(per_device) == 2  # packed: three per device


async def test_reconcile_resends_placements_and_stops_unknown_tasks_after_grace() -> None:
    service, writer, clock = await _ready()
    job = await service.handle(SubmitJob(_spec()))
    await service.handle(RunCycle())
    task = service.projection.jobs[job.id].tasks[0]
    snapshot = {"node_id": task.node_id, "occurred_at": T0, "task_ids": ["ghost"]}
    clock.at = T0
    assert await service.handle(ReconcileNode(snapshot)) == 1  # only the ghost: the placement is fresh
    assert writer.published[-1][1]["task_id"] == "ghost" and writer.published[-1][0] == "TaskStopRequested"
    clock.at = T0 + timedelta(seconds=6)
    later = {**snapshot, "occurred_at": clock.at}
    assert await service.handle(ReconcileNode(later)) == 2  # past the grace: the placement, the stop again
    sent = {name: record for name, record in writer.published[-2:]}
    assert sent["TaskPlaced"]["task_id"] == task.task_id and sent["TaskPlaced"]["attempt"] == 1
    assert sent["TaskStopRequested"]["task_id"] == "ghost"
    assert await service.handle(ReconcileNode(later)) == 0  # the grace period starts again
    stale = {**snapshot, "occurred_at": T0 - timedelta(minutes=5)}
    assert await service.handle(ReconcileNode(stale)) == 0


async def test_cycle_reuses_unchanged_workloads_and_forgets_finished_jobs() -> None:
    service, _, _ = await _ready()
    waiting = await service.handle(SubmitJob(_spec(tasks=1, gpu_milli=1000)))
    too_big = await service.handle(SubmitJob(_spec(tasks=8)))  # cannot fit: stays pending
    nodes = service.capacity.schedulable()
    cache: WorkloadCache = {}
    first = cluster_state(service.projection, nodes, cache)
    second = cluster_state(service.projection, nodes, cache)
    assert [w.job for w in second.pending] == [w.job for w in first.pending]
    assert all(a is b for a, b in zip(first.pending, second.pending, strict=True))  # reused, not rebuilt
    assert {key[0] for key in cache} == {waiting.id, too_big.id}
    await service.handle(CancelJob(waiting.id, "done with it"))
    cluster_state(service.projection, nodes, cache)
    assert {key[0] for key in cache} == {too_big.id}


async def test_concurrent_commands_are_committed_together_in_arrival_order() -> None:
    service, writer, _ = await _ready()
    before = len(writer.commits)
    submitted = await asyncio.gather(*(service.handle(SubmitJob(_spec())) for _ in range(5)))
    assert writer.commits[before:] == [5]  # one transaction for the five
    assert [j.seq for j in submitted] == sorted(j.seq for j in submitted)
    assert len({j.seq for j in submitted}) == 5
    assert all(service.projection.jobs[j.id].waiting for j in submitted)


async def test_a_redelivered_report_in_a_batch_answers_alone() -> None:
    service, _, _ = await _ready()
    job = await service.handle(SubmitJob(_spec(tasks=2)))
    await service.handle(RunCycle())
    first, second = service.projection.jobs[job.id].tasks
    started = _report("TaskStarted", first, job.id, device_indices=[], pid=None)
    assert await service.handle(started)
    # A recorded event id again, in a report the projection cannot recognise as seen (so only the store's
    # duplicate check catches it), next to a new submit: the store refuses the batch, each command then
    # gets its own answer; the third touches the same job as the first and waits for the next batch.
    other = await service.handle(SubmitJob(_spec()))
    replayed = RecordTaskReport("TaskFinished", {**started.record, "exit_code": 0}, started.event_id)
    results = await asyncio.gather(
        service.handle(replayed),
        service.handle(SubmitJob(_spec())),
        service.handle(_report("TaskStarted", second, job.id, device_indices=[], pid=None)),
    )
    assert results[0] is False
    assert results[1].id != other.id and results[1].id in service.projection.jobs
    assert results[2] is True
    assert service.projection.jobs[job.id].tasks[1].state is TaskState.RUNNING


async def test_two_reports_of_one_job_in_a_batch_are_both_recorded_in_order() -> None:
    service, _, _ = await _ready()
    job = await service.handle(SubmitJob(_spec()))
    await service.handle(RunCycle())
    (task,) = service.projection.jobs[job.id].tasks
    started = _report("TaskStarted", task, job.id, device_indices=[], pid=None)
    finished = _report("TaskFinished", task, job.id, exit_code=0)
    assert await asyncio.gather(service.handle(started), service.handle(finished)) == [True, True]
    assert service.projection.jobs[job.id].phase is Phase.SUCCEEDED


async def test_a_caller_that_gives_up_does_not_undo_the_batch() -> None:
    service, _, _ = await _ready()
    async with service.lock:  # hold the batch back until both callers are queued
        gone = asyncio.create_task(service.handle(SubmitJob(replace(_spec(), name="gone"))))
        kept = asyncio.create_task(service.handle(SubmitJob(replace(_spec(), name="kept"))))
        await asyncio.sleep(0)
        gone.cancel()
    job = await kept
    assert job.spec.name == "kept"
    assert sorted(j.spec.name for j in service.projection.jobs.values()) == ["gone", "kept"]


async def test_cycle_with_nothing_waiting_commits_nothing() -> None:
    service, writer, _ = await _ready()
    before = len(writer.commits)
    assert await service.handle(RunCycle()) == 0
    assert writer.commits[before:] == []


async def test_a_reconciliation_planned_again_in_the_next_batch_still_sends_its_stop() -> None:
    service, writer, clock = await _ready()
    job = await service.handle(SubmitJob(_spec()))
    await service.handle(RunCycle())
    task = service.projection.jobs[job.id].tasks[0]
    clock.at = T0 + timedelta(seconds=6)  # past the grace: the placement would be re-sent
    snapshot = {"node_id": task.node_id, "occurred_at": clock.at, "task_ids": ["ghost"]}
    started = _report("TaskStarted", task, job.id, device_indices=[], pid=None)
    # Both touch the job's stream, so the reconciliation waits for the next batch and is planned again
    # on the recorded start (nothing to re-send); its first plan's stop was never sent and must not count.
    assert await asyncio.gather(service.handle(started), service.handle(ReconcileNode(snapshot))) == [True, 1]
    assert [r["task_id"] for n, r in writer.published if n == "TaskStopRequested"] == ["ghost"]


async def test_only_commits_that_may_let_a_job_in_wake_the_cycle() -> None:
    service, _, _ = await _ready()
    job = await service.handle(SubmitJob(_spec()))
    assert service.wake.is_set()  # a new job
    await service.handle(RunCycle())
    (task,) = service.projection.jobs[job.id].tasks
    service.wake.clear()
    await service.handle(_report("TaskStarted", task, job.id, device_indices=[], pid=None))
    assert not service.wake.is_set()  # a start gives nothing back
    await service.handle(_report("TaskFinished", task, job.id, exit_code=0))
    assert service.wake.is_set()  # its room is free again


async def test_a_store_error_fails_that_batch_only_and_the_next_command_is_served() -> None:
    service, writer, _ = await _ready()
    commit = writer.commit

    async def broken(appends: Sequence[Append], pending: Mapping[str, Any] | None = None) -> None:
        writer.commit = commit  # type: ignore[method-assign]
        raise OSError("connection reset")

    writer.commit = broken  # type: ignore[method-assign]
    with pytest.raises(OSError, match="connection reset"):
        await service.handle(SubmitJob(_spec()))
    job = await service.handle(SubmitJob(_spec()))
    assert list(service.projection.jobs) == [job.id]


async def _drained(service: SchedulingService) -> None:
    async with service.lock:  # the group commit holds the lock until its queue and turns are done
        pass


async def test_eager_cycles_place_a_submitted_job_before_the_lock_is_released() -> None:
    service, writer, _ = await _ready(eager_cycles=True)
    job = await service.handle(SubmitJob(_spec(tasks=2)))
    await _drained(service)
    assert [t.state for t in service.projection.jobs[job.id].tasks] == [TaskState.PLACED] * 2
    assert [n for n, _ in writer.published].count("TaskPlaced") == 2
    assert not service.wake.is_set()  # the turn consumed the wake; the cycle loop has nothing to do


async def test_eager_cycles_run_only_after_a_batch_that_woke_them() -> None:
    service, _, _ = await _ready(eager_cycles=True)
    job = await service.handle(SubmitJob(_spec()))
    await _drained(service)
    cycles = service.cycles
    (task,) = service.projection.jobs[job.id].tasks
    await service.handle(_report("TaskStarted", task, job.id, device_indices=[], pid=None))
    await _drained(service)
    assert service.cycles == cycles  # a start gives no room back: no cycle
    await service.handle(_report("TaskFinished", task, job.id, exit_code=0))
    await _drained(service)
    assert service.cycles == cycles + 1


async def test_a_failing_eager_cycle_leaves_the_wake_set_and_later_commands_are_served() -> None:
    service, _, _ = await _ready(eager_cycles=True)
    factory = service.placer_factory

    def broken(requests: Any, cycle: int) -> Any:
        service.placer_factory = factory
        raise RuntimeError("placer broke")

    service.placer_factory = broken
    first = await service.handle(SubmitJob(_spec()))
    await _drained(service)
    assert service.projection.jobs[first.id].waiting
    assert service.wake.is_set()  # the cycle loop tries again
    second = await service.handle(SubmitJob(_spec()))
    await _drained(service)
    placed = [t.state for j in (first, second) for t in service.projection.jobs[j.id].tasks]
    assert placed == [TaskState.PLACED] * 2


async def test_a_cancel_gets_the_lock_between_batches_while_submits_keep_coming() -> None:
    service, writer, _ = await _ready(eager_cycles=True)
    job = await service.handle(SubmitJob(_spec()))
    await _drained(service)
    commit, entered, gate = writer.commit, asyncio.Event(), asyncio.Event()

    async def held(appends: Sequence[Append], pending: Mapping[str, Any] | None = None) -> None:
        entered.set()
        await gate.wait()
        await commit(appends, pending)

    writer.commit = held  # type: ignore[method-assign]
    first = asyncio.create_task(service.handle(SubmitJob(replace(_spec(), name="first"))))
    await asyncio.wait_for(entered.wait(), 5)  # the drainer holds the lock, mid-commit
    later = [asyncio.create_task(service.handle(SubmitJob(replace(_spec(), name="later")))) for _ in range(3)]
    cancel = asyncio.create_task(service.handle(CancelJob(job.id, "stop")))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, cancel, *later)
    names = [r.get("name") if n == "JobSubmitted" else n for n, r in writer.published]
    tail = [n for n in names if n in ("first", "later", "JobCancelled")]
    # Submits were still queued when the first batch ended: the cancel went in before them, not after.
    assert tail == ["first", "JobCancelled", "later", "later", "later"]
