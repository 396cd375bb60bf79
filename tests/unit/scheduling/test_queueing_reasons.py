"""Every pending workload gets exactly one reason; each code carries its fields and a readable message."""

from __future__ import annotations

import pytest

from suanli.scheduling.domain.queueing import (
    BlockedByHigherPriority,
    ClusterState,
    CycleConfig,
    FirstFitPlacer,
    GangIncomplete,
    Inadmissible,
    NetworkConstraint,
    NoNodeFits,
    NoRegionFits,
    PendingReason,
    PriorityClass,
    QuotaExceeded,
    ReasonCode,
    Unschedulable,
    WaitingForPreemption,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, node, pending, queue, running


@pytest.mark.parametrize(
    ("name", "pending_", "expected"),
    [
        ("unknown queue", pending(job("j", "nope"), 1), Inadmissible("nope", "queue is unknown")),
        ("stopped queue", pending(job("j", "halted"), 1), Inadmissible("halted", "queue is stopped")),
        (
            "a stopped parent stops its children",
            pending(job("j", "halted/child"), 1),
            Inadmissible("halted/child", "queue is stopped"),
        ),
        (
            "unknown priority class",
            pending(job("j", "q"), 1, priority_class="vip"),
            Inadmissible("q", "priority class vip is unknown"),
        ),
        (
            "no quota for the requested GPU model",
            pending(job("j", "q", models=("T4",)), 1),
            Inadmissible("q", "no quota for any requested GPU model (T4)"),
        ),
    ],
)
def test_inadmissible(name: str, pending_: object, expected: Inadmissible) -> None:
    queues = (
        queue("q", gpu_A100=8000),
        queue("halted", stopped=True, gpu_A100=8000),
        queue("halted/child", gpu_A100=8000),
    )
    state = ClusterState((node("n", gpus=8),), queues, pending=(pending_,))
    result = schedule_cycle(state, FirstFitPlacer(), CycleConfig(priority_classes=(PriorityClass("p", 1),)))
    assert result.admitted == ()
    assert result.reason("j") == expected
    assert result.reason("j").code is ReasonCode.INADMISSIBLE


A100_QUEUE = queue("q", gpu_A100=16_000)
ANY_MODEL_QUEUE = queue("q")  # governs no GPU model, so the job's own allow-list decides


@pytest.mark.parametrize(
    ("name", "state", "job_id", "reason", "message"),
    [
        (
            "quota",
            ClusterState(
                (node("n", gpus=4),),
                (queue("capped", gpu_A100=1000),),
                pending=(pending(job("j", "capped", gpus=2), 1),),
            ),
            "j",
            QuotaExceeded("capped", "gpu:A100", 2000, 1000),
            "quota of queue capped exceeded for gpu:A100: requested 2000, available 1000",
        ),
        (
            "no node fits, counted per filter",
            ClusterState(
                (node("h100", gpus=4, model="H100"), node("tiny", gpus=1), node("starved", gpus=4, cpu=1500)),
                (ANY_MODEL_QUEUE,),
                # The starved node could hold the job once `busy` ends, so the job is not unschedulable.
                (running(job("busy", gpus=0, cpu=1000, preemptible=False), 1, ("starved", ())),),
                (pending(job("j", gpus=2, models=("A100",)), 2),),
            ),
            "j",
            NoNodeFits(3, (("cpu", 1), ("gpu", 1), ("gpu_model", 1))),
            "0/3 nodes fit: 1 rejected by cpu, 1 rejected by gpu, 1 rejected by gpu_model",
        ),
        (
            "gang incomplete",
            ClusterState(
                (node("n1", gpus=2), node("n2", gpus=1)),
                (A100_QUEUE,),
                pending=(pending(job("j", gpus=2, tasks=3), 1),),
            ),
            "j",
            GangIncomplete(1, 3, (("gpu", 2),)),
            "only 1 of 3 gang tasks could be placed; nothing was admitted",
        ),
        (
            "waiting for preemption",
            ClusterState(
                (node("n", gpus=4),),
                (A100_QUEUE,),
                (
                    running(job("low", gpus=2, priority=0), 1, ("n", (0, 1))),
                    running(job("pinned", gpus=2, preemptible=False), 2, ("n", (2, 3))),
                ),
                (pending(job("j", gpus=2, priority=10), 3),),
            ),
            "j",
            WaitingForPreemption(("low",)),
            "waiting for 1 preempted job(s) to stop: low",
        ),
        (
            "blocked by a reservation for a job ahead",
            ClusterState(
                (node("n1", gpus=4), node("n2", gpus=1)),
                (A100_QUEUE,),
                (running(job("busy", gpus=2, preemptible=False), 1, ("n1", (0, 1))),),
                (pending(job("head", gpus=4, priority=10), 2), pending(job("j", gpus=2), 3)),
            ),
            "j",
            BlockedByHigherPriority(("head",), ("n1",)),
            "fits only on resources reserved for head (nodes n1); backfill would delay them",
        ),
    ],
)
def test_reason_fields_and_message(
    name: str, state: ClusterState, job_id: str, reason: PendingReason, message: str
) -> None:
    result = schedule_cycle(state, FirstFitPlacer())
    assert job_id not in result.admitted
    assert result.reason(job_id) == reason
    assert result.reason(job_id).message == message


def test_blocked_by_higher_priority_message_and_dict() -> None:
    reason = BlockedByHigherPriority(("head",), ("n1",))
    assert reason.message == "fits only on resources reserved for head (nodes n1); backfill would delay them"
    assert reason.as_dict() == {
        "code": "BLOCKED_BY_HIGHER_PRIORITY",
        "message": reason.message,
        "reserved_for": ("head",),
        "nodes": ("n1",),
    }


def test_inadmissible_and_no_node_fits_messages() -> None:
    assert Inadmissible("q", "queue is stopped").message == "queue q: queue is stopped"
    assert NoNodeFits(0, ()).message == "0/0 nodes fit: no nodes"


def test_every_pending_workload_gets_exactly_one_outcome() -> None:
    nodes = (node("n", gpus=2),)
    queues = (queue("q", gpu_A100=2000), queue("r", gpu_A100=1000))
    workloads = tuple(pending(job(f"j{i}", "qr"[i % 2], gpus=1 + i % 2), i) for i in range(8))
    result = schedule_cycle(ClusterState(nodes, queues, pending=workloads), FirstFitPlacer())
    outcomes = [a.job_id for a in result.admissions] + [p.job_id for p in result.pending]
    assert sorted(outcomes) == sorted(w.job.id for w in workloads)
    assert all(p.reason.message for p in result.pending)


def test_every_code_is_covered_by_a_reason_type() -> None:
    codes = {
        cls.code
        for cls in (
            Inadmissible,
            QuotaExceeded,
            NoNodeFits,
            GangIncomplete,
            WaitingForPreemption,
            BlockedByHigherPriority,
            NetworkConstraint,
            NoRegionFits,
            Unschedulable,
        )
    }
    assert codes == set(ReasonCode)
