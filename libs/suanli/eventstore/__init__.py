"""Event store, outbox and consumer tracking: PostgreSQL is the system of record (ARCHITECTURE.md §2.2).

Ports live in `ports`; adapters in `memory` and `postgres` (+ `pg_feed` for the relay); the relay in
`relay`, projection snapshots in `snapshots`, the pruning of published rows and processed-event records
in `pruning`, its Kafka sink in
`kafka_sink` (imported separately, so the store works without a broker client).
"""

from suanli.eventstore.errors import AlreadyProcessed, ConcurrencyConflict, DuplicateEventId, EventStoreError
from suanli.eventstore.memory import InMemoryEventStore, InMemoryOutboxFeed, RecordingOutboxSink
from suanli.eventstore.migrator import MigrationError, migrate
from suanli.eventstore.pg_feed import PostgresOutboxFeed
from suanli.eventstore.ports import (
    NO_STREAM,
    BatchTrackingStore,
    EventStore,
    OutboxFeed,
    OutboxLease,
    OutboxSink,
    ProcessedPruning,
    TrackingBatch,
    TrackingStore,
    Transaction,
)
from suanli.eventstore.postgres import DEFAULT_SCHEMA, PostgresEventStore
from suanli.eventstore.pruning import ProcessedEventsPruner, PruneMetrics, RetentionSettings
from suanli.eventstore.relay import OutboxRelay
from suanli.eventstore.snapshots import InMemorySnapshots, PostgresSnapshots, Snapshot, SnapshotStore
from suanli.eventstore.tracking import apply_once
from suanli.eventstore.values import (
    ClaimedRecord,
    NewEvent,
    OutboxMessage,
    OutboxRecord,
    StoredEvent,
    StreamAppend,
)

__all__ = [
    "DEFAULT_SCHEMA",
    "NO_STREAM",
    "AlreadyProcessed",
    "BatchTrackingStore",
    "ClaimedRecord",
    "ConcurrencyConflict",
    "DuplicateEventId",
    "EventStore",
    "EventStoreError",
    "InMemoryEventStore",
    "InMemoryOutboxFeed",
    "InMemorySnapshots",
    "MigrationError",
    "NewEvent",
    "OutboxFeed",
    "OutboxLease",
    "OutboxMessage",
    "OutboxRecord",
    "OutboxRelay",
    "OutboxSink",
    "PostgresEventStore",
    "PostgresOutboxFeed",
    "PostgresSnapshots",
    "ProcessedEventsPruner",
    "ProcessedPruning",
    "PruneMetrics",
    "RecordingOutboxSink",
    "RetentionSettings",
    "Snapshot",
    "SnapshotStore",
    "StoredEvent",
    "StreamAppend",
    "TrackingBatch",
    "TrackingStore",
    "Transaction",
    "apply_once",
    "migrate",
]
