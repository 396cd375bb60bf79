"""What a job's state makes necessary, and the commands' decisions about one job: pure, typed events out.

When a task fails, is lost or is preempted, the job's other active tasks are stopped and, once none is
active, the job is requeued whole (a gang restarts together) or fails for good when its retries are
spent. Only failures count against `max_retries`; preemption and node loss only count as restarts.
"""

from __future__ import annotations

from datetime import datetime

from suanli.scheduling.domain.jobs.aggregate import JobView, TaskRun, TaskRunState
from suanli.scheduling.domain.jobs.events import (
    Actor,
    Cause,
    JobCancelled,
    JobEvent,
    JobFailed,
    JobRequeued,
    JobSucceeded,
    TaskReport,
    TaskStarted,
    TaskStopRequested,
)


def relevant_report(job: JobView, report: TaskReport) -> bool:
    """Whether a task report can still change something: about the current attempt of an active task,
    or the end of a lost attempt the job waits for (`lost_attempts`). Others are ignored."""
    task = job.task(report.task_id)
    if task is None:
        return False
    if report.attempt == task.attempt:
        return task.state.active
    return not isinstance(report, TaskStarted) and any(
        (a.task_id, a.attempt) == (report.task_id, report.attempt) for a in job.lost_attempts
    )


def stop_order(job: JobView, task: TaskRun, reason: str) -> TaskStopRequested:
    return TaskStopRequested(job.id, task.task_id, task.node_id, task.attempt, reason)


def follow_ups(job: JobView) -> list[JobEvent]:
    """What must happen now that the job is in this state: stop siblings of a failed, lost or preempted
    task, and once nothing is active, requeue the job, or finish it."""
    if job.phase.final:
        return []
    if all(t.state is TaskRunState.SUCCEEDED for t in job.tasks):
        return [JobSucceeded(job.id, job.spec.tenant, job.spec.queue)]
    trouble = job.trouble()
    if trouble is None and not job.preempted:
        return []
    out: list[JobEvent] = []
    if trouble is not None:
        cause, culprit = trouble
        running = [t for t in job.tasks if t.state in (TaskRunState.PLACED, TaskRunState.RUNNING)]
        out += [
            stop_order(job, t, f"task {culprit.task_id} of the gang ended: {culprit.reason}") for t in running
        ]
        if cause is Cause.TASK_FAILED and job.failures >= job.spec.max_retries:
            retries = job.spec.max_retries
            reason = f"task {culprit.task_id} failed ({culprit.reason}); retries exhausted ({retries})"
            return [*out, JobFailed(job.id, job.spec.tenant, job.spec.queue, reason, culprit.task_id)]
        if running or any(t.state is TaskRunState.STOPPING for t in job.tasks):
            return out
        return [requeue(job, cause, culprit.reason, culprit.task_id)]
    if job.active:
        return []
    return [requeue(job, Cause.PREEMPTED, "preempted", None)]


def requeue(job: JobView, cause: Cause, reason: str, task_id: str | None) -> JobRequeued:
    return JobRequeued(
        job.id,
        job.spec.tenant,
        job.spec.queue,
        attempt=job.attempt + 1,
        restarts=job.restarts + 1,
        cause=cause,
        reason=reason,
        failed_task_id=task_id,
    )


def cancel(job: JobView, reason: str, requested_by: str, by: Actor | None = None) -> list[JobEvent]:
    stops: list[JobEvent] = [
        stop_order(job, t, f"job cancelled: {reason}")
        for t in job.tasks
        if t.state in (TaskRunState.PLACED, TaskRunState.RUNNING)
    ]
    return [*stops, JobCancelled(job.id, reason, requested_by, by)]


def lost_on(job: JobView, node_id: str, since: datetime, *, confirmed: bool = True) -> list[TaskRun]:
    """Active tasks on `node_id` placed before the node was declared lost at `since`.

    A Lost node is only suspected gone (it may be alive but late: a starved agent, a slow path to us);
    until the loss is `confirmed` (lost for long enough) a non-preemptible job is left alone: requeuing
    it would stop it (a stop order to every sibling) and free its room for others while it may still run.
    """
    if not confirmed and not job.spec.preemptible:
        return []
    return [t for t in job.active if t.node_id == node_id and t.since is not None and t.since <= since]


def lost_attempt_stops(job: JobView, lost: list[TaskRun], node_id: str) -> list[TaskStopRequested]:
    """Stop orders for attempts requeued from a lost node: should the node be alive after all, it stops
    them at once, so the old attempt and the next one never run side by side."""
    return [stop_order(job, t, f"node {node_id} was lost: attempt {t.attempt} is requeued") for t in lost]
