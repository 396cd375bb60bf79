"""The event bus: topic catalogue, publisher and consumer over Kafka (standard Kafka, tested on Tansu).

See docs/bus.md for delivery semantics, dead-letter topics and broker caveats.
"""

from __future__ import annotations

from suanli.bus import topics
from suanli.bus.admin import (
    TOPIC_REPLICATION_ENV,
    EnsureResult,
    TopicCreationError,
    ensure_topics,
    resolve_replication_factor,
)
from suanli.bus.codec import AvroCodec, Codec, default_codec
from suanli.bus.consumer import (
    ConsumedEvent,
    ConsumerSettings,
    DeadLetterHook,
    EventConsumer,
    Handler,
    Prepare,
    run_consumer,
)
from suanli.bus.errors import BusClosedError, RetriableError, is_retriable
from suanli.bus.headers import EVENT_ID, EVENT_NAME
from suanli.bus.kept import KeptConsumer
from suanli.bus.publisher import EventPublisher, OutgoingRecord, ProducerSettings
from suanli.bus.retry import SERVICE_RETRY, RetryPolicy
from suanli.bus.topics import CATALOGUE, TopicSpec, dlq_topic, topic_name
from suanli.bus.watch import BrokerWatch

__all__ = [
    "CATALOGUE",
    "EVENT_ID",
    "EVENT_NAME",
    "SERVICE_RETRY",
    "TOPIC_REPLICATION_ENV",
    "AvroCodec",
    "BrokerWatch",
    "BusClosedError",
    "Codec",
    "ConsumedEvent",
    "ConsumerSettings",
    "DeadLetterHook",
    "EnsureResult",
    "EventConsumer",
    "EventPublisher",
    "Handler",
    "KeptConsumer",
    "OutgoingRecord",
    "Prepare",
    "ProducerSettings",
    "RetriableError",
    "RetryPolicy",
    "TopicCreationError",
    "TopicSpec",
    "default_codec",
    "dlq_topic",
    "ensure_topics",
    "is_retriable",
    "resolve_replication_factor",
    "run_consumer",
    "topic_name",
    "topics",
]
