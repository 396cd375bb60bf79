"""Order: hierarchical DRF among queues, priority (and priority classes) inside a queue, FIFO as tiebreak."""

from __future__ import annotations

import pytest

from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    FirstFitPlacer,
    PriorityClass,
    QueueSpec,
    RunningWorkload,
    Workload,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, node, pending, queue, running


def admitted(
    queues: tuple[QueueSpec, ...],
    pending_: tuple[Workload, ...],
    running_: tuple[RunningWorkload, ...] = (),
    *,
    gpus: int = 4,
    config: CycleConfig | None = None,
) -> tuple[str, ...]:
    state = ClusterState((node("n", gpus=gpus),), queues, running_, pending_)
    return schedule_cycle(state, FirstFitPlacer(), config).admitted


TWO_QUEUES = (queue("a", gpu_A100=4000, cpu=64_000), queue("b", gpu_A100=4000, cpu=64_000))


@pytest.mark.parametrize(
    ("name", "pending_", "running_", "expected"),
    [
        (
            "the queue with the lower dominant share goes first, whatever the submission order",
            (pending(job("ja", "a", gpus=2), 1), pending(job("jb", "b", gpus=2), 2)),
            (running(job("ra", "a", gpus=2), 0, ("n", (0, 1))),),
            ("jb",),
        ),
        (
            "equal shares: queue name breaks the tie",
            (pending(job("jb", "b", gpus=4), 1), pending(job("ja", "a", gpus=4), 2)),
            (),
            ("ja",),
        ),
        (
            "the dominant resource decides: a's cpu share 0.875 outweighs b's gpu share 0.75",
            (pending(job("ja", "a", gpus=1), 1), pending(job("jb", "b", gpus=1), 2)),
            (
                running(job("ra", "a", gpus=0, cpu=56_000), 0, ("n", ())),
                running(job("rb", "b", gpus=3), 0, ("n", (0, 1, 2))),
            ),
            ("jb",),
        ),
        (
            "shares are re-evaluated after every admission, so queues alternate",
            tuple(pending(job(f"{q}{i}", q, gpus=1), i) for q in "ab" for i in range(3)),
            (),
            ("a0", "b0", "a1", "b1"),
        ),
    ],
)
def test_fair_share_order(
    name: str,
    pending_: tuple[Workload, ...],
    running_: tuple[RunningWorkload, ...],
    expected: tuple[str, ...],
) -> None:
    assert admitted(TWO_QUEUES, pending_, running_) == expected


def test_hierarchical_fair_share_compares_tenants_before_teams() -> None:
    queues = (
        queue("t1", gpu_A100=4000),
        queue("t1/busy", gpu_A100=2000),
        queue("t1/idle", gpu_A100=2000),
        queue("t2", gpu_A100=4000),
        queue("t2/x", gpu_A100=4000),
    )
    # t1/idle has no usage of its own, but its tenant is at 0.5 while t2 is at 0.25.
    running_ = (
        running(job("r1", "t1/busy", gpus=2), 0, ("n", (0, 1))),
        running(job("r2", "t2/x", gpus=1), 0, ("n", (2,))),
    )
    pending_ = (pending(job("idle", "t1/idle", gpus=1), 1), pending(job("x", "t2/x", gpus=1), 2))
    assert admitted(queues, pending_, running_) == ("x",)


@pytest.mark.parametrize(
    ("name", "pending_", "expected"),
    [
        (
            "higher priority first inside a queue",
            (
                pending(job("low", "a", gpus=4, priority=0), 1),
                pending(job("high", "a", gpus=4, priority=10), 2),
            ),
            ("high",),
        ),
        (
            "same priority: submission order",
            (pending(job("second", "a", gpus=4), 2), pending(job("first", "a", gpus=4), 1)),
            ("first",),
        ),
        (
            "a priority class overrides the job's own priority",
            (
                pending(job("numeric", "a", gpus=4, priority=50), 1),
                pending(job("classed", "a", gpus=4, priority=0), 2, priority_class="production"),
            ),
            ("classed",),
        ),
    ],
)
def test_priority_order_inside_a_queue(
    name: str, pending_: tuple[Workload, ...], expected: tuple[str, ...]
) -> None:
    config = CycleConfig(priority_classes=(PriorityClass("production", 100), PriorityClass("batch", 0)))
    assert admitted(TWO_QUEUES, pending_, config=config) == expected
