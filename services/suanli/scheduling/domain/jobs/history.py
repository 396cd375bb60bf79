"""A job's history, as `kubectl describe` shows Events: one line per recorded event of its stream, each
attempt of each task with where it ran and how it ended, and what the job used (elapsed, GPU-hours).

Pure: a fold of the stream's typed events in version order with the time each was recorded, and `now`
(the end of whatever is still running). The stream is the record: an attempt's placement stays in its
history after the job is requeued, and a preemption or cancellation names who caused it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from suanli.scheduling.domain.jobs.events import (
    Actor,
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

MILLI = 1000
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One recorded event, told as a person reads it."""

    at: datetime
    type: str  # the event's name (TaskPlaced, JobCancelled, ...)
    message: str
    task_id: str = ""
    attempt: int = 0
    node_id: str = ""
    by: str = ""  # who caused it: the principal of a submit or cancel, the preempting job
    reason: str = ""
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of one task: where it was placed, when it ran and how it ended."""

    task_id: str
    attempt: int
    node_id: str
    region: str
    gpu_indices: tuple[int, ...]
    gpu_milli: tuple[int, ...]
    cpu_milli: int
    placed_at: datetime
    price_per_hour: float | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    # PLACED, RUNNING, STOPPING while active; SUCCEEDED, FAILED, LOST, PREEMPTED, STOPPED once ended.
    outcome: str = "PLACED"
    exit_code: int | None = None
    reason: str = ""
    preempted: bool = False  # told to stop by a preemption (its end is PREEMPTED)

    def running_s(self, now: datetime) -> float:
        """Seconds it ran: from its start to its end, or to `now` while it runs."""
        if self.started_at is None:
            return 0.0
        end = self.ended_at or now
        return max(0.0, (end - self.started_at).total_seconds())

    def gpu_hours(self, now: datetime) -> float:
        return sum(self.gpu_milli) / MILLI * self.running_s(now) / SECONDS_PER_HOUR

    def cpu_hours(self, now: datetime) -> float:
        return self.cpu_milli / MILLI * self.running_s(now) / SECONDS_PER_HOUR


@dataclass(frozen=True, slots=True)
class Accounting:
    """What the job used, from its attempts (sacct's elapsed and allocation-hours)."""

    attempts: int  # the job's attempts (1 + requeues)
    wait_s: float  # submitted -> first task started (or -> now / the end, never started)
    elapsed_s: float  # first task started -> last task ended (or -> now while one runs)
    gpu_hours: float
    cpu_hours: float
    cost: float | None  # expected, from the price per hour each placement was made at; None: a price unknown


@dataclass(frozen=True, slots=True)
class History:
    entries: tuple[HistoryEntry, ...]
    attempts: tuple[Attempt, ...]
    accounting: Accounting


@dataclass(slots=True)
class _State:
    entries: list[HistoryEntry] = field(default_factory=list)
    attempts: dict[tuple[str, int], Attempt] = field(default_factory=dict)
    submitted_at: datetime | None = None
    ended_at: datetime | None = None  # the job's final event
    job_attempt: int = 1

    def update(self, key: tuple[str, int], change: Callable[[Attempt], Attempt]) -> Attempt | None:
        current = self.attempts.get(key)
        if current is None:
            return None
        self.attempts[key] = change(current)
        return self.attempts[key]


def actor_label(actor: Actor | None, fallback: str = "") -> str:
    """Who asked, as a person reads it: subject@tenant (the token id is in the audit log)."""
    if actor is None:
        return fallback
    return f"{actor.subject}@{actor.tenant}" if actor.tenant else actor.subject


def _gpus(indices: tuple[int, ...], milli: tuple[int, ...]) -> str:
    return ",".join(
        str(i) if m == MILLI else f"{i}@{m / MILLI:g}" for i, m in zip(indices, milli, strict=True)
    )


# -- one function per event type, in an explicit table --------------------------------------------------


def _submitted(s: _State, e: JobSubmitted, at: datetime) -> HistoryEntry:
    s.submitted_at = at
    by = actor_label(e.submitted_by)
    tasks = len(e.spec.tasks)
    text = f"submitted to queue {e.spec.queue} ({tasks} task{'s' if tasks != 1 else ''})"
    return HistoryEntry(at, "JobSubmitted", text + (f" by {by}" if by else ""), by=by)


def _placed(s: _State, e: TaskPlaced, at: datetime) -> HistoryEntry:
    key = (e.task_id, e.attempt)
    base = HistoryEntry(at, "TaskPlaced", "", e.task_id, e.attempt, e.node_id)
    if key in s.attempts:  # reconciliation re-sent the placement: the same attempt, not a new one
        return replace(base, message=f"placement re-sent to node {e.node_id}")
    indices = tuple(d.index for d in e.devices)
    milli = tuple(d.milli for d in e.devices)
    s.attempts[key] = Attempt(
        e.task_id,
        e.attempt,
        e.node_id,
        e.region,
        indices,
        milli,
        e.requests.cpu_milli,
        at,
        price_per_hour=e.price_per_hour,
    )
    where = f"node {e.node_id}" + (f" in region {e.region}" if e.region else "")
    devices = f", GPUs {_gpus(indices, milli)}" if indices else ""
    return replace(base, message=f"placed on {where}{devices}")


def _started(s: _State, e: TaskStarted, at: datetime) -> HistoryEntry:
    def start(a: Attempt) -> Attempt:
        if a.started_at is not None or a.ended_at is not None:
            return a
        return replace(a, started_at=at, outcome="RUNNING" if a.outcome == "PLACED" else a.outcome)

    s.update((e.task_id, e.attempt), start)
    return HistoryEntry(at, "TaskStarted", f"started on node {e.node_id}", e.task_id, e.attempt, e.node_id)


LATE = "LATE"  # an end reported for an attempt already recorded ended (lost): it keeps its first end


def _ended(s: _State, key: tuple[str, int], at: datetime, outcome: str, code: int | None, reason: str) -> str:
    """Close the attempt; returns the outcome it ended with (a stopped one: PREEMPTED or STOPPED), or
    LATE when it had ended already."""
    current = s.attempts.get(key)
    if current is not None and current.ended_at is not None:
        return LATE
    if current is None:
        return outcome
    if current.outcome == "STOPPING":
        outcome = "PREEMPTED" if current.preempted else "STOPPED"
        reason = reason or current.reason
    s.attempts[key] = replace(current, ended_at=at, outcome=outcome, exit_code=code, reason=reason)
    return outcome


def _late(s: _State, key: tuple[str, int], code: int | None) -> str:
    """An end reported for an attempt whose end is already recorded (a lost node that was alive)."""
    was = s.attempts[key].outcome.lower()
    return f"reported ended after it was recorded {was}" + ("" if code is None else f" (exit code {code})")


def _finished(s: _State, e: TaskFinished, at: datetime) -> HistoryEntry:
    code = e.exit_code
    outcome = _ended(s, (e.task_id, e.attempt), at, "SUCCEEDED" if code == 0 else "FAILED", code, "")
    text = {
        "SUCCEEDED": "succeeded (exit code 0)",
        "FAILED": f"failed: exit code {code}",
        LATE: _late(s, (e.task_id, e.attempt), code),
    }.get(outcome, f"{outcome.lower()} (exit code {code})")
    return HistoryEntry(at, "TaskFinished", text, e.task_id, e.attempt, e.node_id, exit_code=code)


def _failed(s: _State, e: TaskFailed, at: datetime) -> HistoryEntry:
    kind = e.kind or "UNKNOWN"
    reason = f"{kind}: {e.reason}" if e.reason else kind
    lost = kind == "NODE_LOST"
    outcome = _ended(s, (e.task_id, e.attempt), at, "LOST" if lost else "FAILED", e.exit_code, reason)
    code = "" if e.exit_code is None else f" (exit code {e.exit_code})"
    verb = {"LOST": "lost", "FAILED": "failed"}.get(outcome, outcome.lower())
    text = _late(s, (e.task_id, e.attempt), e.exit_code) if outcome == LATE else f"{verb}: {reason}{code}"
    return HistoryEntry(
        at, "TaskFailed", text, e.task_id, e.attempt, e.node_id, reason=reason, exit_code=e.exit_code
    )


def _stopping(s: _State, task_id: str, attempt: int, reason: str, preempted: bool) -> None:
    def stop(a: Attempt) -> Attempt:
        if a.ended_at is not None or a.outcome == "STOPPING":
            return a
        return replace(a, outcome="STOPPING", reason=reason, preempted=preempted)

    s.update((task_id, attempt), stop)


def _preempted(s: _State, e: TaskPreempted, at: datetime) -> HistoryEntry:
    _stopping(s, e.task_id, e.attempt, e.reason, preempted=True)
    by = e.preemptor_job_id or ""
    text = f"preempted by job {by}" if by else f"preempted: {e.reason}"
    return HistoryEntry(at, "TaskPreempted", text, e.task_id, e.attempt, e.node_id, by=by, reason=e.reason)


def _stop_requested(s: _State, e: TaskStopRequested, at: datetime) -> HistoryEntry:
    _stopping(s, e.task_id, e.attempt, e.reason, preempted=False)
    text = f"stop requested: {e.reason}"
    return HistoryEntry(at, "TaskStopRequested", text, e.task_id, e.attempt, e.node_id, reason=e.reason)


def _requeued(s: _State, e: JobRequeued, at: datetime) -> HistoryEntry:
    before, s.job_attempt = s.job_attempt, e.attempt
    why = f"{e.cause.value}: {e.reason}" if e.reason else e.cause.value
    task = f", task {e.failed_task_id}" if e.failed_task_id else ""
    text = f"requeued: attempt {before} -> {e.attempt} ({why}{task}); restarts {e.restarts}"
    return HistoryEntry(at, "JobRequeued", text, e.failed_task_id or "", e.attempt, reason=why)


def _succeeded(s: _State, e: JobSucceeded, at: datetime) -> HistoryEntry:
    s.ended_at = at
    return HistoryEntry(at, "JobSucceeded", "succeeded: every task exited with code 0")


def _job_failed(s: _State, e: JobFailed, at: datetime) -> HistoryEntry:
    s.ended_at = at
    text = f"failed: {e.reason}" if e.reason else "failed"
    return HistoryEntry(at, "JobFailed", text, e.failed_task_id or "", reason=e.reason)


def _cancelled(s: _State, e: JobCancelled, at: datetime) -> HistoryEntry:
    s.ended_at = at
    by = actor_label(e.by, e.requested_by)
    text = "cancelled" + (f" by {by}" if by else "") + (f": {e.reason}" if e.reason else "")
    return HistoryEntry(at, "JobCancelled", text, by=by, reason=e.reason)


Step = Callable[[_State, Any, datetime], HistoryEntry]

STEPS: Mapping[type[JobEvent], Step] = {
    JobSubmitted: _submitted,
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
"""Event type -> its history line (and what it changes about the attempts)."""


def _accounting(s: _State, attempts: tuple[Attempt, ...], now: datetime) -> Accounting:
    starts = [a.started_at for a in attempts if a.started_at is not None]
    ran = [a for a in attempts if a.started_at is not None]
    open_end = any(a.ended_at is None for a in ran)
    first = min(starts) if starts else None
    if first is None:
        end = s.ended_at or now
        wait = (end - s.submitted_at).total_seconds() if s.submitted_at else 0.0
        elapsed = 0.0
    else:
        wait = (first - s.submitted_at).total_seconds() if s.submitted_at else 0.0
        last = now if open_end else max(a.ended_at for a in ran if a.ended_at is not None)
        elapsed = (last - first).total_seconds()
    costs = [(a.price_per_hour, a.running_s(now)) for a in ran]
    cost = (
        None
        if any(p is None for p, _ in costs)
        else sum((p or 0.0) * seconds / SECONDS_PER_HOUR for p, seconds in costs)
    )
    return Accounting(
        attempts=s.job_attempt,
        wait_s=max(0.0, wait),
        elapsed_s=max(0.0, elapsed),
        gpu_hours=sum(a.gpu_hours(now) for a in attempts),
        cpu_hours=sum(a.cpu_hours(now) for a in attempts),
        cost=cost,
    )


def build_history(events: Iterable[tuple[datetime, JobEvent]], now: datetime) -> History:
    """The history of one job from its stream's events in version order, each with when it happened.

    `now` ends the attempts still running (for their hours and the job's elapsed time).
    """
    state = _State()
    for at, event in events:
        state.entries.append(STEPS[type(event)](state, event, at))
    attempts = tuple(sorted(state.attempts.values(), key=lambda a: (a.attempt, a.placed_at, a.task_id)))
    return History(tuple(state.entries), attempts, _accounting(state, attempts, now))
