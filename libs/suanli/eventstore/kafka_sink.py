"""OutboxSink over suanli.bus.EventPublisher: the relay publishes through the one shared producer wrapper."""

from __future__ import annotations

from collections.abc import Sequence

from aiokafka.errors import (
    CorruptRecordException,
    InvalidTopicError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)

from suanli.bus.publisher import EventPublisher, OutgoingRecord, ProducerSettings
from suanli.eventstore.errors import PublishFailed, RecordRefused
from suanli.eventstore.values import Headers, OutboxRecord
from suanli.telemetry.tracing import TRACEPARENT

# The relay hands the producer a whole batch of rows at once (appended in one go, so they still share
# Kafka batches per partition): lingering for more records only delays the placements it carries.
RELAY_PRODUCER = ProducerSettings(linger_ms=0, client_id="suanli-outbox-relay")

# Answers about the record itself, from the producer (over max_request_size) or the broker (over its
# message.max.bytes, malformed, a topic name it rejects): the same record gets the same answer however
# often it is sent.
REFUSED_RECORD_ERRORS: tuple[type[Exception], ...] = (
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
    CorruptRecordException,
    InvalidTopicError,
    TopicAuthorizationFailedError,
)


def with_traceparent(headers: Headers, traceparent: str | None) -> Headers:
    """The stored headers plus the row's trace context as the record's one ``traceparent`` header."""
    if traceparent is None:
        return headers
    kept = tuple((name, value) for name, value in headers if name != TRACEPARENT)
    return (*kept, (TRACEPARENT, traceparent.encode()))


class KafkaOutboxSink:
    """The relay's sink in production: outbox rows published to Kafka through an `EventPublisher`."""

    def __init__(self, publisher: EventPublisher) -> None:
        self._publisher = publisher

    async def publish_batch(self, records: Sequence[OutboxRecord]) -> None:
        """Publish ``records`` in order per key; return once every one is acknowledged.

        Otherwise raise `PublishFailed` naming the rows that were not, once nothing is in flight (so the
        relay may retry them); a row refused as a record fails with `RecordRefused`.
        """
        outcomes = await self._publisher.publish_each(
            OutgoingRecord(r.topic, r.key, r.value, with_traceparent(r.headers, r.traceparent))
            for r in records
        )
        failures: dict[int, BaseException] = {}
        for record, outcome in zip(records, outcomes, strict=True):
            if isinstance(outcome, REFUSED_RECORD_ERRORS):
                refused = RecordRefused(f"{record.topic}: {outcome}")
                refused.__cause__ = outcome
                failures[record.id] = refused
            elif isinstance(outcome, Exception):
                failures[record.id] = outcome
        if failures:
            raise PublishFailed(failures)
