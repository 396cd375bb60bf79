"""The pure history builder: a job's stream told as events, attempts with their placements kept across
requeues, who preempted and cancelled it, and what it used (elapsed, GPU-hours, expected cost)."""

from __future__ import annotations

import typing
from datetime import UTC, datetime, timedelta

from pytest import approx

from suanli.scheduling.domain.jobs import (
    AcceptedSpec,
    AcceptedTask,
    Actor,
    Cause,
    DeviceShare,
    JobCancelled,
    JobEvent,
    JobFailed,
    JobRequeued,
    JobSubmitted,
    PlacedRequests,
    TaskFailed,
    TaskFinished,
    TaskPlaced,
    TaskPreempted,
    TaskStarted,
    TaskStopRequested,
)
from suanli.scheduling.domain.jobs.history import STEPS, build_history

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TASK = "job-1-w-0"
SPEC = AcceptedSpec(
    name="train",
    queue="acme",
    tasks=(AcceptedTask(TASK, "w-0", cpu_milli=2000, memory_mib=1024, gpu_count=2, gpu_milli=1000),),
)
ALICE = Actor("alice", "acme", "tok-1")


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def placed(node: str, attempt: int, price: float | None = 2.0) -> TaskPlaced:
    return TaskPlaced(
        "job-1",
        TASK,
        node,
        "cn-east",
        "site",
        (DeviceShare(0, 1000), DeviceShare(1, 1000)),
        PlacedRequests(2000, 1024, 2, 1000, 0, "A100"),
        attempt,
        price_per_hour=price,
    )


def preempted_then_cancelled() -> list[tuple[datetime, JobEvent]]:
    return [
        (at(0), JobSubmitted("job-1", SPEC, ALICE)),
        (at(1), placed("n1", 1)),
        (at(2), TaskStarted(TASK, "job-1", "n1", 1)),
        (at(62), TaskPreempted("job-1", TASK, "n1", 1, "preempted by job-9", preemptor_job_id="job-9")),
        (at(63), TaskFinished(TASK, "job-1", "n1", 1, 143)),
        (at(63), JobRequeued("job-1", "acme", "acme", 2, 1, Cause.PREEMPTED, "preempted")),
        (at(70), placed("n2", 2)),
        (at(71), placed("n2", 2)),  # reconciliation re-sent it: the same attempt
        (at(72), TaskStarted(TASK, "job-1", "n2", 2)),
        (at(80), TaskStopRequested("job-1", TASK, "n2", 2, "job cancelled: not needed")),
        (at(80), JobCancelled("job-1", "not needed", "alice@acme#tok-1", ALICE)),
        (at(81), TaskFinished(TASK, "job-1", "n2", 2, 0)),
    ]


def test_every_job_event_has_a_history_step() -> None:
    assert set(STEPS) == set(typing.get_args(JobEvent))


def test_the_history_names_the_preemptor_and_the_canceller_with_the_reason() -> None:
    history = build_history(preempted_then_cancelled(), now=at(100))
    lines = [(e.type, e.message, e.by) for e in history.entries]
    assert lines == [
        ("JobSubmitted", "submitted to queue acme (1 task) by alice@acme", "alice@acme"),
        ("TaskPlaced", "placed on node n1 in region cn-east, GPUs 0,1", ""),
        ("TaskStarted", "started on node n1", ""),
        ("TaskPreempted", "preempted by job job-9", "job-9"),
        ("TaskFinished", "preempted (exit code 143)", ""),
        ("JobRequeued", "requeued: attempt 1 -> 2 (PREEMPTED: preempted); restarts 1", ""),
        ("TaskPlaced", "placed on node n2 in region cn-east, GPUs 0,1", ""),
        ("TaskPlaced", "placement re-sent to node n2", ""),
        ("TaskStarted", "started on node n2", ""),
        ("TaskStopRequested", "stop requested: job cancelled: not needed", ""),
        ("JobCancelled", "cancelled by alice@acme: not needed", "alice@acme"),
        ("TaskFinished", "stopped (exit code 0)", ""),
    ]
    assert history.entries[10].reason == "not needed"


