"""A running task missing from one snapshot is not lost yet: its TaskFinished may still be on the way
(snapshots and lifecycle events travel on different topics). Only an absence that outlasts the grace is."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask, JobView, TaskFailed, TaskRun
from suanli.scheduling.domain.jobs import TaskRunState as TaskState
from suanli.scheduling.service_layer.reconcile import Reconciler

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GRACE = timedelta(seconds=5)


def _jobs(state: TaskState = TaskState.RUNNING) -> dict[str, JobView]:
    spec = AcceptedTask("j-w-0", "w-0", cpu_milli=1000)
    # Running for far longer than the grace: the old rule acted on the first snapshot without it.
    task = TaskRun(spec, state, attempt=1, node_id="n1", since=T0 - timedelta(minutes=5))
    job = JobView("j", AcceptedSpec("j", "acme", (spec,)), 1, 1, T0, T0, (task,))
    return {job.id: job}


def _snapshot(at: datetime, *task_ids: str) -> dict[str, Any]:
    return {"node_id": "n1", "occurred_at": at, "task_ids": list(task_ids)}


def _lost(reconciler: Reconciler, jobs: dict[str, JobView], at: datetime, *task_ids: str) -> bool:
    actions = reconciler.reconcile(jobs, _snapshot(at, *task_ids), at, resend=_no_resend)
    return any(isinstance(d, TaskFailed) for decisions in actions.per_job.values() for d in decisions)


def _no_resend(job: JobView, task: TaskRun) -> TaskFailed:
    raise AssertionError("a running task is never placed again")


def test_a_task_that_just_left_the_snapshots_is_not_lost_within_the_grace() -> None:
    reconciler = Reconciler(GRACE)
    jobs = _jobs()
    assert not _lost(reconciler, jobs, T0)
    assert not _lost(reconciler, jobs, T0 + timedelta(seconds=4))
    assert _lost(reconciler, jobs, T0 + timedelta(seconds=6))


def test_being_reported_again_restarts_the_count() -> None:
    reconciler = Reconciler(GRACE)
    jobs = _jobs()
    assert not _lost(reconciler, jobs, T0)
    assert not _lost(reconciler, jobs, T0 + timedelta(seconds=3), "j-w-0")
    assert not _lost(reconciler, jobs, T0 + timedelta(seconds=6))
    assert _lost(reconciler, jobs, T0 + timedelta(seconds=12))


def test_a_task_that_finished_meanwhile_is_forgotten() -> None:
    reconciler = Reconciler(GRACE)
    assert not _lost(reconciler, _jobs(), T0)
    assert not _lost(reconciler, _jobs(TaskState.SUCCEEDED), T0 + timedelta(seconds=1))
    assert not reconciler._missing_since
