"""The task table: what runs on this node, as a small state machine that returns what happened.

    admit ──> ADMITTED ──started──> RUNNING ──exited──> (gone) => TaskFinished(exit code)
                 │                     │
                 │ launch_failed       └──stop──> STOPPING ──exited──> (gone) => TaskFailed(KILLED)
                 └──────────────────────────────────────────────────> (gone) => TaskFailed(ERROR)

Admission is the agent's own last check (like a kubelet's): the devices must exist and a device's shares
must not exceed 1000 milli. A rejected placement is reported as TaskFailed, so the scheduler hears of it.
Placements are delivered at least once; a repeat of a known or recently ended (task, attempt) is ignored.
Pure: times are passed in, nothing here touches processes.
"""

from __future__ import annotations

import datetime as dt
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from suanli.sensing.domain.placement import ANY_ATTEMPT, MILLI, Placement


class RunState(StrEnum):
    """Where a task stands on this node, as the agent runs it (not the scheduler's view of the task)."""

    ADMITTED = "admitted"
    RUNNING = "running"
    STOPPING = "stopping"


class FailureKind(StrEnum):
    """Mirrors the `FailureKind` enum of the TaskFailed contract."""

    ERROR = "ERROR"
    KILLED = "KILLED"
    OOM = "OOM"
    DEVICE_ERROR = "DEVICE_ERROR"


@dataclass(slots=True)
class TaskRun:
    placement: Placement
    state: RunState = RunState.ADMITTED
    pid: int | None = None
    started_at: dt.datetime | None = None
    stop_reason: str | None = None

    @property
    def task_id(self) -> str:
        return self.placement.task_id


# What the table reports; the service layer turns these into contract records.
@dataclass(frozen=True, slots=True)
class TaskStarted:
    placement: Placement
    pid: int | None


@dataclass(frozen=True, slots=True)
class TaskFinished:
    placement: Placement
    exit_code: int


@dataclass(frozen=True, slots=True)
class TaskFailed:
    placement: Placement
    kind: FailureKind
    reason: str
    exit_code: int | None = None


TaskEvent = TaskStarted | TaskFinished | TaskFailed


@dataclass(frozen=True, slots=True)
class Admission:
    """Outcome of `TaskTable.admit`: ``run`` to launch, or ``event`` to report, or neither (a repeat)."""

    run: TaskRun | None = None
    event: TaskFailed | None = None

    @property
    def duplicate(self) -> bool:
        return self.run is None and self.event is None


