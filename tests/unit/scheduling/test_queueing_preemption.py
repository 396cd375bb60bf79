"""Preemption: priority inside a queue, reclaim of borrowed quota, best-effort first, minimal whole-job
victim sets, non-preemptible jobs never touched."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from suanli.scheduling.domain.model import Node
from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    FirstFitPlacer,
    NoNodeFits,
    QueueSpec,
    QuotaExceeded,
    ReasonCode,
    RunningWorkload,
    WaitingForPreemption,
    Workload,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, node, pending, queue, running

ONE_QUEUE = (queue("q", gpu_A100=64_000),)


@dataclass(frozen=True)
class Case:
    name: str
    running: tuple[RunningWorkload, ...]
    pending: tuple[Workload, ...]
    victims: tuple[str, ...] | None  # None: no preemption
    queues: tuple[QueueSpec, ...] = ONE_QUEUE
    gpus: int = 4


CASES = (
    Case(
        "the lowest priority goes",
        (
            running(job("p1", gpus=2, priority=1), 1, ("n", (0, 1))),
            running(job("p0", gpus=2, priority=0), 2, ("n", (2, 3))),
        ),
        (pending(job("hi", gpus=2, priority=10), 3),),
        ("p0",),
    ),
    Case(
        "equal priority: the most recent goes",
        (
            running(job("old", gpus=2), 1, ("n", (0, 1))),
            running(job("new", gpus=2), 2, ("n", (2, 3))),
        ),
        (pending(job("hi", gpus=2, priority=10), 3),),
        ("new",),
    ),
    Case(
        "fewest victims beats lowest priority",
        (
            running(job("small1", gpus=1, priority=0), 1, ("n", (0,))),
            running(job("small2", gpus=1, priority=0), 2, ("n", (1,))),
            running(job("big", gpus=2, priority=1), 3, ("n", (2, 3))),
        ),
        (pending(job("hi", gpus=2, priority=10), 4),),
        ("big",),
    ),
    Case(
        "only as many victims as needed",
        tuple(running(job(f"r{i}", gpus=1), i, ("n", (i,))) for i in range(4)),
        (pending(job("hi", gpus=2, priority=10), 9),),
        ("r3", "r2"),
    ),
    Case(
        "a non-preemptible job is never chosen, even when it is the cheapest",
        (
            running(job("pinned", gpus=2, priority=0, preemptible=False), 1, ("n", (0, 1))),
            running(job("p5", gpus=2, priority=5), 2, ("n", (2, 3))),
        ),
        (pending(job("hi", gpus=2, priority=10), 3),),
        ("p5",),
    ),
    Case(
        "nothing preemptible: no preemption",
        (running(job("pinned", gpus=4, preemptible=False), 1, ("n", (0, 1, 2, 3))),),
        (pending(job("hi", gpus=2, priority=10), 3),),
        None,
    ),
    Case(
        "equal priority never preempts",
        (running(job("r", gpus=4, priority=10), 1, ("n", (0, 1, 2, 3))),),
        (pending(job("same", gpus=2, priority=10), 3),),
        None,
    ),
    Case(
        "a lower-priority job of another queue that is not borrowing is safe",
        (running(job("other", "b", gpus=4, priority=0), 1, ("n", (0, 1, 2, 3))),),
        (pending(job("hi", "a", gpus=2, priority=10), 2),),
        None,
        queues=(queue("a", gpu_A100=4000), queue("b", gpu_A100=4000)),
    ),
    Case(
        "best-effort work goes first, even at high priority",
        (
            running(job("low", gpus=2, priority=0), 1, ("n", (0, 1))),
            running(job("be", gpus=2, priority=100, best_effort=True), 2, ("n", (2, 3))),
        ),
        (pending(job("hi", gpus=2, priority=10), 3),),
        ("be",),
    ),
    Case(
        "best-effort work of any queue makes room for guaranteed work of another",
        (running(job("be", "b", gpus=4, best_effort=True), 1, ("n", (0, 1, 2, 3))),),
        (pending(job("g", "a", gpus=1), 2),),
        ("be",),
        queues=(queue("a", gpu_A100=4000), queue("b", gpu_A100=0)),
    ),
    Case(
        "a victim gang goes whole, across nodes",
        (
            running(job("gang", gpus=4, tasks=2), 1, ("n", (0, 1, 2, 3)), ("m", (0, 1, 2, 3))),
            running(job("solo", gpus=4, priority=5), 2, ("o", (0, 1, 2, 3))),
        ),
        (pending(job("hi", gpus=4, priority=10), 3),),
        ("gang",),
    ),
)


def nodes(gpus: int) -> tuple[Node, ...]:
    return tuple(node(n, gpus=gpus) for n in ("n", "m", "o"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_victim_choice(case: Case) -> None:
    # Only node "n" has room to win back unless a case places work on "m" and "o" too.
    filled = {p.node_id for r in case.running for p in r.placements}
    fillers = tuple(
        running(job(f"fill-{n}", gpus=4, preemptible=False), 0, (n, (0, 1, 2, 3)))
        for n in ("n", "m", "o")
        if n not in filled
    )
    state = ClusterState(nodes(case.gpus), case.queues, case.running + fillers, case.pending)
    result = schedule_cycle(state, FirstFitPlacer())
    preemptor = case.pending[0].job.id
    assert result.admitted == ()
    if case.victims is None:
        assert result.preemptions == ()
        assert result.reason(preemptor).code is not ReasonCode.WAITING_FOR_PREEMPTION
    else:
        (preemption,) = result.preemptions
        assert (preemption.preemptor, set(preemption.victims)) == (preemptor, set(case.victims))
        assert result.reason(preemptor) == WaitingForPreemption(preemption.victims)


def test_the_room_of_a_stopping_victim_is_not_given_away_in_the_same_cycle() -> None:
    gang = job("gang", gpus=4, tasks=2)
    state = ClusterState(
        (node("n", gpus=4), node("m", gpus=4)),
        ONE_QUEUE,
        (running(gang, 1, ("n", (0, 1, 2, 3)), ("m", (0, 1, 2, 3))),),
        (pending(job("hi", gpus=4, priority=10), 2), pending(job("next", gpus=4, priority=5), 3)),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert [(p.preemptor, p.victims) for p in result.preemptions] == [("hi", ("gang",))]
    # The gang's second half is still stopping: "next" waits rather than being placed on it.
    assert result.admitted == ()
    assert result.reason("next").code is not ReasonCode.WAITING_FOR_PREEMPTION


COHORT = (queue("a", "c", gpu_A100=4000), queue("b", "c", gpu_A100=4000))


def test_reclaim_evicts_the_borrower_regardless_of_priority() -> None:
    state = ClusterState(
        (node("n", gpus=8),),
        COHORT,
        (
            running(job("b1", "b", gpus=4, priority=100), 1, ("n", (0, 1, 2, 3))),
            running(job("b2", "b", gpus=2, priority=100), 2, ("n", (4, 5))),
        ),
        (pending(job("a1", "a", gpus=4, priority=0), 3),),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert [(p.preemptor, p.victims) for p in result.preemptions] == [("a1", ("b2",))]
    assert result.reason("a1") == WaitingForPreemption(("b2",))


def test_no_reclaim_for_a_queue_that_would_itself_be_borrowing() -> None:
    state = ClusterState(
        (node("n", gpus=8),),
        (queue("a", "c", gpu_A100=2000), queue("b", "c", gpu_A100=6000)),
        (running(job("b1", "b", gpus=7), 1, ("n", tuple(range(7)))),),
        (pending(job("a1", "a", gpus=3, priority=10), 2),),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert result.preemptions == ()
    assert result.reason("a1") == QuotaExceeded("a", "gpu:A100", 3000, 1000)


def test_a_queue_within_its_guarantee_does_not_reclaim_from_a_queue_that_is_not_borrowing() -> None:
    state = ClusterState(
        (node("n", gpus=4),),
        COHORT,
        (running(job("b1", "b", gpus=4), 1, ("n", (0, 1, 2, 3))),),
        (pending(job("a1", "a", gpus=2), 2),),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert result.preemptions == ()
    assert isinstance(result.reason("a1"), NoNodeFits)


def test_preemption_can_be_turned_off() -> None:
    state = ClusterState(
        (node("n", gpus=4),),
        ONE_QUEUE,
        (running(job("low", gpus=4), 1, ("n", (0, 1, 2, 3))),),
        (pending(job("hi", gpus=4, priority=10), 2),),
    )
    result = schedule_cycle(state, FirstFitPlacer(), CycleConfig(preemption=False))
    assert result.preemptions == ()
    assert isinstance(result.reason("hi"), NoNodeFits)


def test_a_victim_still_stopping_keeps_its_room_but_not_its_quota_and_is_not_chosen_again() -> None:
    stopping = replace(running(job("low", gpus=2), 1, ("n", (0, 1))), stopping=True)
    state = ClusterState(
        (node("n", gpus=4),),
        (queue("q", gpu_A100=4000),),
        (stopping, running(job("mid", gpus=2, priority=5), 2, ("n", (2, 3)))),
        (pending(job("hi", gpus=2, priority=10), 3),),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    # "low" no longer counts against the quota (so "hi" passes it) and is not evicted twice; its devices
    # are still busy, so "hi" waits for "mid" instead.
    assert [(p.preemptor, p.victims) for p in result.preemptions] == [("hi", ("mid",))]