def test_attempts_keep_their_placements_and_how_they_ended() -> None:
    history = build_history(preempted_then_cancelled(), now=at(100))
    first, second = history.attempts
    assert (first.attempt, first.node_id, first.gpu_indices, first.outcome) == (1, "n1", (0, 1), "PREEMPTED")
    assert (first.started_at, first.ended_at, first.exit_code) == (at(2), at(63), 143)
    assert first.reason == "preempted by job-9"
    assert (second.attempt, second.node_id, second.outcome, second.placed_at) == (2, "n2", "STOPPED", at(70))
    assert second.reason == "job cancelled: not needed"


def test_accounting_counts_running_time_only_and_prices_it() -> None:
    acct = build_history(preempted_then_cancelled(), now=at(100)).accounting
    # Ran 61 min on attempt 1 and 9 min on attempt 2, with 2 GPUs and 2 cores at 2.0 per hour.
    assert acct.attempts == 2
    assert acct.wait_s == 120.0
    assert acct.elapsed_s == 79 * 60.0  # first start (2) to last end (81)
    assert acct.gpu_hours == approx(2 * 70 / 60)
    assert acct.cpu_hours == approx(2 * 70 / 60)
    assert acct.cost == approx(2.0 * 70 / 60)


def test_a_running_attempt_counts_to_now_and_a_missing_price_leaves_the_cost_unknown() -> None:
    events: list[tuple[datetime, JobEvent]] = [
        (at(0), JobSubmitted("job-1", SPEC)),
        (at(5), placed("n1", 1, price=None)),
        (at(5), TaskStarted(TASK, "job-1", "n1", 1)),
    ]
    history = build_history(events, now=at(35))
    [attempt] = history.attempts
    assert (attempt.outcome, attempt.ended_at) == ("RUNNING", None)
    assert history.accounting.elapsed_s == 30 * 60.0 and history.accounting.gpu_hours == 1.0
    assert history.accounting.cost is None
    assert history.entries[0].message == "submitted to queue acme (1 task)"  # no principal: no "by"


def test_a_pending_job_waits_until_now_and_a_failure_shows_its_exit_code() -> None:
    pending = build_history([(at(0), JobSubmitted("job-1", SPEC))], now=at(10))
    assert pending.accounting.wait_s == 600.0 and pending.accounting.elapsed_s == 0.0
    assert pending.attempts == () and pending.accounting.cost == 0.0

    events: list[tuple[datetime, JobEvent]] = [
        (at(0), JobSubmitted("job-1", SPEC)),
        (at(1), placed("n1", 1)),
        (at(2), TaskStarted(TASK, "job-1", "n1", 1)),
        (at(3), TaskFailed(TASK, "job-1", "n1", 1, "segfault", "EXITED", exit_code=139)),
        (at(3), JobFailed("job-1", "acme", "acme", "task job-1-w-0 failed; retries exhausted (0)", TASK)),
    ]
    failed = build_history(events, now=at(50))
    assert failed.entries[3].message == "failed: EXITED: segfault (exit code 139)"
    assert failed.entries[3].exit_code == 139
    assert failed.entries[4].message == "failed: task job-1-w-0 failed; retries exhausted (0)"
    [attempt] = failed.attempts
    assert (attempt.outcome, attempt.exit_code, attempt.ended_at) == ("FAILED", 139, at(3))
    assert failed.accounting.elapsed_s == 60.0  # ended: not counted to now


def test_a_lost_node_ends_the_attempt_as_lost() -> None:
    events: list[tuple[datetime, JobEvent]] = [
        (at(0), JobSubmitted("job-1", SPEC)),
        (at(1), placed("n1", 1)),
        (at(2), TaskStarted(TASK, "job-1", "n1", 1)),
        (at(4), TaskFailed(TASK, "job-1", "n1", 1, "node n1 was lost", "NODE_LOST")),
        (
            at(4),
            JobRequeued("job-1", "acme", "acme", 2, 1, Cause.NODE_LOST, "NODE_LOST: node n1 was lost", TASK),
        ),
    ]
    # The node was alive after all: its report of the lost attempt's end comes later, and is told so.
    events.append((at(6), TaskFinished(TASK, "job-1", "n1", 1, 143)))
    history = build_history(events, now=at(9))
    assert history.entries[3].message == "lost: NODE_LOST: node n1 was lost"
    assert history.entries[5].message == "reported ended after it was recorded lost (exit code 143)"
    assert (history.attempts[0].outcome, history.attempts[0].ended_at) == ("LOST", at(4))
    assert history.entries[4].message == (
        "requeued: attempt 1 -> 2 (NODE_LOST: NODE_LOST: node n1 was lost, task job-1-w-0); restarts 1"
    )
