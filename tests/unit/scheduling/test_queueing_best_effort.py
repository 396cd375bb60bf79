"""Best-effort tier: runs on idle room outside quota, is evicted first, and may overcommit shared GPUs."""

from __future__ import annotations

import pytest

from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    FirstFitPlacer,
    NoNodeFits,
    QueueUsage,
    RunningWorkload,
    Workload,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, node, pending, queue, running

QUEUES = (queue("q", gpu_A100=1000),)


def usage_of(result_usage: tuple[QueueUsage, ...], name: str) -> tuple[dict[str, int], dict[str, int]]:
    entry = next(u for u in result_usage if u.queue == name)
    return dict(entry.guaranteed), dict(entry.best_effort)


def test_best_effort_work_uses_idle_room_beyond_quota_and_is_not_charged_to_it() -> None:
    state = ClusterState(
        (node("n", gpus=4),),
        QUEUES,
        pending=(pending(job("be", gpus=3, best_effort=True), 1), pending(job("g", gpus=1), 2)),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert result.admitted == ("g", "be")  # guaranteed work is decided first
    assert [a.best_effort for a in result.admissions] == [False, True]
    guaranteed, best_effort = usage_of(result.usage, "q")
    assert guaranteed["gpu:A100"] == 1000
    assert best_effort["gpu:A100"] == 3000


def test_best_effort_work_never_preempts() -> None:
    state = ClusterState(
        (node("n", gpus=1),),
        QUEUES,
        (running(job("low", gpus=1, priority=0, best_effort=True), 1, ("n", (0,))),),
        (pending(job("be", gpus=1, priority=100, best_effort=True), 2),),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert result.preemptions == ()
    assert result.reason("be") == NoNodeFits(1, (("gpu", 1),))


def shared_device(
    ratio: float, busy: tuple[RunningWorkload, ...], candidate: Workload
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    state = ClusterState((node("n", gpus=1),), QUEUES, busy, (candidate,))
    result = schedule_cycle(state, FirstFitPlacer(), CycleConfig(overcommit_ratio=ratio))
    return result.admitted, tuple((p.preemptor, p.victims) for p in result.preemptions)


GUARANTEED_600 = running(job("g600", gpus=1, milli=600), 1, ("n", (0,)))
BEST_EFFORT_700 = running(job("be700", gpus=1, milli=700, best_effort=True), 1, ("n", (0,)))


@pytest.mark.parametrize(
    ("name", "ratio", "busy", "candidate", "admitted", "preemptions"),
    [
        (
            "best-effort shared work overcommits up to ratio x 1000",
            1.5,
            (GUARANTEED_600,),
            pending(job("be", gpus=1, milli=700, best_effort=True), 2),
            ("be",),
            (),
        ),
        (
            "but not past it",
            1.5,
            (GUARANTEED_600,),
            pending(job("be", gpus=1, milli=901, best_effort=True), 2),
            (),
            (),
        ),
        (
            "no overcommit at ratio 1",
            1.0,
            (GUARANTEED_600,),
            pending(job("be", gpus=1, milli=700, best_effort=True), 2),
            (),
            (),
        ),
        (
            "whole-GPU best-effort work does not overcommit",
            1.5,
            (running(job("g400", gpus=1, milli=400), 1, ("n", (0,))),),
            pending(job("be", gpus=1, best_effort=True), 2),
            (),
            (),
        ),
        (
            "guaranteed work never takes a device past 1000: it evicts best-effort work instead",
            1.5,
            (GUARANTEED_600, BEST_EFFORT_700),
            pending(job("g", gpus=1, milli=300), 2),
            (),
            (("g", ("be700",)),),
        ),
        (
            "guaranteed work fits beside best-effort work while the device stays within 1000",
            1.5,
            (BEST_EFFORT_700,),
            pending(job("g", gpus=1, milli=300), 2),
            ("g",),
            (),
        ),
    ],
)
def test_gpu_overcommit(
    name: str,
    ratio: float,
    busy: tuple[RunningWorkload, ...],
    candidate: Workload,
    admitted: tuple[str, ...],
    preemptions: tuple[tuple[str, tuple[str, ...]], ...],
) -> None:
    assert shared_device(ratio, busy, candidate) == (admitted, preemptions)


def test_overcommit_ratio_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="overcommit_ratio"):
        CycleConfig(overcommit_ratio=0.9)
