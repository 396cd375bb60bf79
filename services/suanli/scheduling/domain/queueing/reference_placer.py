"""A deliberately simple Placer: first fit over nodes in the order given, best fit over devices.

It is the placer the queueing tests run against and the behaviour the real framework must match at the
seam (gang semantics, device accounting, rejection counts), not a placement policy to ship.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from suanli.scheduling.domain.model import Job, Node, TaskPlacement, TaskRequest
from suanli.scheduling.domain.queueing.placer import GangPlacement, NodeAvailability, NoFit


@dataclass(slots=True)
class _Room:
    node: Node
    cpu_milli: int
    memory_mib: int
    gpu_milli: list[int] = field(default_factory=list)


def _devices_for(request: TaskRequest, room: _Room) -> tuple[int, ...] | None:
    """Positions of the devices to use: the fullest devices that still fit, so shared tasks pack onto
    already-shared devices and whole devices stay whole."""
    fitting = sorted((free, pos) for pos, free in enumerate(room.gpu_milli) if free >= request.gpu_milli)
    if len(fitting) < request.gpu_count:
        return None
    return tuple(sorted(pos for _, pos in fitting[: request.gpu_count]))


_Filter = Callable[[TaskRequest, _Room], bool]

# Checked in this order; a node is charged to the first filter that rejects it.
_FILTERS: tuple[tuple[str, _Filter], ...] = (
    ("region", lambda r, room: not r.regions or room.node.region in r.regions),
    ("node_selector", lambda r, room: all(room.node.label(k) == v for k, v in r.node_selector)),
    (
        "gpu_model",
        lambda r, room: not (r.gpu_count and r.gpu_models) or room.node.gpu_model in r.gpu_models,
    ),
    ("cpu", lambda r, room: r.cpu_milli <= room.cpu_milli),
    ("memory", lambda r, room: r.memory_mib <= room.memory_mib),
    ("gpu", lambda r, room: r.gpu_count == 0 or _devices_for(r, room) is not None),
)


class FirstFitPlacer:
    def place_gang(self, nodes: tuple[NodeAvailability, ...], job: Job) -> GangPlacement | NoFit:
        rooms = [_Room(a.node, a.cpu_milli, a.memory_mib, list(a.gpu_milli)) for a in nodes]
        placements: list[TaskPlacement] = []
        first_rejections: Counter[str] | None = None
        for task in job.tasks:
            rejections: Counter[str] = Counter()
            room = next((room for room in rooms if self._fits(task.request, room, rejections)), None)
            if room is None:
                first_rejections = first_rejections if first_rejections is not None else rejections
                continue
            placements.append(self._take(task.id, task.request, room))
        if len(placements) >= job.gang_size:
            return GangPlacement(tuple(placements))
        return NoFit(len(placements), job.gang_size, tuple(sorted((first_rejections or Counter()).items())))

    @staticmethod
    def _fits(request: TaskRequest, room: _Room, rejections: Counter[str]) -> bool:
        for name, accepts in _FILTERS:
            if not accepts(request, room):
                rejections[name] += 1
                return False
        return True

    @staticmethod
    def _take(task_id: str, request: TaskRequest, room: _Room) -> TaskPlacement:
        room.cpu_milli -= request.cpu_milli
        room.memory_mib -= request.memory_mib
        positions = _devices_for(request, room) if request.gpu_count else ()
        assert positions is not None  # the gpu filter just accepted this room
        for pos in positions:
            room.gpu_milli[pos] -= request.gpu_milli
        return TaskPlacement(
            task_id=task_id,
            node_id=room.node.id,
            gpu_indices=tuple(room.node.gpus[pos].index for pos in positions),
            gpu_milli=tuple(request.gpu_milli for _ in positions),
        )