@dataclass(slots=True)
class TaskTable:
    device_indices: frozenset[int] = frozenset()
    # How many ended (task, attempt) pairs to remember for de-duplicating redelivered placements.
    memory: int = 10_000
    _runs: dict[str, TaskRun] = field(default_factory=dict)
    _ended: OrderedDict[tuple[str, int], None] = field(default_factory=OrderedDict)

    def admit(self, placement: Placement) -> Admission:
        key = (placement.task_id, placement.attempt)
        current = self._runs.get(placement.task_id)
        if key in self._ended or (current is not None and current.placement.attempt == placement.attempt):
            return Admission()
        reason = self._refusal(placement, current)
        if reason is not None:
            self._remember(key)
            return Admission(event=TaskFailed(placement, FailureKind.ERROR, reason))
        run = TaskRun(placement)
        self._runs[placement.task_id] = run
        return Admission(run=run)

    def _refusal(self, placement: Placement, current: TaskRun | None) -> str | None:
        if current is not None:
            return f"task already runs here as attempt {current.placement.attempt}"
        missing = sorted(set(placement.device_indices) - self.device_indices)
        if missing:
            return f"no device {missing} on this node (has {sorted(self.device_indices)})"
        used = self.milli_by_device()
        for share in placement.devices:
            if used.get(share.index, 0) + share.milli > MILLI:
                return (
                    f"device {share.index} over-committed: {used.get(share.index, 0)} milli in use, "
                    f"{share.milli} asked"
                )
        return None

    def blocking(self, placement: Placement) -> list[TaskRun]:
        """Runs that stand in the way of ``placement``: an older attempt of the same task, or tasks whose
        shares would push one of its devices past 1000 milli. The scheduler books devices from its own
        record and never past 1000, so whatever blocks a placement is something it no longer expects here
        (say a node it took for lost while only the broker was away): the agent stops those to admit it.
        Nothing blocks a repeat, a stale (older) attempt, or a placement on devices that do not exist."""
        current = self._runs.get(placement.task_id)
        key = (placement.task_id, placement.attempt)
        if key in self._ended or (current is not None and current.placement.attempt >= placement.attempt):
            return []
        if set(placement.device_indices) - self.device_indices:
            return []
        out = [current] if current is not None else []
        used = self.milli_by_device()
        for share in placement.devices:
            if used.get(share.index, 0) + share.milli > MILLI:
                out += [
                    r
                    for r in self._runs.values()
                    if r not in out and share.index in r.placement.device_indices
                ]
        return out

    def started(self, task_id: str, pid: int | None, at: dt.datetime) -> TaskStarted | None:
        run = self._runs.get(task_id)
        if run is None or run.started_at is not None:
            return None
        # A stop may have arrived while the launch was in flight: it stays STOPPING, but it did start.
        if run.state is RunState.ADMITTED:
            run.state = RunState.RUNNING
        run.pid, run.started_at = pid, at
        return TaskStarted(run.placement, pid)

    def launch_failed(self, task_id: str, reason: str) -> TaskFailed | None:
        run = self._end(task_id)
        if run is None:
            return None
        return TaskFailed(run.placement, FailureKind.ERROR, f"could not start: {reason}")

    def request_stop(self, task_id: str, attempt: int, reason: str) -> TaskRun | None:
        """Mark a live task as stopping; None when there is nothing (or another attempt) to stop.

        ``attempt`` 0 (ANY_ATTEMPT) stops whatever attempt runs. A stop for a specific attempt that is not
        here (yet) is remembered, so a placement of that attempt delivered later is not started.
        """
        run = self._runs.get(task_id)
        if run is None or (attempt != ANY_ATTEMPT and run.placement.attempt != attempt):
            if attempt != ANY_ATTEMPT and (run is None or run.placement.attempt < attempt):
                self._remember((task_id, attempt))
            return None
        if run.state is RunState.STOPPING:
            return None
        run.state, run.stop_reason = RunState.STOPPING, reason
        return run

    def exited(self, task_id: str, exit_code: int) -> TaskFinished | TaskFailed | None:
        run = self._end(task_id)
        if run is None:
            return None
        if run.stop_reason is not None:
            return TaskFailed(run.placement, FailureKind.KILLED, run.stop_reason, exit_code)
        return TaskFinished(run.placement, exit_code)

    def _end(self, task_id: str) -> TaskRun | None:
        run = self._runs.pop(task_id, None)
        if run is not None:
            self._remember((task_id, run.placement.attempt))
        return run

    def _remember(self, key: tuple[str, int]) -> None:
        self._ended[key] = None
        while len(self._ended) > self.memory:
            self._ended.popitem(last=False)

    def get(self, task_id: str) -> TaskRun | None:
        return self._runs.get(task_id)

    def runs(self) -> tuple[TaskRun, ...]:
        return tuple(self._runs.values())

    def task_ids(self) -> list[str]:
        """Every task the node holds resources for (admitted, running or stopping), sorted."""
        return sorted(self._runs)

    def running(self) -> Iterable[TaskRun]:
        return (run for run in self._runs.values() if run.state is not RunState.ADMITTED)

    def milli_by_device(self) -> dict[int, int]:
        used: dict[int, int] = {}
        for run in self._runs.values():
            for share in run.placement.devices:
                used[share.index] = used.get(share.index, 0) + share.milli
        return used
