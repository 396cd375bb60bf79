"""Typed failures of the event store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID


class EventStoreError(Exception):
    """Base of every error the event store raises on purpose."""


class ConcurrencyConflict(EventStoreError):
    """The stream moved on since the caller read it: reload, decide again, retry."""

    def __init__(self, stream: str, expected: int, actual: int) -> None:
        super().__init__(f"stream {stream!r}: expected version {expected}, actual {actual}")
        self.stream = stream
        self.expected = expected
        self.actual = actual


class DuplicateEventId(EventStoreError):
    """An event id was already recorded (or repeated in one append): ids are unique across all streams."""

    def __init__(self, event_ids: Sequence[UUID]) -> None:
        super().__init__(f"duplicate event id(s): {', '.join(map(str, event_ids))}")
        self.event_ids = tuple(event_ids)


class AlreadyProcessed(EventStoreError):
    """This (group, topic, partition, offset) was applied before: the redelivery must be a no-op."""

    def __init__(self, group: str, topic: str, partition: int, offset: int) -> None:
        super().__init__(f"{group} already applied {topic}[{partition}]@{offset}")
        self.group = group
        self.topic = topic
        self.partition = partition
        self.offset = offset


class PublishFailed(EventStoreError):
    """Some rows of a batch were not acknowledged, the others were (an `OutboxSink` raises it).

    ``failures`` maps each failed row id to its error.
    """

    def __init__(self, failures: Mapping[int, BaseException]) -> None:
        first = min(failures)
        super().__init__(f"{len(failures)} outbox row(s) not published, first {first}: {failures[first]!r}")
        self.failures = dict(failures)


class RecordRefused(EventStoreError):
    """The broker (or the producer, against the same limits) refused a row as a record.

    Too large, malformed, an invalid topic name: no retry can deliver it, so the relay parks it at once.
    """
