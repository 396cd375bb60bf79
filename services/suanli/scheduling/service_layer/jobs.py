"""The Job aggregate: its state is a fold of the events in its stream `job-<id>`; decisions are pure.

Events recorded in a job's stream: JobSubmitted, TaskPlaced, TaskPreempted, TaskStopRequested, JobRequeued,
JobSucceeded, JobFailed, JobCancelled (all published from the outbox), and the facts the scheduler learnt
about its tasks: TaskStarted, TaskFinished, TaskFailed (as received, with their own event ids, so a
redelivered fact is recognised by the store's unique event id; or made by the scheduler for a lost node
or a task a node stopped reporting).

A task of the current attempt moves PENDING -> PLACED -> RUNNING -> SUCCEEDED | FAILED | LOST, or
PLACED/RUNNING -> STOPPING -> STOPPED when the scheduler stops it. A task is *active* (holds room on its
node) while PLACED, RUNNING or STOPPING. When a task fails, is lost or is preempted, the job's other
active tasks are stopped and, once none is active, the job is requeued whole (a gang restarts together)
or fails for good when its retries are spent. Only failures count against `max_retries`; preemption and
node loss only count as restarts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from suanli.scheduling.domain.model import TaskPlacement
from suanli.scheduling.service_layer.spec import JobSpec, TaskSpec, spec_from_record

Body = dict[str, Any]
Decision = tuple[str, Body]  # (event name, record body without the envelope)


class Phase(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def final(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED)


class TaskState(StrEnum):
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
        return self in (TaskState.PLACED, TaskState.RUNNING, TaskState.STOPPING)


class Cause(StrEnum):
    TASK_FAILED = "TASK_FAILED"
    PREEMPTED = "PREEMPTED"
    NODE_LOST = "NODE_LOST"


@dataclass(frozen=True, slots=True)
class TaskRun:
    spec: TaskSpec
    state: TaskState = TaskState.PENDING
    attempt: int = 0
    node_id: str = ""
    gpu_indices: tuple[int, ...] = ()
    gpu_milli: tuple[int, ...] = ()
    exit_code: int = 0
    reason: str = ""
    since: datetime | None = None  # when the task entered its state

    @property
    def task_id(self) -> str:
        return self.spec.task_id

    def placement(self) -> TaskPlacement:
        return TaskPlacement(self.task_id, self.node_id, self.gpu_indices, self.gpu_milli)


@dataclass(frozen=True, slots=True)
class JobView:
    id: str
    spec: JobSpec
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

    def task(self, task_id: str) -> TaskRun | None:
        return next((t for t in self.tasks if t.task_id == task_id), None)

    @property
    def active(self) -> tuple[TaskRun, ...]:
        return tuple(t for t in self.tasks if t.state.active)

    @property
    def waiting(self) -> bool:
        """Ready for the scheduling cycle: live, nothing placed, nothing to clean up."""
        return self.phase is Phase.PENDING and all(t.state is TaskState.PENDING for t in self.tasks)

    @property
    def winding_down(self) -> bool:
        """Its active tasks are on their way out (final job, preempted, or a failed/lost task)."""
        return self.phase.final or self.preempted or self._trouble() is not None

    def _trouble(self) -> tuple[Cause, TaskRun] | None:
        failed = next((t for t in self.tasks if t.state is TaskState.FAILED), None)
        if failed is not None:
            return Cause.TASK_FAILED, failed
        lost = next((t for t in self.tasks if t.state is TaskState.LOST), None)
        if lost is not None:
            return Cause.NODE_LOST, lost
        return None

    def with_tasks(self, update: Callable[[TaskRun], TaskRun]) -> JobView:
        return replace(self, tasks=tuple(update(t) for t in self.tasks))


# -- evolve: one function per event, in an explicit table ---------------------------------------------


def submitted(record: Mapping[str, Any], seq: int, at: datetime) -> JobView:
    spec = spec_from_record(record)
    return JobView(
        id=record["job_id"],
        spec=spec,
        seq=seq,
        version=1,
        submitted_at=at,
        updated_at=at,
        tasks=tuple(TaskRun(t) for t in spec.tasks),
        message="submitted",
    )


def _on_task(job: JobView, record: Mapping[str, Any], change: Callable[[TaskRun], TaskRun]) -> JobView:
    task_id = record["task_id"]
    return job.with_tasks(lambda t: change(t) if t.task_id == task_id else t)


def _placed(job: JobView, r: Mapping[str, Any], at: datetime) -> JobView:
    devices = r.get("devices") or ()

    def place(t: TaskRun) -> TaskRun:
        if t.state is TaskState.PENDING:
            return replace(
                t,
                state=TaskState.PLACED,
                attempt=r["attempt"],
                node_id=r["node_id"],
                gpu_indices=tuple(d["index"] for d in devices),
                gpu_milli=tuple(d["milli"] for d in devices),
                since=at,
                reason="",
            )
        if t.state is TaskState.PLACED and t.attempt == r["attempt"]:
            return replace(t, since=at)  # re-sent: the grace period starts again
        return t

    return replace(_on_task(job, r, place), message=f"task {r['task_id']} placed on {r['node_id']}")


def _started(job: JobView, r: Mapping[str, Any], at: datetime) -> JobView:
    def start(t: TaskRun) -> TaskRun:
        return replace(t, state=TaskState.RUNNING, since=at) if t.state is TaskState.PLACED else t

    job = _on_task(job, r, start)
    phase = Phase.RUNNING if job.phase is Phase.PENDING and not job.winding_down else job.phase
    return replace(job, phase=phase, message=f"task {r['task_id']} started on {r['node_id']}")


def _finished(job: JobView, r: Mapping[str, Any], at: datetime) -> JobView:
    code = int(r["exit_code"])

    def end(t: TaskRun) -> TaskRun:
        if t.state is TaskState.STOPPING:
            return replace(t, state=TaskState.STOPPED, exit_code=code, since=at)
        if code == 0:
            return replace(t, state=TaskState.SUCCEEDED, exit_code=0, since=at)
        return replace(t, state=TaskState.FAILED, exit_code=code, reason=f"exit code {code}", since=at)

    return replace(_on_task(job, r, end), message=f"task {r['task_id']} exited with code {code}")


def _failed(job: JobView, r: Mapping[str, Any], at: datetime) -> JobView:
    kind = str(r.get("kind") or "UNKNOWN")
    reason = f"{kind}: {r.get('reason', '')}"

    def end(t: TaskRun) -> TaskRun:
        code = r.get("exit_code")
        code = t.exit_code if code is None else int(code)
        if t.state is TaskState.STOPPING:
            return replace(t, state=TaskState.STOPPED, exit_code=code, reason=reason, since=at)
        state = TaskState.LOST if kind == "NODE_LOST" else TaskState.FAILED
        return replace(t, state=state, exit_code=code, reason=reason, since=at)

    return replace(_on_task(job, r, end), message=f"task {r['task_id']} failed ({reason})")


def _stopping(reason_key: str) -> Callable[[JobView, Mapping[str, Any], datetime], JobView]:
    def evolve(job: JobView, r: Mapping[str, Any], at: datetime) -> JobView:
        def stop(t: TaskRun) -> TaskRun:
            if t.state in (TaskState.PLACED, TaskState.RUNNING):
                return replace(t, state=TaskState.STOPPING, reason=str(r.get("reason", "")), since=at)
            if t.state is TaskState.STOPPING:
                return replace(t, since=at)  # re-sent: the grace period starts again
            return t

        job = _on_task(job, r, stop)
        if reason_key == "preempted":
            job = replace(job, preempted=True)
        return replace(job, message=f"task {r['task_id']} {reason_key}: {r.get('reason', '')}")

    return evolve


def _requeued(job: JobView, r: Mapping[str, Any], at: datetime) -> JobView:
    return replace(
        job,
        phase=Phase.PENDING,
        attempt=int(r["attempt"]),
        restarts=int(r["restarts"]),
        failures=job.failures + (1 if r.get("cause") == Cause.TASK_FAILED else 0),
        preempted=False,
        tasks=tuple(TaskRun(t.spec) for t in job.tasks),
        message=f"requeued ({r.get('cause')}): {r.get('reason', '')}",
    )


def _final(phase: Phase) -> Callable[[JobView, Mapping[str, Any], datetime], JobView]:
    def evolve(job: JobView, r: Mapping[str, Any], at: datetime) -> JobView:
        return replace(job, phase=phase, message=str(r.get("reason") or phase.value.lower()))

    return evolve


EVOLVE: dict[str, Callable[[JobView, Mapping[str, Any], datetime], JobView]] = {
    "TaskPlaced": _placed,
    "TaskStarted": _started,
    "TaskFinished": _finished,
    "TaskFailed": _failed,
    "TaskPreempted": _stopping("preempted"),
    "TaskStopRequested": _stopping("stopping"),
    "JobRequeued": _requeued,
    "JobSucceeded": _final(Phase.SUCCEEDED),
    "JobFailed": _final(Phase.FAILED),
    "JobCancelled": _final(Phase.CANCELLED),
}


def evolve(job: JobView, name: str, record: Mapping[str, Any], version: int, at: datetime) -> JobView:
    return replace(EVOLVE[name](job, record, at), version=version, updated_at=at)


# -- decide --------------------------------------------------------------------------------------------


def relevant_report(job: JobView, record: Mapping[str, Any]) -> bool:
    """Whether a task report (TaskStarted/Finished/Failed) is about this job's current attempt and can
    still change something: older attempts and tasks already ended are ignored."""
    task = job.task(str(record.get("task_id")))
    return task is not None and record.get("attempt") == task.attempt and task.state.active


def stop_order(job: JobView, task: TaskRun, reason: str) -> Decision:
    return "TaskStopRequested", {
        "job_id": job.id,
        "task_id": task.task_id,
        "node_id": task.node_id,
        "attempt": task.attempt,
        "reason": reason,
    }


def follow_ups(job: JobView) -> list[Decision]:
    """What must happen now that the job is in this state: stop siblings of a failed, lost or preempted
    task, and once nothing is active, requeue the job, or finish it."""
    if job.phase.final:
        return []
    if all(t.state is TaskState.SUCCEEDED for t in job.tasks):
        return [("JobSucceeded", _job_fields(job))]
    trouble = job._trouble()
    if trouble is None and not job.preempted:
        return []
    out: list[Decision] = []
    if trouble is not None:
        cause, culprit = trouble
        running = [t for t in job.tasks if t.state in (TaskState.PLACED, TaskState.RUNNING)]
        out += [
            stop_order(job, t, f"task {culprit.task_id} of the gang ended: {culprit.reason}") for t in running
        ]
        if cause is Cause.TASK_FAILED and job.failures >= job.spec.max_retries:
            retries = job.spec.max_retries
            reason = f"task {culprit.task_id} failed ({culprit.reason}); retries exhausted ({retries})"
            return [
                *out,
                ("JobFailed", {**_job_fields(job), "reason": reason, "failed_task_id": culprit.task_id}),
            ]
        if running or any(t.state is TaskState.STOPPING for t in job.tasks):
            return out
        return [requeue(job, cause, culprit.reason, culprit.task_id)]
    if job.active:
        return []
    return [requeue(job, Cause.PREEMPTED, "preempted", None)]


def requeue(job: JobView, cause: Cause, reason: str, task_id: str | None) -> Decision:
    return "JobRequeued", {
        **_job_fields(job),
        "attempt": job.attempt + 1,
        "restarts": job.restarts + 1,
        "cause": cause.value,
        "reason": reason,
        "failed_task_id": task_id,
    }


def cancel(job: JobView, reason: str, requested_by: str) -> list[Decision]:
    stops = [
        stop_order(job, t, f"job cancelled: {reason}")
        for t in job.tasks
        if t.state in (TaskState.PLACED, TaskState.RUNNING)
    ]
    return [*stops, ("JobCancelled", {"job_id": job.id, "reason": reason, "requested_by": requested_by})]


def lost_on(job: JobView, node_id: str, since: datetime) -> list[TaskRun]:
    """Active tasks on `node_id` placed before the node was declared lost at `since`."""
    return [t for t in job.active if t.node_id == node_id and t.since is not None and t.since <= since]


def _job_fields(job: JobView) -> Body:
    return {"job_id": job.id, "tenant": job.spec.tenant, "queue": job.spec.queue}
