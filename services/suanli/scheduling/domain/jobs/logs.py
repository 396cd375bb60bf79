"""Which attempt of which task a log request means, from the job's history: pure, with precise refusals.

A task is named by its id or its name (``worker-0``); empty names the job's only task. Attempt 0 is the
task's latest. An attempt not placed yet, or placed and not started, has no output yet: ``Wait`` (a
follower waits for it; a plain read is refused). An attempt that ended without starting never wrote any.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from suanli.errors import FailedPrecondition, InvalidArgument, NotFound
from suanli.scheduling.domain.jobs.history import Attempt
from suanli.scheduling.domain.jobs.spec import AcceptedTask


@dataclass(frozen=True, slots=True)
class LogTarget:
    """An attempt that started, so its node holds its output."""

    task_id: str
    attempt: int
    node_id: str
    ended: bool


@dataclass(frozen=True, slots=True)
class Wait:
    """The attempt has no output yet: not placed, or placed on ``node_id`` and not started."""

    task_id: str
    attempt: int
    why: str


def pick_task(job_id: str, tasks: Sequence[AcceptedTask], task: str) -> AcceptedTask:
    """The task ``task`` names (its id or its name; empty: the only one)."""
    names = ", ".join(t.name for t in tasks)
    if not task:
        if len(tasks) == 1:
            return tasks[0]
        raise InvalidArgument(f"task: job {job_id} has {len(tasks)} tasks ({names}): name one")
    found = next((t for t in tasks if task in (t.task_id, t.name)), None)
    if found is None:
        raise NotFound(f"job {job_id} has no task {task!r} (tasks: {names})")
    return found


def locate(
    job_id: str,
    tasks: Sequence[AcceptedTask],
    attempts: Sequence[Attempt],
    current_attempt: int,
    task: str,
    attempt: int,
) -> LogTarget | Wait:
    """The attempt a log request means, or what it waits for; refusals as request errors.

    ``attempts`` are the job's recorded attempts (its history), ``current_attempt`` the job's attempt
    now (a requeued job's next one may not be placed yet).
    """
    if attempt < 0:
        raise InvalidArgument(f"attempt: {attempt}: attempts count from 1 (0: the latest)")
    chosen = pick_task(job_id, tasks, task)
    mine = {a.attempt: a for a in attempts if a.task_id == chosen.task_id}
    wanted = attempt or current_attempt
    if wanted > current_attempt:
        raise NotFound(f"task {chosen.name} has no attempt {wanted}: the job is at attempt {current_attempt}")
    found = mine.get(wanted)
    if found is None:
        if wanted < current_attempt:
            raise NotFound(f"task {chosen.name} was not placed in attempt {wanted}: it has no output")
        return Wait(chosen.task_id, wanted, f"task {chosen.name} attempt {wanted} is not placed yet")
    if found.started_at is None:
        if found.ended_at is not None:
            raise FailedPrecondition(
                f"task {chosen.name} attempt {wanted} ended ({found.outcome}) before it started: "
                "it has no output"
            )
        return Wait(
            chosen.task_id, wanted, f"task {chosen.name} attempt {wanted} has not started on {found.node_id}"
        )
    return LogTarget(chosen.task_id, wanted, found.node_id, found.ended_at is not None)
