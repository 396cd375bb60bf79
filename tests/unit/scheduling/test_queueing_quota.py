"""Quota: guaranteed and maximum per flavour, the queue hierarchy, cohort borrowing and lending."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from suanli.scheduling.domain.queueing import (
    ClusterState,
    FirstFitPlacer,
    QueueSpec,
    QuotaExceeded,
    RunningWorkload,
    Workload,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, node, pending, queue, running

# Room for everything: these cases are about quota, never about nodes.
NODES = tuple(node(f"n{i}", gpus=8) for i in range(4))


@dataclass(frozen=True)
class Case:
    name: str
    queues: tuple[QueueSpec, ...]
    pending: tuple[Workload, ...]
    running: tuple[RunningWorkload, ...] = ()
    admitted: tuple[str, ...] = ()
    exceeded: QuotaExceeded | None = None


CASES = (
    Case(
        "within guarantee",
        (queue("q", gpu_A100=2000),),
        (pending(job("j", gpus=2), 1),),
        admitted=("j",),
    ),
    Case(
        "beyond guarantee without a cohort",
        (queue("q", gpu_A100=2000),),
        (pending(job("j", gpus=3), 1),),
        exceeded=QuotaExceeded("q", "gpu:A100", 3000, 2000),
    ),
    Case(
        "running work uses the guarantee",
        (queue("q", gpu_A100=2000),),
        (pending(job("j", gpus=2), 2),),
        running=(running(job("r", gpus=1), 1, ("n0", (0,))),),
        exceeded=QuotaExceeded("q", "gpu:A100", 2000, 1000),
    ),
    Case(
        "cpu is a flavour of its own",
        (queue("q", gpu_A100=8000, cpu=4000),),
        (pending(job("j", gpus=0, cpu=5000), 1),),
        exceeded=QuotaExceeded("q", "cpu", 5000, 4000),
    ),
    Case(
        "a flavour the queue does not list is not governed",
        (queue("q", gpu_A100=8000),),
        (pending(job("j", gpus=1, memory=200_000), 1),),
        admitted=("j",),
    ),
    Case(
        "maximum caps borrowing even when the cohort has room",
        (queue("a", "c", gpu_A100=(2000, 3000, None, None)), queue("b", "c", gpu_A100=8000)),
        (pending(job("j", "a", gpus=4), 1),),
        exceeded=QuotaExceeded("a", "gpu:A100", 4000, 3000),
    ),
    Case(
        "a child's usage counts against its parent",
        (queue("acme", gpu_A100=4000), queue("acme/x", gpu_A100=4000), queue("acme/y", gpu_A100=4000)),
        (pending(job("j", "acme/y", gpus=2), 2),),
        running=(running(job("r", "acme/x", gpus=3), 1, ("n0", (0, 1, 2))),),
        exceeded=QuotaExceeded("acme", "gpu:A100", 2000, 1000),
    ),
    Case(
        "a parent's maximum caps the sum of its children",
        (
            queue("acme", "root", gpu_A100=(1000, 2000, None, None)),
            queue("other", "root", gpu_A100=8000),
            queue("acme/x", "c", gpu_A100=2000),
            queue("acme/y", "c", gpu_A100=2000),
        ),
        (pending(job("j1", "acme/x", gpus=2), 1), pending(job("j2", "acme/y", gpus=1), 2)),
        exceeded=QuotaExceeded("acme", "gpu:A100", 1000, 0),
        admitted=("j1",),
    ),
    Case(
        "borrowing the cohort's unused guarantee",
        (queue("a", "c", gpu_A100=2000), queue("b", "c", gpu_A100=4000)),
        (pending(job("j", "a", gpus=6), 1),),
        admitted=("j",),
    ),
    Case(
        "borrowing limit",
        (queue("a", "c", gpu_A100=(2000, None, 1000, None)), queue("b", "c", gpu_A100=4000)),
        (pending(job("j", "a", gpus=4), 1),),
        exceeded=QuotaExceeded("a", "gpu:A100", 4000, 3000),
    ),
    Case(
        "lending limit caps what others may borrow",
        (queue("a", "c", gpu_A100=2000), queue("b", "c", gpu_A100=(4000, None, None, 1000))),
        (pending(job("j", "a", gpus=4), 1),),
        exceeded=QuotaExceeded("a", "gpu:A100", 4000, 3000),
    ),
    Case(
        "what is borrowed from the pool is gone for others",
        (queue("a", "c", gpu_A100=2000), queue("b", "c", gpu_A100=2000), queue("d", "c", gpu_A100=2000)),
        (pending(job("j", "d", gpus=3), 2),),
        running=(running(job("r", "a", gpus=4), 1, ("n0", (0, 1, 2, 3))),),
        exceeded=QuotaExceeded("d", "gpu:A100", 3000, 2000),
    ),
    Case(
        "the part of a guarantee never lent is there without reclaim",
        (queue("a", "c", gpu_A100=4000), queue("b", "c", gpu_A100=(4000, None, None, 1000))),
        (pending(job("j", "b", gpus=3), 2),),
        running=(running(job("r", "a", gpus=5), 1, ("n0", (0, 1, 2, 3, 4))),),
        admitted=("j",),
    ),
)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_quota(case: Case) -> None:
    state = ClusterState(NODES, case.queues, case.running, case.pending)
    result = schedule_cycle(state, FirstFitPlacer())
    assert result.admitted == case.admitted
    assert not result.preemptions
    exceeded = [p.reason for p in result.pending]
    assert exceeded == ([case.exceeded] if case.exceeded else [])


def test_flavours_are_tried_in_the_queue_order_and_the_charged_one_is_reported() -> None:
    nodes = (node("a100", gpus=4, model="A100"), node("h100", gpus=4, model="H100"))
    queues = (queue("q", gpu_A100=1000, gpu_H100=4000),)
    state = ClusterState(nodes, queues, pending=(pending(job("j", gpus=2), 1),))
    result = schedule_cycle(state, FirstFitPlacer())
    (admission,) = result.admissions
    assert admission.gpu_flavour == "gpu:H100"
    assert {p.node_id for p in admission.placements} == {"h100"}
    assert dict(next(u for u in result.usage if u.queue == "q").guaranteed)["gpu:H100"] == 2000


def test_a_job_restricted_to_one_model_is_charged_to_that_flavour_only() -> None:
    nodes = (node("a100", gpus=4, model="A100"), node("h100", gpus=4, model="H100"))
    queues = (queue("q", gpu_A100=4000, gpu_H100=1000),)
    state = ClusterState(nodes, queues, pending=(pending(job("j", gpus=2, models=("H100",)), 1),))
    result = schedule_cycle(state, FirstFitPlacer())
    assert result.reason("j") == QuotaExceeded("q", "gpu:H100", 2000, 1000)
