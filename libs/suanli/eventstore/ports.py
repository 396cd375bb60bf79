"""The event store's ports. Each has an in-memory and a PostgreSQL adapter, held to one contract suite.

Versions: a stream's version is the number of events in it, so a stream that does not exist yet is at
version 0 and its first event gets version 1. `append(stream, expected_version, ...)` succeeds only when
`expected_version` equals the stream's current version (pass `NO_STREAM`, i.e. 0, to create a stream).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from datetime import timedelta
from typing import Any, Protocol

from suanli.eventstore.values import (
    ClaimedRecord,
    NewEvent,
    OutboxMessage,
    OutboxRecord,
    ParkedRow,
    RowFailure,
    StoredEvent,
    StreamAppend,
)

NO_STREAM = 0


class Transaction(Protocol):
    """One atomic unit of work: its appends, outbox rows and tracking record commit together or not at all.

    `connection` is the adapter's handle for the caller's own state changes in the same transaction: an
    asyncpg connection inside an open transaction for PostgreSQL, `None` in memory.
    """

    @property
    def connection(self) -> Any:
        """The adapter's handle for the caller's own statements in this transaction."""

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        outbox: Sequence[OutboxMessage] = (),
    ) -> int:
        """Append like `EventStore.append`, committed when the transaction commits."""
        ...

    async def append_many(self, appends: Sequence[StreamAppend]) -> list[int]:
        """Several streams' appends as one step; return each stream's new version, in order.

        All or nothing: `ConcurrencyConflict` (the first stream not at its expected version) or
        `DuplicateEventId` (every id recorded before or repeated in the batch) leaves nothing of the batch
        written, and the transaction usable. Each stream may appear once; events get positions, and
        outbox rows ids, in the order given. Cheaper than one `append` per stream: the checks and inserts
        are one statement each, whatever the batch size.
        """
        ...


class EventStore(Protocol):
    """Append-only streams of events with an outbox, written atomically (the port every writer uses)."""

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        outbox: Sequence[OutboxMessage] = (),
    ) -> int:
        """Record `events` at the end of `stream` and `outbox` rows, atomically; return the new version.

        Raises `ConcurrencyConflict` when the stream is not at `expected_version` and `DuplicateEventId`
        when an event id was recorded before; in both cases nothing is written.
        """
        ...

    async def read(self, stream: str, after_version: int = 0) -> list[StoredEvent]:
        """Events of `stream` with version > `after_version`, in version order."""
        ...

    async def read_all(self, after_position: int = 0, limit: int | None = None) -> list[StoredEvent]:
        """Events of every stream with position > `after_position`, in position (commit) order."""
        ...

    async def stream_version(self, stream: str) -> int:
        """Current version of `stream` (0 when it has no events)."""
        ...

    def transaction(self, *, appending: bool = False) -> AbstractAsyncContextManager[Transaction]:
        """A unit of work; commits on normal exit, rolls back when the block raises.

        `appending=True` says the unit will append: the adapter may then take what appends need (the
        PostgreSQL append lock) as the transaction begins, in the same round trip, instead of at the
        first append. Same outcome either way; for writers on a latency path.
        """
        ...

    async def pending_outbox(self, limit: int = 500) -> list[OutboxRecord]:
        """Unpublished outbox rows, oldest first (parked rows are not pending)."""
        ...

    async def parked_outbox(self, limit: int = 100) -> list[ParkedRow]:
        """Rows the relay parked (the broker refused them), oldest first."""
        ...

    async def unpark_outbox(self, ids: Sequence[int]) -> list[int]:
        """Put parked rows ``ids`` back in line (attempts reset); return those that were parked."""
        ...


class TrackingStore(Protocol):
    """Exactly-once effects of consumed records: the effect and its offset are recorded in one transaction.

    Offsets are tracked per (group, topic, partition) as the highest applied offset, because a partition is
    consumed in order: an offset at or below it has been applied. A consumer that passes the record's
    `event_id` is de-duplicated by that id instead: a broker that restarted empty hands out offsets from 0
    again, and only the id tells a redelivery from a new record then.
    """

    async def applied(self, group: str, topic: str, partition: int, offset: int) -> bool:
        """Whether ``offset`` of the group's partition was applied before."""

    def tracking_transaction(
        self, group: str, topic: str, partition: int, offset: int, *, event_id: str | None = None
    ) -> AbstractAsyncContextManager[Transaction]:
        """Claim the offset (or, with `event_id`, the event) and open a unit of work for its effect.

        Raises `AlreadyProcessed` on entry when the offset, or the event id when given, was applied before
        (the block does not run).
        If the block raises, the effect and the claim roll back together, so the record is applied again on
        redelivery.
        """
        ...


