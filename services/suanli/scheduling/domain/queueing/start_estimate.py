"""Queue position and estimated start of waiting jobs, like `squeue --start`: pure, over a snapshot.

The queue's waiting jobs are taken in the order the cycle takes them (higher priority first, then
submission order: `admission_rank`). The estimate replays that order over the schedulable nodes: the
room free on each now, plus what each active task gives back there at its expected end (its start plus
the duration its spec declares). A job starts, in the replay, at the first moment its whole gang fits,
each task on one node it may run on (first fit, largest task first), and not before the job ahead of
it; it then holds that room for its own declared duration. Where the answer rests on a task that
declares no duration, or on room that never comes free, the estimate is unknown and says why.

What it leaves out, on purpose, is written in docs/api.md ("Queue position and estimated start"):
how a node's GPUs are split between devices, other queues' waiting jobs, preemption, and quota (a job
waiting on quota gets no capacity estimate; its pending reason says what it waits for).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

# Pending reasons that wait on capacity: for the others (quota, admission, network, ...) a capacity
# replay would give an answer that does not hold.
CAPACITY_REASONS = frozenset(
    {"", "NO_NODE_FITS", "GANG_INCOMPLETE", "WAITING_FOR_PREEMPTION", "BLOCKED_BY_HIGHER_PRIORITY"}
)
# Reasons that say the room free now does not fit the job: a replay that starts it now is contradicted.
NOT_NOW_REASONS = frozenset({"NO_NODE_FITS", "GANG_INCOMPLETE"})


@dataclass(frozen=True, slots=True)
class Room:
    """CPU, memory and GPU milli (of one node, or what a task asks or holds)."""

    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_milli: int = 0

    def fits(self, other: Room) -> bool:
        return (
            other.cpu_milli <= self.cpu_milli
            and other.memory_mib <= self.memory_mib
            and other.gpu_milli <= self.gpu_milli
        )

    def __add__(self, other: Room) -> Room:
        return Room(
            self.cpu_milli + other.cpu_milli,
            self.memory_mib + other.memory_mib,
            self.gpu_milli + other.gpu_milli,
        )

    def __sub__(self, other: Room) -> Room:
        return Room(
            self.cpu_milli - other.cpu_milli,
            self.memory_mib - other.memory_mib,
            self.gpu_milli - other.gpu_milli,
        )


@dataclass(frozen=True, slots=True)
class Held:
    """Room an active task holds on ``node_id`` until ``ends_at`` (None: it declares no duration)."""

    node_id: str
    room: Room
    ends_at: datetime | None


@dataclass(frozen=True, slots=True)
class TaskDemand:
    """One task of a waiting job: what it asks, and the nodes it may run on (its selector, regions and
    GPU models already applied)."""

    room: Room
    nodes: tuple[str, ...]  # in the order first fit tries them


@dataclass(frozen=True, slots=True)
class Waiting:
    """A waiting job as the estimate sees it: its gang and how long it runs."""

    job_id: str
    priority: int
    seq: int
    tasks: tuple[TaskDemand, ...]
    duration_s: float | None = None  # None: a task declares none
    reason: str = ""  # its pending reason code ("" while the cycle has not looked at it)


@dataclass(frozen=True, slots=True)
class StartEstimate:
    """Where a waiting job stands: ``position`` of ``waiting`` (from 1), and when it may start."""

    job_id: str
    position: int
    waiting: int
    start_at: datetime | None
    note: str = ""  # why start_at is unknown


def admission_rank(job: Waiting) -> tuple[int, int, str]:
    """The order the cycle takes a queue's waiting jobs in: priority (higher first), then submission."""
    return (-job.priority, job.seq, job.job_id)


def _size(task: TaskDemand) -> tuple[int, int, int]:
    return (task.room.gpu_milli, task.room.cpu_milli, task.room.memory_mib)


