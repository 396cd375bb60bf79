"""Queue position and estimated start of waiting jobs, like `squeue --start`: pure, over a snapshot.

The queue's waiting jobs are taken in the order the cycle takes them (higher priority first, then
submission order: `admission_rank`). The estimate replays that order over the pooled capacity of the
schedulable nodes: what is free now, plus what each active task gives back at its expected end (its
start plus the duration its spec declares). A job starts, in the replay, at the first moment the pool
holds its whole gang and not before the job ahead of it; it then holds that room for its own declared
duration. Where the answer rests on a task that declares no duration, or on capacity that never comes
free, the estimate is unknown and says why.

What it leaves out, on purpose, is written in docs/queues.md: fragmentation across nodes, other queues'
waiting jobs, preemption, and quota (a job waiting on quota gets no capacity estimate; its pending reason
says what it waits for).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# Pending reasons that wait on capacity: for the others (quota, admission, network, ...) a capacity
# replay would give an answer that does not hold.
CAPACITY_REASONS = frozenset(
    {"", "NO_NODE_FITS", "GANG_INCOMPLETE", "WAITING_FOR_PREEMPTION", "BLOCKED_BY_HIGHER_PRIORITY"}
)


@dataclass(frozen=True, slots=True)
class Room:
    """An amount of the pool: CPU, memory and GPU milli per model."""

    cpu_milli: int = 0
    memory_mib: int = 0
    gpu_milli: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Held:
    """Room an active task holds, on a node with GPU ``model`` (empty: no GPU), until ``ends_at``
    (None: it declares no duration)."""

    cpu_milli: int
    memory_mib: int
    gpu_milli: int
    model: str
    ends_at: datetime | None


@dataclass(frozen=True, slots=True)
class Waiting:
    """A waiting job as the estimate sees it: its whole gang's demand and how long it runs."""

    job_id: str
    priority: int
    seq: int
    cpu_milli: int
    memory_mib: int
    gpu_milli: int
    gpu_models: frozenset[str] = frozenset()  # empty: any model
    duration_s: float | None = None  # None: a task declares none
    reason: str = ""  # its pending reason code ("" while the cycle has not looked at it)


@dataclass(frozen=True, slots=True)
class StartEstimate:
    """Where a waiting job stands: ``position`` of ``waiting`` (from 1), and when it may start."""

    job_id: str
    position: int
    waiting: int
    start_at: datetime | None
    note: str = ""  # why start_at is unknown, or what it assumes


def admission_rank(job: Waiting) -> tuple[int, int, str]:
    """The order the cycle takes a queue's waiting jobs in: priority (higher first), then submission."""
    return (-job.priority, job.seq, job.job_id)


class _Pool:
    """Free room, and the releases still to come in time order."""

    def __init__(self, total: Room, held: Iterable[Held]) -> None:
        self.cpu = total.cpu_milli
        self.memory = total.memory_mib
        self.gpu = dict(total.gpu_milli)
        self._releases: list[tuple[datetime, int, Held]] = []
        self._order = 0
        self.never_freed = False  # some room is held by a task without a declared duration
        for h in held:
            self.take(h)

    def take(self, h: Held) -> None:
        self.cpu -= h.cpu_milli
        self.memory -= h.memory_mib
        if h.model:
            self.gpu[h.model] = self.gpu.get(h.model, 0) - h.gpu_milli
        if h.ends_at is None:
            self.never_freed = True
        else:
            self._order += 1
            heapq.heappush(self._releases, (h.ends_at, self._order, h))

    def release_until(self, at: datetime) -> None:
        while self._releases and self._releases[0][0] <= at:
            self._give_back(heapq.heappop(self._releases)[2])

    def next_release(self) -> datetime | None:
        return self._releases[0][0] if self._releases else None

    def _give_back(self, h: Held) -> None:
        self.cpu += h.cpu_milli
        self.memory += h.memory_mib
        if h.model:
            self.gpu[h.model] = self.gpu.get(h.model, 0) + h.gpu_milli

    def model_for(self, job: Waiting) -> str | None:
        """The GPU model the job's gang fits on now ("" for a job without GPUs); None: it does not fit."""
        if job.cpu_milli > self.cpu or job.memory_mib > self.memory:
            return None
        if job.gpu_milli == 0:
            return ""
        fits = [m for m, free in sorted(self.gpu.items()) if free >= job.gpu_milli and _allowed(job, m)]
        return fits[0] if fits else None


def _allowed(job: Waiting, model: str) -> bool:
    return not job.gpu_models or model in job.gpu_models


def _fits_at_all(job: Waiting, total: Room) -> bool:
    if job.cpu_milli > total.cpu_milli or job.memory_mib > total.memory_mib:
        return False
    return job.gpu_milli == 0 or any(
        t >= job.gpu_milli for m, t in total.gpu_milli.items() if _allowed(job, m)
    )


def estimate_starts(
    queue: Sequence[Waiting], total: Room, held: Iterable[Held], now: datetime
) -> dict[str, StartEstimate]:
    """Position and estimated start of each waiting job of one queue (module docstring: the model)."""
    order = sorted(queue, key=admission_rank)
    pool = _Pool(total, held)
    out: dict[str, StartEstimate] = {}
    earliest = now
    blocked = ""  # once a job ahead has no estimate, none behind it has one either (no overtaking)
    for position, job in enumerate(order, start=1):
        start, note = (None, blocked) if blocked else _replay(job, pool, total, earliest)
        out[job.job_id] = StartEstimate(job.job_id, position, len(order), start, note)
        if start is None:
            blocked = blocked or f"behind job {job.job_id}, whose start is unknown ({note})"
        else:
            earliest = start
    return out


def _replay(job: Waiting, pool: _Pool, total: Room, earliest: datetime) -> tuple[datetime | None, str]:
    """When ``job`` starts in the replay (and the room it takes from then on), or why that is unknown."""
    if job.reason not in CAPACITY_REASONS:
        return None, f"waits on {job.reason}, not on capacity"
    if not _fits_at_all(job, total):
        return None, "the schedulable nodes together never hold its gang"
    at = earliest
    pool.release_until(at)
    model = pool.model_for(job)
    while model is None:
        release = pool.next_release()
        if release is None:
            why = "tasks that declare no duration_s" if pool.never_freed else "nothing that comes free"
            return None, f"its room is held by {why}"
        at = max(at, release)
        pool.release_until(at)
        model = pool.model_for(job)
    ends = None if job.duration_s is None else at + timedelta(seconds=job.duration_s)
    pool.take(Held(job.cpu_milli, job.memory_mib, job.gpu_milli, model, ends))
    return at, ""
