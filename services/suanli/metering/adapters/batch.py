"""The `Batch` port over faust tables and topics: states read through the batch's own writes, outputs
collected as encoded records, and one `Effects` commit that sends them all before any table is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from suanli.bus.headers import EVENT_ID, EVENT_NAME
from suanli.contracts import encode
from suanli.metering.adapters import records
from suanli.metering.adapters.decoded import DecodedStates
from suanli.metering.adapters.effects import Effects, Table, Topic
from suanli.metering.adapters.jsoncodec import TaggedCodec
from suanli.metering.domain import (
    Ended,
    JobKnown,
    MeteredTask,
    NodeCapacity,
    NodeState,
    Placed,
    Sampled,
    Seen,
    Started,
    StatusChange,
    TaskFact,
    UsageWindow,
)
from suanli.telemetry import inject_headers
from suanli.telemetry.tracing import in_trace_of

S = TypeVar("S")

# The internal task-facts topic carries the core's facts as tagged JSON.
FACTS = TaggedCodec(JobKnown, Placed, Started, Ended, Seen, Sampled)
# The span in which task facts become usage windows (the task-facts agent's batch span has this name too).
WINDOW_SPAN = "metering.window"


class KeyedTable(Table, Protocol):
    def __iter__(self) -> Iterator[bytes]: ...


class TableStates(Generic[S]):
    """One table's states as a batch sees them (`ports.States`)."""

    def __init__(self, effects: Effects, table: KeyedTable, decoded: DecodedStates, cls: type[S]) -> None:
        self._effects = effects
        self._table = table
        self._decoded = decoded
        self._cls = cls

    def get(self, key: str) -> S | None:
        return self._decoded.read(self._effects, self._table, key.encode(), self._cls)

    def put(self, key: str, state: S, *, lasting: bool = True) -> None:
        self._decoded.write(self._effects, self._table, key.encode(), state, lasting=lasting)

    def delete(self, key: str) -> None:
        self._decoded.delete(self._effects, self._table, key.encode())

    def keys(self) -> Iterable[str]:
        return (key.decode() for key in self._table)


@dataclass(frozen=True, slots=True)
class OutputTopics:
    capacity: Topic
    status: Topic
    usage: Topic
    facts: Topic


# Takes a task fact the worker can apply itself (it owns the task's record): True when it did.
TakeFact = Callable[[TaskFact], bool]


class TopicOutputs:
    """Metering's outputs as contract records (`ports.Outputs`), keyed as the catalogue says.

    ``take``: facts it accepts are applied by this worker in the same batch instead of being sent to the
    task-facts topic and read back (see `entrypoints.app`); without it every fact is sent.
    """

    def __init__(self, effects: Effects, topics: OutputTopics, take: TakeFact | None = None) -> None:
        self._effects = effects
        self._topics = topics
        self._take = take

    def capacity_changed(self, capacity: NodeCapacity, *, source_event_id: str, occurred_at_ms: int) -> None:
        record = records.capacity_record(
            capacity, source_event_id=source_event_id, occurred_at_ms=occurred_at_ms
        )
        self._publish(self._topics.capacity, capacity.node_id, "NodeCapacityChanged", record)

    def status_changed(self, change: StatusChange) -> None:
        self._publish(self._topics.status, change.node_id, "NodeStatusChanged", records.status_record(change))

    def usage_metered(self, window: UsageWindow) -> None:
        # In the attempt's trace (its start's), also when a fact of another trace closed the window (a
        # later snapshot): then in a span of the attempt's trace linked to that fact's.
        with in_trace_of(window.trace_context, WINDOW_SPAN, {"task_id": window.charge.task_id}):
            record = records.usage_record(window)
            self._publish(self._topics.usage, window.charge.task_id, "UsageMetered", record)

    def task_facts(self, facts: Iterable[TaskFact]) -> None:
        for fact in facts:
            if self._take is not None and self._take(fact):
                continue
            # With the trace context, so the task-facts agent's window continues the input's trace.
            self._effects.send(self._topics.facts, fact.task_id.encode(), FACTS.dumps(fact), inject_headers())

    def _publish(self, topic: Topic, key: str, event_name: str, record: dict[str, Any]) -> None:
        value = encode(event_name, record)
        headers = inject_headers([(EVENT_NAME, event_name.encode()), (EVENT_ID, record["event_id"].encode())])
        self._effects.send(topic, key.encode(), value, headers)


# Applies a task fact in the given batch when this worker owns the task's record: True when it did.
LocalFacts = Callable[[TaskFact, "TableBatch"], bool]


class TableBatch:
    """One unit of work over the nodes and tasks tables (`ports.Batch`)."""

    def __init__(
        self,
        nodes: KeyedTable,
        tasks: KeyedTable,
        topics: OutputTopics,
        decoded: DecodedStates,
        prepare: Callable[[list[Table]], Awaitable[None]] | None = None,
        local: LocalFacts | None = None,
    ) -> None:
        self._effects = Effects(prepare)
        self._decoded = decoded
        self.nodes = TableStates(self._effects, nodes, decoded, NodeState)
        self.tasks = TableStates(self._effects, tasks, decoded, MeteredTask)
        take = (lambda fact: local(fact, self)) if local is not None else None
        self.outputs = TopicOutputs(self._effects, topics, take)

    async def commit(self) -> None:
        await self._effects.commit()
        self._decoded.committed(self._effects)


def batches_over(
    nodes: KeyedTable,
    tasks: KeyedTable,
    topics: OutputTopics,
    decoded: DecodedStates,
    prepare: Callable[[list[Table]], Awaitable[None]] | None = None,
    local: Callable[[], LocalFacts | None] | None = None,
) -> Callable[[], TableBatch]:
    """Opens a new batch over these tables each time it is called; ``local`` gives each batch what
    applies the task facts this worker owns (asked per batch: ownership moves with rebalances)."""
    return lambda: TableBatch(nodes, tasks, topics, decoded, prepare, local() if local is not None else None)