def _first_fit(free: Mapping[str, Room], tasks: Sequence[TaskDemand]) -> list[tuple[str, Room]] | None:
    """A node for each task (largest first, the first of its nodes with room), or None."""
    taken: dict[str, Room] = {}  # what earlier tasks of the gang took, per node
    placed = []
    for task in sorted(tasks, key=_size, reverse=True):
        node = next((n for n in task.nodes if _room_left(free, taken, n).fits(task.room)), None)
        if node is None:
            return None
        taken[node] = taken.get(node, Room()) + task.room
        placed.append((node, task.room))
    return placed


def _room_left(free: Mapping[str, Room], taken: Mapping[str, Room], node: str) -> Room:
    room = free.get(node)
    if room is None:
        return Room(-1, -1, -1)  # not in the pool: fits nothing
    held = taken.get(node)
    return room if held is None else room - held


class _Pool:
    """Free room per node, and the releases still to come in time order."""

    def __init__(self, nodes: Mapping[str, Room], held: Iterable[Held]) -> None:
        self.free = dict(nodes)
        self._releases: list[tuple[datetime, int, Held]] = []
        self._order = 0
        self.never_freed = False  # some room is held by a task without a declared duration
        for h in held:
            self.take(h)

    def take(self, h: Held) -> None:
        if h.node_id not in self.free:
            return  # a node out of the pool: its room is not the pool's
        self.free[h.node_id] = self.free[h.node_id] - h.room
        if h.ends_at is None:
            self.never_freed = True
        else:
            self._order += 1
            heapq.heappush(self._releases, (h.ends_at, self._order, h))

    def release_until(self, at: datetime) -> None:
        while self._releases and self._releases[0][0] <= at:
            h = heapq.heappop(self._releases)[2]
            self.free[h.node_id] = self.free[h.node_id] + h.room

    def next_release(self) -> datetime | None:
        return self._releases[0][0] if self._releases else None


def estimate_starts(
    queue: Sequence[Waiting], nodes: Mapping[str, Room], held: Iterable[Held], now: datetime
) -> dict[str, StartEstimate]:
    """Position and estimated start of each waiting job of one queue (module docstring: the model).

    ``nodes``: each schedulable node's allocatable room; ``held``: what active tasks hold on them.
    """
    order = sorted(queue, key=admission_rank)
    pool = _Pool(nodes, held)
    out: dict[str, StartEstimate] = {}
    earliest = now
    blocked = ""  # once a job ahead has no estimate, none behind it has one either (no overtaking)
    for position, job in enumerate(order, start=1):
        start, note = (None, blocked) if blocked else _replay(job, pool, nodes, earliest, now)
        out[job.job_id] = StartEstimate(job.job_id, position, len(order), start, note)
        if start is None:
            blocked = blocked or f"behind job {job.job_id}, whose start is unknown ({note})"
        else:
            earliest = start
    return out


def _replay(
    job: Waiting, pool: _Pool, nodes: Mapping[str, Room], earliest: datetime, now: datetime
) -> tuple[datetime | None, str]:
    """When ``job`` starts in the replay (taking its room from then on), or why that is unknown."""
    if job.reason not in CAPACITY_REASONS:
        return None, f"waits on {job.reason}, not on capacity"
    if _first_fit(nodes, job.tasks) is None:
        return None, "no nodes it may run on hold its gang, even empty"
    at = earliest
    pool.release_until(at)
    placed = _first_fit(pool.free, job.tasks)
    while placed is None:
        release = pool.next_release()
        if release is None:
            why = "tasks that declare no duration_s" if pool.never_freed else "nothing that comes free"
            return None, f"its room is held by {why}"
        at = max(at, release)
        pool.release_until(at)
        placed = _first_fit(pool.free, job.tasks)
    if at <= now and job.reason in NOT_NOW_REASONS:
        return None, f"room looks free now, yet the cycle found none that fits ({job.reason})"
    ends = None if job.duration_s is None else at + timedelta(seconds=job.duration_s)
    for node, room in placed:
        pool.take(Held(node, room, ends))
    return at, ""
