"""The framework placer behind the queueing core's Placer seam."""

from __future__ import annotations

from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.domain.model import GpuDevice, Job, Node, Task, TaskRequest
from suanli.scheduling.domain.queueing import GangPlacement, NodeAvailability, NoFit


def _node(node_id: str, indices: tuple[int, ...] = (0, 1, 2, 3)) -> Node:
    return Node(node_id, 32000, 65536, tuple(GpuDevice(i, "A100") for i in indices))


def _job(n: int, gpu_milli: int = 1000, gang: int | None = None) -> Job:
    return Job(
        "j",
        "q",
        tuple(Task(f"t{i}", TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=gpu_milli)) for i in range(n)),
        min_available=gang,
    )


def _placer() -> FrameworkPlacer:
    return FrameworkPlacer.for_policy("fgdx", DEFAULT_TYPICAL)


def test_gang_all_or_nothing_with_rejections() -> None:
    room = (NodeAvailability(_node("n1"), 32000, 65536, (1000, 1000, 0, 1000)),)
    result = _placer().place_gang(room, _job(4))
    assert isinstance(result, NoFit) and result.placed == 3 and result.required == 4
    assert dict(result.rejections) == {"gpu-fit": 1}
    ok = _placer().place_gang(room, _job(3))
    assert isinstance(ok, GangPlacement) and {p.gpu_indices for p in ok.placements} == {(0,), (1,), (3,)}


def test_device_indices_survive_gaps_and_shares_respect_free_room() -> None:
    node = _node("n1", (1, 5))
    room = (NodeAvailability(node, 32000, 65536, (400, 1000)),)
    result = _placer().place_gang(room, _job(2, gpu_milli=300))
    assert isinstance(result, GangPlacement)
    used = {}
    for p in result.placements:
        assert p.gpu_indices[0] in (1, 5)
        used[p.gpu_indices[0]] = used.get(p.gpu_indices[0], 0) + p.gpu_milli[0]
    assert used.get(1, 0) <= 400 and used.get(5, 0) <= 1000


def test_elastic_tasks_past_the_gang_are_placed_when_they_fit() -> None:
    room = (NodeAvailability(_node("n1"), 32000, 65536, (1000, 1000, 0, 0)),)
    result = _placer().place_gang(room, _job(4, gang=1))
    assert isinstance(result, GangPlacement) and len(result.placements) == 2


def test_no_nodes_and_explain() -> None:
    assert _placer().place_gang((), _job(1)) == NoFit(0, 1, ())
    room = tuple(NodeAvailability(_node(f"n{i}"), 32000, 65536, (1000,) * 4) for i in range(3))
    scores, rejected = _placer().explain(room, TaskRequest(cpu_milli=1000, gpu_count=1, gpu_milli=500))
    assert len(scores) == 3 and rejected == () and all(s.plugin_scores for s in scores)
