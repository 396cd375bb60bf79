"""The cycle as a whole: a pure, replayable function; queue configuration is validated up front."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from suanli.scheduling.domain.model import Job
from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    FirstFitPlacer,
    GangPlacement,
    NodeAvailability,
    NoFit,
    QueueSpec,
    QueueTree,
    ResourceQuota,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, node, pending, queue, running


def busy_state() -> ClusterState:
    return ClusterState(
        (node("n1", gpus=4), node("n2", gpus=2)),
        (
            queue("t", "root", gpu_A100=4000),
            queue("t/a", "c", gpu_A100=2000),
            queue("t/b", "c", gpu_A100=2000),
            queue("u", "root", gpu_A100=2000),
        ),
        (
            running(job("r1", "t/a", gpus=3), 1, ("n1", (0, 1, 2))),
            running(job("be", "u", gpus=1, milli=500, best_effort=True), 2, ("n2", (0,))),
        ),
        tuple(
            pending(job(f"p{i}", ("t/a", "t/b", "u")[i % 3], gpus=1 + i % 2, priority=i % 4), 10 + i)
            for i in range(9)
        ),
    )


def test_the_same_snapshot_gives_the_same_decisions() -> None:
    first = schedule_cycle(busy_state(), FirstFitPlacer())
    second = schedule_cycle(busy_state(), FirstFitPlacer())
    assert first == second
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.admissions = ()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ((QueueSpec("acme/x"),), "parent acme is not defined"),
        ((QueueSpec("a"), QueueSpec("a")), "duplicate queue name"),
    ],
)
def test_inconsistent_queue_trees_are_refused(specs: tuple[QueueSpec, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        QueueTree(specs)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ResourceQuota("cpu", 10, maximum=5), "below guaranteed"),
        (lambda: ResourceQuota("cpu", 10, lending_limit=11), "lending_limit"),
        (lambda: ResourceQuota("cpu", -1), "guaranteed"),
        (lambda: QueueSpec("a//b"), "bad queue name"),
        (lambda: QueueSpec("a", (ResourceQuota("cpu", 1), ResourceQuota("cpu", 2))), "listed twice"),
    ],
)
def test_bad_quota_values_are_refused(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


class CountingPlacer(FirstFitPlacer):
    """The reference placer, counting its attempts (the thing the memo saves)."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    def place_gang(self, nodes: tuple[NodeAvailability, ...], job: Job) -> GangPlacement | NoFit:
        self.attempts += 1
        return super().place_gang(nodes, job)


def test_a_backlog_of_look_alike_jobs_costs_one_attempt_per_shape() -> None:
    # 2 free GPUs of 4; ten 4-GPU jobs cannot fit this cycle, a 1-GPU job behind them still can.
    state = ClusterState(
        (node("n1", gpus=4),),
        (queue("q", gpu_A100=64_000),),
        (running(job("busy", "q", gpus=2, preemptible=False), 0, ("n1", (0, 1))),),
        (
            *(pending(job(f"big{i}", "q", gpus=4), i) for i in range(10)),
            pending(job("small", "q", gpus=1), 10),
            pending(job("small2", "q", gpus=1), 11),
        ),
    )
    placer = CountingPlacer()
    result = schedule_cycle(state, placer, CycleConfig(backfill=False))
    assert result.admitted == ("small", "small2")
    assert {p.job_id for p in result.pending} == {f"big{i}" for i in range(10)}
    assert {p.reason.code for p in result.pending} == {"NO_NODE_FITS"}
    # one attempt for the big shape, one for each small job (successes are never remembered)
    assert placer.attempts == 3
