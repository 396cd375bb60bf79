"""The Job aggregate: its state is a fold of the typed events of its stream `job-<id>`.

A task of the current attempt moves PENDING -> PLACED -> RUNNING -> SUCCEEDED | FAILED | LOST, or
PLACED/RUNNING -> STOPPING -> STOPPED when the scheduler stops it. A task is *active* (holds room on its
node) while PLACED, RUNNING or STOPPING. What happens next (stop the siblings, requeue, finish) is decided
in `decide`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from suanli.scheduling.domain.jobs.events import (
    Cause,
    JobCancelled,
    JobEvent,
    JobFailed,
    JobRequeued,
    JobSubmitted,
    JobSucceeded,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskStarted,
    TaskStopRequested,
)
from suanli.scheduling.domain.jobs.lost_attempts import LostAttempt
from suanli.scheduling.domain.jobs.spec import AcceptedSpec, AcceptedTask
from suanli.scheduling.domain.model import TaskPlacement


class Phase(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def final(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED)


class TaskRunState(StrEnum):
    """Where the current run (attempt) of a task stands, as the scheduler has recorded it (the node
    agent's own view of a running process is sensing's business)."""

    PENDING = "PENDING"
    PLACED = "PLACED"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    LOST = "LOST"
    STOPPED = "STOPPED"

    @property
    def active(self) -> bool:
        return self in (TaskRunState.PLACED, TaskRunState.RUNNING, TaskRunState.STOPPING)


@dataclass(frozen=True, slots=True)
class TaskRun:
    spec: AcceptedTask
    state: TaskRunState = TaskRunState.PENDING
    attempt: int = 0
    node_id: str = ""
    gpu_indices: tuple[int, ...] = ()
    gpu_milli: tuple[int, ...] = ()
    exit_code: int = 0
    reason: str = ""
    since: datetime | None = None  # when the task entered its state
    # Where the current attempt was placed, as placement recorded it (TaskPlaced).
    region: str = ""
    rtt_ms: float | None = None
    price_per_hour: float | None = None

    @property
    def task_id(self) -> str:
        return self.spec.task_id

    def placement(self) -> TaskPlacement:
        return TaskPlacement(self.task_id, self.node_id, self.gpu_indices, self.gpu_milli)


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    spec: AcceptedSpec
    seq: int
    version: int
    submitted_at: datetime
    updated_at: datetime
    tasks: tuple[TaskRun, ...]
    phase: Phase = Phase.PENDING
    attempt: int = 1
    restarts: int = 0
    failures: int = 0
    preempted: bool = False  # preempted in this attempt: requeue once its tasks have stopped
    message: str = ""
    # Attempts of earlier runs taken for lost and told to stop, not yet reported ended (lost_attempts).
    lost_attempts: tuple[LostAttempt, ...] = ()

    def task(self, task_id: str) -> TaskRun | None:
        return next((t for t in self.tasks if t.task_id == task_id), None)

    @property
    def active(self) -> tuple[TaskRun, ...]:
        return tuple(t for t in self.tasks if t.state.active)

    @property
    def waiting(self) -> bool:
        """Ready for the scheduling cycle: live, nothing placed, nothing to clean up."""
        return self.phase is Phase.PENDING and all(t.state is TaskRunState.PENDING for t in self.tasks)

    @property
    def winding_down(self) -> bool:
        """Its active tasks are on their way out (final job, preempted, or a failed/lost task)."""
        return self.phase.final or self.preempted or self.trouble() is not None

    def trouble(self) -> tuple[Cause, TaskRun] | None:
        """The task whose end brings the gang down (a failed one first, else a lost one), and why."""
        failed = next((t for t in self.tasks if t.state is TaskRunState.FAILED), None)
        if failed is not None:
            return Cause.TASK_FAILED, failed
        lost = next((t for t in self.tasks if t.state is TaskRunState.LOST), None)
        if lost is not None:
            return Cause.NODE_LOST, lost
        return None

    def with_tasks(self, update: Callable[[TaskRun], TaskRun]) -> JobView:
        return replace(self, tasks=tuple(update(t) for t in self.tasks))


def submitted(event: JobSubmitted, seq: int, at: datetime) -> JobView:
    """A job's first state, from its JobSubmitted (its place in the queues' FIFO is `seq`)."""
    return JobView(
        id=event.job_id,
        spec=event.spec,
        seq=seq,
        version=1,
        submitted_at=at,
        updated_at=at,
        tasks=tuple(TaskRun(t) for t in event.spec.tasks),
        message="submitted",
    )


# -- fold: one function per event type, in an explicit table ------------------------------------------


def _on_task(job: JobView, task_id: str, change: Callable[[TaskRun], TaskRun]) -> JobView:
    return job.with_tasks(lambda t: change(t) if t.task_id == task_id else t)


def _placed(job: JobView, e: TaskPlaced, at: datetime) -> JobView:
    def place(t: TaskRun) -> TaskRun:
        if t.state is TaskRunState.PENDING:
            return replace(
                t,
                state=TaskRunState.PLACED,
                attempt=e.attempt,
                node_id=e.node_id,
                gpu_indices=tuple(d.index for d in e.devices),
                gpu_milli=tuple(d.milli for d in e.devices),
                since=at,
                reason="",
                region=e.region,
                rtt_ms=e.rtt_ms,
                price_per_hour=e.price_per_hour,
            )
        if t.state is TaskRunState.PLACED and t.attempt == e.attempt:
            return replace(t, since=at)  # re-sent: the grace period starts again
        return t

    return replace(_on_task(job, e.task_id, place), message=f"task {e.task_id} placed on {e.node_id}")


def _started(job: JobView, e: TaskStarted, at: datetime) -> JobView:
    def start(t: TaskRun) -> TaskRun:
        return replace(t, state=TaskRunState.RUNNING, since=at) if t.state is TaskRunState.PLACED else t

    job = _on_task(job, e.task_id, start)
    phase = Phase.RUNNING if job.phase is Phase.PENDING and not job.winding_down else job.phase
    return replace(job, phase=phase, message=f"task {e.task_id} started on {e.node_id}")


def _settled(job: JobView, task_id: str, attempt: int) -> JobView | None:
    """The job once an earlier attempt's end was reported (it no longer waits for it); None when the
    report is about the current attempt."""
    task = job.task(task_id)
    if task is None or task.attempt == attempt:
        return None
    left = tuple(a for a in job.lost_attempts if (a.task_id, a.attempt) != (task_id, attempt))
    if len(left) == len(job.lost_attempts):
        return job  # an older attempt nothing waits for: it changes nothing
    return replace(job, lost_attempts=left, message=f"task {task_id}: lost attempt {attempt} ended")


def _finished(job: JobView, e: TaskFinished, at: datetime) -> JobView:
    settled = _settled(job, e.task_id, e.attempt)
    if settled is not None:
        return settled
    code = e.exit_code

    def end(t: TaskRun) -> TaskRun:
        if t.state is TaskRunState.STOPPING:
            return replace(t, state=TaskRunState.STOPPED, exit_code=code, since=at)
        if code == 0:
            return replace(t, state=TaskRunState.SUCCEEDED, exit_code=0, since=at)
        return replace(t, state=TaskRunState.FAILED, exit_code=code, reason=f"exit code {code}", since=at)

    return replace(_on_task(job, e.task_id, end), message=f"task {e.task_id} exited with code {code}")


def _failed(job: JobView, e: TaskFailed, at: datetime) -> JobView:
    settled = _settled(job, e.task_id, e.attempt)
    if settled is not None:
        return settled
    kind = e.kind or "UNKNOWN"
    reason = f"{kind}: {e.reason}"

    def end(t: TaskRun) -> TaskRun:
        code = t.exit_code if e.exit_code is None else e.exit_code
        if t.state is TaskRunState.STOPPING:
            return replace(t, state=TaskRunState.STOPPED, exit_code=code, reason=reason, since=at)
        state = TaskRunState.LOST if kind == "NODE_LOST" else TaskRunState.FAILED
        return replace(t, state=state, exit_code=code, reason=reason, since=at)

    return replace(_on_task(job, e.task_id, end), message=f"task {e.task_id} failed ({reason})")


def _stopping(job: JobView, task_id: str, reason: str, at: datetime) -> JobView:
    def stop(t: TaskRun) -> TaskRun:
        if t.state in (TaskRunState.PLACED, TaskRunState.RUNNING):
            return replace(t, state=TaskRunState.STOPPING, reason=reason, since=at)
        if t.state is TaskRunState.STOPPING:
            return replace(t, since=at)  # re-sent: the grace period starts again
        return t

    return _on_task(job, task_id, stop)


def _preempted(job: JobView, e: TaskPreempted, at: datetime) -> JobView:
    job = replace(_stopping(job, e.task_id, e.reason, at), preempted=True)
    return replace(job, message=f"task {e.task_id} preempted: {e.reason}")


def _stop_requested(job: JobView, e: TaskStopRequested, at: datetime) -> JobView:
    task = job.task(e.task_id)
    if task is not None and task.state is TaskRunState.LOST and task.attempt == e.attempt:
        # A stop order for an attempt taken for lost: its next attempt waits until it is known ended.
        lost = LostAttempt(e.task_id, e.node_id, e.attempt, at)
        return replace(job, lost_attempts=(*job.lost_attempts, lost), message=f"task {e.task_id}: {e.reason}")
    job = _stopping(job, e.task_id, e.reason, at)
    return replace(job, message=f"task {e.task_id} stopping: {e.reason}")


def _requeued(job: JobView, e: JobRequeued, at: datetime) -> JobView:
    return replace(
        job,
        phase=Phase.PENDING,
        attempt=e.attempt,
        restarts=e.restarts,
        failures=job.failures + (1 if e.cause is Cause.TASK_FAILED else 0),
        preempted=False,
        tasks=tuple(TaskRun(t.spec) for t in job.tasks),
        message=f"requeued ({e.cause}): {e.reason}",
    )


def _succeeded(job: JobView, e: JobSucceeded, at: datetime) -> JobView:
    return replace(job, phase=Phase.SUCCEEDED, message="succeeded")


def _job_failed(job: JobView, e: JobFailed, at: datetime) -> JobView:
    return replace(job, phase=Phase.FAILED, message=e.reason or "failed")


def _cancelled(job: JobView, e: JobCancelled, at: datetime) -> JobView:
    return replace(job, phase=Phase.CANCELLED, message=e.reason or "cancelled")


Fold = Callable[[JobView, Any, datetime], JobView]

FOLD: Mapping[type[JobEvent], Fold] = {
    TaskPlaced: _placed,
    TaskStarted: _started,
    TaskFinished: _finished,
    TaskFailed: _failed,
    TaskPreempted: _preempted,
    TaskStopRequested: _stop_requested,
    JobRequeued: _requeued,
    JobSucceeded: _succeeded,
    JobFailed: _job_failed,
    JobCancelled: _cancelled,
}
"""Event type -> how it changes a job (JobSubmitted starts one instead: `submitted`)."""


def evolve(job: JobView, event: JobEvent, version: int, at: datetime) -> JobView:
    """The job after `event`, recorded as its stream's `version` at `at`."""
    return replace(FOLD[type(event)](job, event, at), version=version, updated_at=at)
