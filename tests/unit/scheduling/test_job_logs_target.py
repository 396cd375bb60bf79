"""Which attempt `suanli job logs` means, from the job's history, and the precise refusals."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from suanli.errors import FailedPrecondition, InvalidArgument, NotFound
from suanli.scheduling.domain.jobs.history import Attempt
from suanli.scheduling.domain.jobs.logs import LogTarget, Wait, locate
from suanli.scheduling.domain.jobs.spec import AcceptedTask

AT = datetime(2026, 1, 1, tzinfo=UTC)
TASKS = (AcceptedTask("j1-w-0", "w-0"), AcceptedTask("j1-w-1", "w-1"))


def _attempt(task_id: str, n: int, *, started: bool = True, ended: bool = True, node: str = "n1") -> Attempt:
    return Attempt(
        task_id,
        n,
        node,
        "r",
        (),
        (),
        1000,
        AT,
        started_at=AT if started else None,
        ended_at=AT if ended else None,
        outcome="SUCCEEDED" if started else "FAILED",
    )


def test_the_latest_attempt_by_name_or_id_and_an_earlier_one_by_number() -> None:
    attempts = [_attempt("j1-w-0", 1, node="n1"), _attempt("j1-w-0", 2, ended=False, node="n2")]
    assert locate("j1", TASKS, attempts, 2, "w-0", 0) == LogTarget("j1-w-0", 2, "n2", False)
    assert locate("j1", TASKS, attempts, 2, "j1-w-0", 1) == LogTarget("j1-w-0", 1, "n1", True)
    only = (TASKS[0],)
    assert locate("j1", only, attempts, 2, "", 0) == LogTarget("j1-w-0", 2, "n2", False)


def test_bad_task_or_attempt_is_refused_precisely() -> None:
    attempts = [_attempt("j1-w-0", 1)]
    with pytest.raises(InvalidArgument, match="job j1 has 2 tasks \\(w-0, w-1\\): name one"):
        locate("j1", TASKS, attempts, 1, "", 0)
    with pytest.raises(NotFound, match="job j1 has no task 'ps' \\(tasks: w-0, w-1\\)"):
        locate("j1", TASKS, attempts, 1, "ps", 0)
    with pytest.raises(NotFound, match="task w-0 has no attempt 3: the job is at attempt 1"):
        locate("j1", TASKS, attempts, 1, "w-0", 3)
    with pytest.raises(InvalidArgument, match="attempts count from 1"):
        locate("j1", TASKS, attempts, 1, "w-0", -1)
    with pytest.raises(NotFound, match="task w-1 was not placed in attempt 1"):
        locate("j1", TASKS, attempts, 2, "w-1", 1)


def test_an_attempt_without_output_yet_is_waited_for_and_one_that_never_started_is_refused() -> None:
    assert locate("j1", TASKS, [], 1, "w-0", 0) == Wait("j1-w-0", 1, "task w-0 attempt 1 is not placed yet")
    placed = [_attempt("j1-w-0", 1, started=False, ended=False, node="n4")]
    assert locate("j1", TASKS, placed, 1, "w-0", 1) == Wait(
        "j1-w-0", 1, "task w-0 attempt 1 has not started on n4"
    )
    never = [_attempt("j1-w-0", 1, started=False, ended=True)]
    with pytest.raises(FailedPrecondition, match=r"ended \(FAILED\) before it started: it has no output"):
        locate("j1", TASKS, never, 1, "w-0", 1)