class TrackingBatch(Protocol):
    """A group commit: several consumed records claimed and applied in one transaction.

    Each record is claimed before its effect runs; the effects and every claim commit together when the
    batch's block ends, or roll back together when it raises. A record that must not commit with the
    others (its effect failed) is the caller's to leave out: roll the batch back and run it again without
    that record, since a transaction cannot drop one record's writes and keep the rest.
    """

    @property
    def transaction(self) -> Transaction:
        """The batch's transaction, for the effects' appends and statements."""

    async def claim(self, topic: str, partition: int, offset: int, *, event_id: str | None = None) -> bool:
        """Claim a record in this batch: False when it was applied before, or claimed earlier in the batch.

        Its effect must not run then. De-duplicated like `TrackingStore.tracking_transaction`.
        """
        ...

    async def claim_many(self, records: Sequence[ClaimedRecord]) -> list[bool]:
        """`claim` for each record in turn, in as few statements as the store allows: one answer per record.

        A record whose event id repeats one earlier in ``records`` is refused as `claim` would refuse it.
        """
        ...


class BatchTrackingStore(TrackingStore, Protocol):
    """A tracking store that also claims several records in one transaction (a consumer's group commit)."""

    def tracking_batch(self, group: str) -> AbstractAsyncContextManager[TrackingBatch]:
        """Open one transaction for the group's records; commit on exit, roll everything back on raise."""
        ...


class ProcessedPruning(Protocol):
    """A tracking store whose processed-event records can be pruned (`suanli.eventstore.pruning`).

    Pruning a record re-opens its event to a redelivery: only records older than the de-duplication
    window are pruned, never one inside it.
    """

    async def prune_processed(self, older_than: timedelta, limit: int) -> int:
        """Delete at most ``limit`` records processed more than ``older_than`` ago, oldest first.

        Returns how many were deleted; the offsets in the tracking table are kept.
        """
        ...


class OutboxLease(Protocol):
    """The relay's exclusive hold on the outbox: while it lasts, no other relay publishes."""

    async def pending(self, limit: int) -> list[OutboxRecord]:
        """Oldest unpublished rows; also re-arms `wait_for_new`."""
        ...

    async def mark_published(self, ids: Sequence[int]) -> None:
        """Record the rows ``ids`` as published, so they are not handed out again."""

    async def record_failures(self, failures: Sequence[RowFailure]) -> None:
        """Count a failed attempt on each row, with its error; park those marked so (no longer pending)."""

    async def prune_published(self, older_than: timedelta, limit: int) -> int:
        """Delete at most ``limit`` rows published more than ``older_than`` ago, oldest first.

        Pending and parked rows are never deleted. Returns how many were.
        """
        ...

    async def wait_for_new(self, timeout: float) -> None:
        """Return when rows may have been added since the last `pending`, or after `timeout` seconds."""
        ...


class OutboxFeed(Protocol):
    """Where a relay takes its exclusive lease on the outbox."""

    def lease(self) -> AbstractAsyncContextManager[OutboxLease]:
        """Wait until this caller is the only relay, then hold that until the block exits."""
        ...


class OutboxSink(Protocol):
    """Where a relay publishes outbox rows (Kafka in production)."""

    async def publish_batch(self, records: Sequence[OutboxRecord]) -> None:
        """Publish `records`, keeping their order per key; return only once every one is acknowledged.

        When some are not acknowledged, raise `PublishFailed` naming them (once none is in flight any
        more), with `RecordRefused` as the error of a row the broker refused as a record.
        """
        ...
