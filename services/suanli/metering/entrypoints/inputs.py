"""What each input topic's records are, and which use case each of their events goes to.

A record decodes to its event name and contract record; an event the contracts catalogue does not place
on the topic is refused at decoding (dead-lettered like a record that does not decode). Events of a
topic that metering has no use for are skipped: they are not in the topic's routes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from suanli.contracts import catalogue, decode, events_on
from suanli.metering.adapters import records
from suanli.metering.adapters.batch import FACTS
from suanli.metering.domain import Started, TaskFact, newest_per_node
from suanli.metering.service_layer.batches import Intake
from suanli.metering.service_layer.metering import Metering
from suanli.metering.service_layer.ports import Batch
from suanli.telemetry.tracing import current_traceparent

# name, record, where it was read: the record's timestamp (ms) and partition (None when unknown)
Event = tuple[str, Mapping[str, Any], "Read"]
Route = Callable[[str, Mapping[str, Any], Batch, "Read"], None]
Consumed = Any  # a faust event: faust has no types


@dataclass(frozen=True, slots=True)
class Read:
    record_ms: int | None
    partition: int | None


class UnexpectedEventError(ValueError):
    """A well-formed event of a kind that does not belong on the topic it arrived on."""


def event_intake(
    topic: str,
    routes: Mapping[str, Route],
    select: Callable[[Sequence[Event]], Sequence[int]] | None = None,
) -> Intake[Consumed, Event]:
    belongs = frozenset(events_on(topic))

    def decode_event(consumed: Consumed) -> Event:
        name, record = decode(consumed.value)
        if name not in belongs:
            raise UnexpectedEventError(f"{name} does not belong on {topic}")
        return name, record, _read(consumed)

    def apply(event: Event, batch: Batch) -> None:
        name, record, read = event
        route = routes.get(name)
        if route is not None:
            route(name, record, batch, read)

    return Intake(decode_event, apply, select)


def newest_snapshots(events: Sequence[Event]) -> list[int]:
    """Of a batch of node.snapshots events, each node's newest snapshot and every other event."""
    snapshots = [i for i, (name, _, _) in enumerate(events) if name == "NodeSnapshot"]
    newest = [snapshots[j] for j in newest_per_node([events[i][1] for i in snapshots])]
    others = [i for i, (name, _, _) in enumerate(events) if name != "NodeSnapshot"]
    return sorted(newest + others)


def event_intakes(metering: Metering) -> dict[str, Intake[Consumed, Event]]:
    """Per catalogue topic name, how its records are handled."""

    def snapshot(name: str, record: Mapping[str, Any], batch: Batch, read: Read) -> None:
        metering.apply_snapshot(record, batch, read.record_ms, read.partition)

    def placed(name: str, record: Mapping[str, Any], batch: Batch, read: Read) -> None:
        metering.apply_placement(records.allocation_of(record), batch)
        # Each placement names who pays, so a task stays chargeable when its JobSubmitted is not at hand
        # (dead-lettered, or the worker's task state was rebuilt without it).
        metering.forward_facts(records.payer_of(record), batch)

    def preempted(name: str, record: Mapping[str, Any], batch: Batch, read: Read) -> None:
        metering.apply_preemption(record["node_id"], records.preempted_fact(record), batch)

    def lifecycle(name: str, record: Mapping[str, Any], batch: Batch, read: Read) -> None:
        fact = records.lifecycle_fact(name, record)
        if isinstance(fact, Started):
            # The span metering reads the TaskStarted in (of its trace: the job's); every usage window of
            # the attempt is published in it, whichever later fact closes the window.
            fact = replace(fact, trace_context=current_traceparent() or "")
        if fact is not None:
            metering.forward_facts([fact], batch)

    def sampled(name: str, record: Mapping[str, Any], batch: Batch, read: Read) -> None:
        # Applied here, not forwarded: usage.samples is keyed by task id over as many partitions as the
        # task-facts topic, so this worker owns the task's record, and a sample's effect does not depend
        # on its order among the task's other facts (`domain.tasks.apply`).
        metering.apply_fact(records.sample_fact(record), batch)

    def submitted(name: str, record: Mapping[str, Any], batch: Batch, read: Read) -> None:
        metering.forward_facts(records.job_facts(record), batch)

    return {
        # NodeRegistered is identity only; the next snapshot carries everything views need.
        # Full-state snapshots: of several of one node read together, only the newest matters.
        catalogue.NODE_SNAPSHOTS: event_intake(
            catalogue.NODE_SNAPSHOTS, {"NodeSnapshot": snapshot}, newest_snapshots
        ),
        # Stop requests change no charge: the task is metered until its agent reports it ended.
        catalogue.PLACEMENTS: event_intake(
            catalogue.PLACEMENTS, {"TaskPlaced": placed, "TaskPreempted": preempted}
        ),
        catalogue.TASKS_LIFECYCLE: event_intake(
            catalogue.TASKS_LIFECYCLE,
            {"TaskStarted": lifecycle, "TaskFinished": lifecycle, "TaskFailed": lifecycle},
        ),
        catalogue.USAGE_SAMPLES: event_intake(catalogue.USAGE_SAMPLES, {"UsageSampled": sampled}),
        # Other job events change nothing metering charges: tasks report their own ends.
        catalogue.JOBS_EVENTS: event_intake(catalogue.JOBS_EVENTS, {"JobSubmitted": submitted}),
    }


def _read(consumed: Consumed) -> Read:
    """The record's Kafka timestamp in ms (faust gives seconds) and partition, each None when unknown."""
    message = getattr(consumed, "message", None)
    stamp = getattr(message, "timestamp", None)
    partition = getattr(message, "partition", None)
    return Read(
        round(stamp * 1000) if isinstance(stamp, int | float) and stamp > 0 else None,
        partition if isinstance(partition, int) else None,
    )


def fact_intake(metering: Metering) -> Intake[Consumed, TaskFact]:
    """The internal task-facts topic: one fact per record, applied by the task's owner."""

    def decode_fact(consumed: Consumed) -> TaskFact:
        fact: TaskFact = FACTS.loads(consumed.value)
        return fact

    return Intake(decode_fact, metering.apply_fact)
