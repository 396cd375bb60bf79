"""OutboxSink over suanli.bus.EventPublisher: the relay publishes through the one shared producer wrapper."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.bus.publisher import EventPublisher, OutgoingRecord, ProducerSettings
from suanli.eventstore.values import OutboxRecord

# The relay hands the producer a whole batch of rows at once (appended in one go, so they still share
# Kafka batches per partition): lingering for more records only delays the placements it carries.
RELAY_PRODUCER = ProducerSettings(linger_ms=0, client_id="suanli-outbox-relay")


class KafkaOutboxSink:
    """The relay's sink in production: outbox rows published to Kafka through an `EventPublisher`."""

    def __init__(self, publisher: EventPublisher) -> None:
        self._publisher = publisher

    async def publish_batch(self, records: Sequence[OutboxRecord]) -> None:
        """Publish ``records`` in order per key; return once every one is acknowledged."""
        # publish_many keeps input order per key and returns only after every record is acknowledged,
        # and raises only once nothing is still in flight, so the relay may retry the whole batch.
        await self._publisher.publish_many(
            OutgoingRecord(r.topic, r.key, r.value, r.headers) for r in records
        )
