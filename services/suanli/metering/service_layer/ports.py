"""What the use cases need from the outside: state by key, output sinks and gauges, all held per batch.

A `Batch` is one unit of work: the states it reads see its own earlier writes, and nothing it produced
is durable until ``commit``, which sends every output and awaits every acknowledgement before any state
is written (the adapters in `suanli.metering.adapters.batch` keep that order).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, TypeVar

from suanli.metering.domain import (
    MeteredTask,
    NodeCapacity,
    NodeState,
    StatusChange,
    Summary,
    TaskFact,
    UsageWindow,
)

S = TypeVar("S")


class States(Protocol[S]):
    """States by key (node id, task id), as the batch sees them."""

    def get(self, key: str) -> S | None: ...

    def put(self, key: str, state: S, *, lasting: bool = True) -> None:
        """The key's next state. ``lasting=False``: it differs from the last one only in what the next
        input brings again (a node's stamps, a task's evidence); it is written durably at the key's next
        lasting put or once a checkpoint interval has passed, and a restart may see an older state."""
        ...

    def delete(self, key: str) -> None:
        """Drop the key's state (when the batch commits)."""
        ...

    def keys(self) -> Iterable[str]: ...


class Outputs(Protocol):
    """What metering emits; each call adds one output to the batch, in order."""

    def capacity_changed(
        self, capacity: NodeCapacity, *, source_event_id: str, occurred_at_ms: int
    ) -> None: ...

    def status_changed(self, change: StatusChange) -> None: ...

    def usage_metered(self, window: UsageWindow) -> None: ...

    def task_facts(self, facts: Iterable[TaskFact]) -> None:
        """Facts for the task side, re-keyed by task id so one owner sees all of a task's facts."""
        ...


class Batch(Protocol):
    @property
    def nodes(self) -> States[NodeState]: ...

    @property
    def tasks(self) -> States[MeteredTask]: ...

    @property
    def outputs(self) -> Outputs: ...

    async def commit(self) -> None:
        """Make the outputs durable, then the states; raises (and writes no state) if an output fails."""
        ...


class Gauges(Protocol):
    def observe(self, summary: Summary) -> None: ...


class TaskCounters(Protocol):
    """Counts of the task table's housekeeping: records pruned, late facts refused."""

    def pruned(self, rows: int) -> None: ...

    def late_fact(self, kind: str) -> None: ...
