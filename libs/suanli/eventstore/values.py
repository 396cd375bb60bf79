"""Values that cross the event store's ports: events to append, stored events, outbox messages and rows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType
from typing import Any
from uuid import UUID

Headers = tuple[tuple[str, bytes], ...]

# The same names suanli.bus writes, so consumers de-duplicate relayed and directly published records alike.
EVENT_ID_HEADER = "event-id"
EVENT_NAME_HEADER = "event-name"


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    # A read-only view keeps a frozen dataclass honest: nobody can mutate a recorded event's metadata.
    return MappingProxyType(dict(value))


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event about to be appended. `payload` is the encoded event (suanli.contracts bytes)."""

    event_id: UUID
    event_name: str
    payload: bytes
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen_mapping(self.metadata))


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as recorded: `version` counts within its stream from 1, `position` orders all streams."""

    stream: str
    version: int
    position: int
    event_id: UUID
    event_name: str
    payload: bytes
    recorded_at: datetime
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _frozen_mapping(self.metadata))


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A Kafka record to publish once the transaction that wrote it commits.

    ``traceparent``: the trace the record continues. None takes the span active when the row is appended
    (the command's), which is right unless the row is written on behalf of another trace (a batch).
    """

    topic: str
    key: bytes | None
    event_name: str
    value: bytes
    headers: Headers = ()
    traceparent: str | None = None

    @classmethod
    def for_event(
        cls,
        topic: str,
        key: bytes | None,
        event: NewEvent,
        headers: Headers = (),
        *,
        traceparent: str | None = None,
    ) -> OutboxMessage:
        """The usual case: publish an appended event, with its id and name in headers for consumers."""
        return cls(
            traceparent=traceparent,
            topic=topic,
            key=key,
            event_name=event.event_name,
            value=event.payload,
            headers=(
                (EVENT_ID_HEADER, str(event.event_id).encode()),
                (EVENT_NAME_HEADER, event.event_name.encode()),
                *headers,
            ),
        )


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    """An outbox row: `id` is its place in the single publishing order."""

    id: int
    topic: str
    key: bytes | None
    event_name: str
    value: bytes
    headers: Headers
    created_at: datetime
    # Failed publishing attempts counted so far (see `suanli.eventstore.parking`).
    attempts: int = 0
    # The W3C trace context stored with the row; the relay sends it as the record's header.
    traceparent: str | None = None


@dataclass(frozen=True, slots=True)
class RowFailure:
    """A failed attempt to publish one outbox row: counted, and with ``park`` the row is set aside."""

    id: int
    error: str
    park: bool


@dataclass(frozen=True, slots=True)
class ParkedRow:
    """An outbox row the relay set aside because the broker refused it for good."""

    id: int
    topic: str
    key: bytes | None
    event_name: str
    size: int
    attempts: int
    reason: str
    created_at: datetime
    parked_at: datetime


@dataclass(frozen=True, slots=True)
class StreamAppend:
    """One stream's part of `Transaction.append_many`: what `append` takes, as a value."""

    stream: str
    expected_version: int
    events: Sequence[NewEvent]
    outbox: Sequence[OutboxMessage] = ()


@dataclass(frozen=True, slots=True)
class ClaimedRecord:
    """A consumed record as `TrackingBatch.claim_many` claims it: where it was read, and its event id."""

    topic: str
    partition: int
    offset: int
    event_id: str | None = None
