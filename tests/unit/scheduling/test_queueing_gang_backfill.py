"""Gang admission is all-or-nothing; a blocked head reserves room, and only jobs that fit around the
reservation may backfill."""

from __future__ import annotations

from suanli.scheduling.domain.queueing import (
    BlockedByHigherPriority,
    ClusterState,
    CycleConfig,
    FirstFitPlacer,
    GangIncomplete,
    schedule_cycle,
)
from suanli.scheduling.domain.queueing.testing import job, node, pending, queue, running

QUEUES = (queue("q", gpu_A100=64_000),)


def test_a_gang_that_only_partly_fits_is_not_admitted_and_holds_nothing() -> None:
    state = ClusterState(
        (node("n1", gpus=2), node("n2", gpus=2)),
        QUEUES,
        pending=(
            pending(job("gang", gpus=2, tasks=3), 1),
            pending(job("after", gpus=2), 2),
        ),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert result.reason("gang") == GangIncomplete(placed=2, min_available=3, rejections=(("gpu", 2),))
    # The two tasks that did fit were discarded: their room goes to the next job.
    assert result.admitted == ("after",)
    assert result.reservations == ()  # the gang exceeds the cluster, so there is nothing to hold


def test_an_elastic_gang_is_admitted_at_min_available_with_every_task_that_fits() -> None:
    state = ClusterState(
        (node("n1", gpus=2), node("n2", gpus=1)),
        QUEUES,
        pending=(pending(job("elastic", gpus=1, tasks=4, min_available=2), 1),),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    (admission,) = result.admissions
    assert [p.node_id for p in admission.placements] == ["n1", "n1", "n2"]


def backfill_state() -> ClusterState:
    """n1: 4 GPUs, 2 busy. n2: 2 GPUs, idle. The head needs 4 GPUs on one node, so only n1 will do."""
    return ClusterState(
        (node("n1", gpus=4), node("n2", gpus=2)),
        QUEUES,
        (running(job("busy", gpus=2, preemptible=False), 1, ("n1", (0, 1))),),
        (
            pending(job("head", gpus=4, priority=10), 2),
            pending(job("small", gpus=1), 3),
            pending(job("delaying", gpus=2), 4),
        ),
    )


def test_backfill_runs_a_small_job_around_the_reservation_but_not_one_that_would_delay_the_head() -> None:
    result = schedule_cycle(backfill_state(), FirstFitPlacer())
    (reservation,) = result.reservations
    assert reservation.job_id == "head"
    assert {p.node_id for p in reservation.placements} == {"n1"}
    assert result.admitted == ("small",)
    assert result.admissions[0].placements[0].node_id == "n2"
    assert result.reason("delaying") == BlockedByHigherPriority(reserved_for=("head",), nodes=("n1",))


def test_without_backfill_reservations_the_free_room_is_first_come() -> None:
    result = schedule_cycle(backfill_state(), FirstFitPlacer(), CycleConfig(backfill=False))
    assert result.reservations == ()
    assert result.admitted == ("small", "delaying")
    # First fit puts the small job on the head's node: exactly what the reservation prevents.
    assert result.admissions[0].placements[0].node_id == "n1"


def test_a_preemptor_holds_its_planned_room_against_backfill() -> None:
    state = ClusterState(
        (node("n1", gpus=4),),
        QUEUES,
        (running(job("low", gpus=2), 1, ("n1", (0, 1))),),
        (pending(job("hi", gpus=4, priority=10), 2), pending(job("small", gpus=1), 3)),
    )
    result = schedule_cycle(state, FirstFitPlacer())
    assert [(p.preemptor, p.victims) for p in result.preemptions] == [("hi", ("low",))]
    assert result.admitted == ()
    assert result.reason("small") == BlockedByHigherPriority(reserved_for=("hi",), nodes=("n1",))
