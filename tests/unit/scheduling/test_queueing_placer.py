"""The reference placer: first fit over nodes, best fit over devices, exact device accounting."""

from __future__ import annotations

from suanli.scheduling.domain.queueing import FirstFitPlacer, GangPlacement, NodeAvailability, NoFit
from suanli.scheduling.domain.queueing.testing import job, node


def free(node_id: str, gpu_milli: tuple[int, ...], cpu: int = 64_000) -> NodeAvailability:
    return NodeAvailability(node(node_id, gpus=len(gpu_milli)), cpu, 256_000, gpu_milli)


def placed(outcome: GangPlacement | NoFit) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    assert isinstance(outcome, GangPlacement)
    return [(p.node_id, p.gpu_indices, p.gpu_milli) for p in outcome.placements]


def test_shared_tasks_pack_onto_the_fullest_device_that_fits() -> None:
    outcome = FirstFitPlacer().place_gang((free("n", (1000, 400, 700)),), job("j", milli=300, tasks=3))
    assert placed(outcome) == [("n", (1,), (300,)), ("n", (2,), (300,)), ("n", (2,), (300,))]


def test_whole_gpus_are_distinct_devices_and_tasks_of_a_gang_do_not_double_book() -> None:
    outcome = FirstFitPlacer().place_gang(
        (free("a", (1000, 500, 1000)), free("b", (1000, 1000))), job("j", gpus=2, tasks=2)
    )
    assert placed(outcome) == [("a", (0, 2), (1000, 1000)), ("b", (0, 1), (1000, 1000))]


def test_a_device_with_room_above_1000_takes_shared_work_beyond_one_gpu() -> None:
    outcome = FirstFitPlacer().place_gang((free("n", (1500,)),), job("j", milli=600, tasks=2))
    assert placed(outcome) == [("n", (0,), (600,)), ("n", (0,), (600,))]


def test_no_fit_reports_what_was_placed_and_which_filter_rejected_each_node() -> None:
    outcome = FirstFitPlacer().place_gang(
        (free("a", (1000,)), free("b", (1000, 1000), cpu=0)), job("j", gpus=1, tasks=3)
    )
    assert outcome == NoFit(placed=1, required=3, rejections=(("cpu", 1), ("gpu", 1)))
