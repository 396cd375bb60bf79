"""The cycle as a whole: a pure, replayable function; queue configuration is validated up front."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from suanli.scheduling.domain.queueing import (
    ClusterState,
    FirstFitPlacer,
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
