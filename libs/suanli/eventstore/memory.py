"""In-memory adapters: the same behaviour as PostgreSQL, for unit tests of services and the contract suite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from suanli.clock import Clock, SystemClock
from suanli.eventstore.errors import AlreadyProcessed, ConcurrencyConflict, DuplicateEventId, PublishFailed
from suanli.eventstore.validation import check_batch
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
from suanli.telemetry.tracing import current_traceparent


@dataclass
class _State:
    events: list[StoredEvent] = field(default_factory=list)
    streams: dict[str, list[StoredEvent]] = field(default_factory=dict)
    event_ids: set[Any] = field(default_factory=set)
    outbox: dict[int, OutboxRecord] = field(default_factory=dict)  # unpublished, insertion (= id) order
    published: dict[int, OutboxRecord] = field(default_factory=dict)
    published_at: dict[int, datetime] = field(default_factory=dict)
    parked: dict[int, tuple[OutboxRecord, ParkedRow]] = field(default_factory=dict)
    tracking: dict[tuple[str, str, int], int] = field(default_factory=dict)
    processed: dict[tuple[str, str], datetime] = field(default_factory=dict)  # (group, event id): when
    next_position: int = 1
    next_outbox_id: int = 1


class _MemoryTransaction:
    """Stages writes on a private copy of what changes; the store swaps them in on commit."""

    def __init__(self, store: InMemoryEventStore) -> None:
        self._store = store
        self._streams: dict[str, list[StoredEvent]] = {}
        self._events: list[StoredEvent] = []
        self._outbox: list[OutboxRecord] = []
        self._event_ids: set[Any] = set()
        self._tracking: dict[tuple[str, str, int], int] = {}
        self._processed: dict[tuple[str, str], datetime] = {}
        self._next_position = store._state.next_position
        self._next_outbox_id = store._state.next_outbox_id

    @property
    def connection(self) -> Any:
        return None

    def _version(self, stream: str) -> int:
        staged = self._streams.get(stream)
        if staged is not None:
            return len(staged)
        return len(self._store._state.streams.get(stream, ()))

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        outbox: Sequence[OutboxMessage] = (),
    ) -> int:
        (version,) = await self.append_many([StreamAppend(stream, expected_version, events, outbox)])
        return version

    async def append_many(self, appends: Sequence[StreamAppend]) -> list[int]:
        check_batch(appends)
        for a in appends:
            actual = self._version(a.stream)
            if actual != a.expected_version:
                raise ConcurrencyConflict(a.stream, a.expected_version, actual)
        seen = self._store._state.event_ids | self._event_ids
        duplicates = [e.event_id for a in appends for e in a.events if e.event_id in seen]
        if duplicates:
            raise DuplicateEventId(duplicates)
        return [self._stage(a.stream, a.expected_version, a.events, a.outbox) for a in appends]

    def _stage(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[NewEvent],
        outbox: Sequence[OutboxMessage],
    ) -> int:
        clock = self._store._clock
        stored: list[StoredEvent] = []
        for offset, event in enumerate(events, start=1):
            stored.append(
                StoredEvent(
                    stream=stream,
                    version=expected_version + offset,
                    position=self._next_position,
                    event_id=event.event_id,
                    event_name=event.event_name,
                    payload=event.payload,
                    recorded_at=clock.now(),
                    metadata=event.metadata,
                )
            )
            self._next_position += 1
        current = current_traceparent() if outbox else None
        for message in outbox:
            self._outbox.append(
                OutboxRecord(
                    id=self._next_outbox_id,
                    topic=message.topic,
                    key=message.key,
                    event_name=message.event_name,
                    value=message.value,
                    headers=tuple(message.headers),
                    created_at=clock.now(),
                    traceparent=message.traceparent or current,
                )
            )
            self._next_outbox_id += 1
        base = self._streams.get(stream, list(self._store._state.streams.get(stream, ())))
        self._streams[stream] = base + stored
        self._events.extend(stored)
        self._event_ids.update(e.event_id for e in events)
        return expected_version + len(events)

    def _commit(self) -> None:
        state = self._store._state
        state.streams.update(self._streams)
        state.events.extend(self._events)
        state.event_ids |= self._event_ids
        for record in self._outbox:
            state.outbox[record.id] = record
        state.tracking.update(self._tracking)
        state.processed.update(self._processed)
        state.next_position = self._next_position
        state.next_outbox_id = self._next_outbox_id
        if self._outbox:
            self._store._outbox_added.set()


class _MemoryTrackingBatch:
    """`TrackingBatch` in memory: claims staged on the batch's transaction, seen by later claims."""

    def __init__(self, store: InMemoryEventStore, group: str) -> None:
        self._store = store
        self._group = group
        self.transaction = _MemoryTransaction(store)

    async def claim(self, topic: str, partition: int, offset: int, *, event_id: str | None = None) -> bool:
        tx, key = self.transaction, (self._group, topic, partition)
        if event_id is None:
            staged = tx._tracking.get(key)
            if (staged is not None and offset <= staged) or await self._store.applied(*key, offset):
                return False
        else:
            processed = (self._group, str(event_id))
            if processed in tx._processed or processed in self._store._state.processed:
                return False
            tx._processed[processed] = self._store._clock.now()
        tx._tracking[key] = max(offset, tx._tracking.get(key, offset))
        return True

    async def claim_many(self, records: Sequence[ClaimedRecord]) -> list[bool]:
        return [await self.claim(r.topic, r.partition, r.offset, event_id=r.event_id) for r in records]


class InMemoryEventStore:
    """Implements EventStore, TrackingStore and (through `feed()`) the relay's OutboxFeed.

    One lock serialises units of work, as the PostgreSQL adapter serialises appends with a table lock.
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock or SystemClock()
        self._state = _State()
        self._lock = asyncio.Lock()
        self._outbox_added = asyncio.Event()
        # One relay per store, as the advisory lock allows one per PostgreSQL schema.
        self._relay_lock = asyncio.Lock()

    # -- EventStore --------------------------------------------------------------------------------

    async def append(
        self,
        stream: str,
        expected_version: int,
        events: Sequence[NewEvent],
        *,
        outbox: Sequence[OutboxMessage] = (),
    ) -> int:
        """Like `EventStore.append`, in memory."""
        async with self.transaction() as tx:
            return await tx.append(stream, expected_version, events, outbox=outbox)

    async def read(self, stream: str, after_version: int = 0) -> list[StoredEvent]:
        """Like `EventStore.read`: the events of ``stream`` after ``after_version``."""
        return [e for e in self._state.streams.get(stream, ()) if e.version > after_version]

    async def read_all(self, after_position: int = 0, limit: int | None = None) -> list[StoredEvent]:
        """Like `EventStore.read_all`: events of every stream after ``after_position``, in commit order."""
        found = [e for e in self._state.events if e.position > after_position]
        return found if limit is None else found[:limit]

    async def stream_version(self, stream: str) -> int:
        """Like `EventStore.stream_version`: 0 for a stream without events."""
        return len(self._state.streams.get(stream, ()))

    @asynccontextmanager
    async def transaction(self, *, appending: bool = False) -> AsyncIterator[_MemoryTransaction]:
        """Like `EventStore.transaction`: applied on normal exit, discarded when the block raises."""
        async with self._lock:
            tx = _MemoryTransaction(self)
            yield tx
            tx._commit()

    async def pending_outbox(self, limit: int = 500) -> list[OutboxRecord]:
        """Like `EventStore.pending_outbox`: unpublished rows, oldest first."""
        return list(self._state.outbox.values())[:limit]

    async def parked_outbox(self, limit: int = 100) -> list[ParkedRow]:
        """Like `EventStore.parked_outbox`: parked rows, oldest first."""
        return [row for _, row in sorted(self._state.parked.values(), key=lambda p: p[1].id)][:limit]

    async def unpark_outbox(self, ids: Sequence[int]) -> list[int]:
        """Like `EventStore.unpark_outbox`: back in line (in id order), attempts reset."""
        state = self._state
        back = [state.parked.pop(i)[0] for i in sorted(set(ids)) if i in state.parked]
        if back:
            rows = [*state.outbox.values(), *(replace(r, attempts=0) for r in back)]
            state.outbox = {r.id: r for r in sorted(rows, key=lambda r: r.id)}
            self._outbox_added.set()
        return [r.id for r in back]

    # -- TrackingStore -----------------------------------------------------------------------------

    async def applied(self, group: str, topic: str, partition: int, offset: int) -> bool:
        """Like `TrackingStore.applied`: whether ``offset`` was applied for the group and partition."""
        last = self._state.tracking.get((group, topic, partition))
        return last is not None and offset <= last

    @asynccontextmanager
    async def tracking_transaction(
        self, group: str, topic: str, partition: int, offset: int, *, event_id: str | None = None
    ) -> AsyncIterator[_MemoryTransaction]:
        """Like `TrackingStore.tracking_transaction`, in memory."""
        async with self._lock:
            if event_id is None:
                seen = await self.applied(group, topic, partition, offset)
            else:
                seen = (group, str(event_id)) in self._state.processed
            if seen:
                raise AlreadyProcessed(group, topic, partition, offset)
            tx = _MemoryTransaction(self)
            tx._tracking[(group, topic, partition)] = offset
            if event_id is not None:
                tx._processed[(group, str(event_id))] = self._clock.now()
            yield tx
            tx._commit()

    @asynccontextmanager
    async def tracking_batch(self, group: str) -> AsyncIterator[_MemoryTrackingBatch]:
        """Like `BatchTrackingStore.tracking_batch`, in memory."""
        async with self._lock:
            batch = _MemoryTrackingBatch(self, group)
            yield batch
            batch.transaction._commit()

    async def prune_processed(self, older_than: timedelta, limit: int) -> int:
        """Like `ProcessedPruning.prune_processed`: the oldest past ``older_than``, at most ``limit``."""
        async with self._lock:
            before = self._clock.now() - older_than
            processed = self._state.processed
            old = sorted((at, key) for key, at in processed.items() if at < before)[:limit]
            for _, key in old:
                del processed[key]
            return len(old)

    # -- outbox, for the relay ---------------------------------------------------------------------

    def feed(self) -> InMemoryOutboxFeed:
        """An outbox feed over this store, for an `OutboxRelay`."""
        return InMemoryOutboxFeed(self)

    def published(self) -> list[OutboxRecord]:
        """Outbox rows the relay has marked published, in the order it did."""
        return list(self._state.published.values())


class _MemoryLease:
    def __init__(self, store: InMemoryEventStore) -> None:
        self._store = store

    async def pending(self, limit: int) -> list[OutboxRecord]:
        self._store._outbox_added.clear()
        return await self._store.pending_outbox(limit)

    async def mark_published(self, ids: Sequence[int]) -> None:
        state = self._store._state
        for record_id in ids:
            record = state.outbox.pop(record_id, None)
            if record is not None:
                state.published[record_id] = record
                state.published_at[record_id] = self._store._clock.now()

    async def prune_published(self, older_than: timedelta, limit: int) -> int:
        state = self._store._state
        before = self._store._clock.now() - older_than
        old = [i for i, at in sorted(state.published_at.items()) if at < before][:limit]
        for record_id in old:
            del state.published_at[record_id]
            state.published.pop(record_id, None)
        return len(old)

    async def record_failures(self, failures: Sequence[RowFailure]) -> None:
        state = self._store._state
        for failure in failures:
            record = state.outbox.get(failure.id)
            if record is None:
                continue
            record = replace(record, attempts=record.attempts + 1)
            if not failure.park:
                state.outbox[failure.id] = record  # an update keeps the row's place in id order
                continue
            del state.outbox[failure.id]
            state.parked[failure.id] = (
                record,
                ParkedRow(
                    id=record.id,
                    topic=record.topic,
                    key=record.key,
                    event_name=record.event_name,
                    size=len(record.value),
                    attempts=record.attempts,
                    reason=failure.error,
                    created_at=record.created_at,
                    parked_at=self._store._clock.now(),
                ),
            )

    async def wait_for_new(self, timeout: float) -> None:
        with suppress(TimeoutError):
            await asyncio.wait_for(self._store._outbox_added.wait(), timeout)


class InMemoryOutboxFeed:
    """The `OutboxFeed` of an `InMemoryEventStore`: one relay at a time."""

    def __init__(self, store: InMemoryEventStore) -> None:
        self._store = store

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[_MemoryLease]:
        """Hold the store's relay lock while the block runs."""
        async with self._store._relay_lock:
            yield _MemoryLease(self._store)


class RecordingOutboxSink:
    """An OutboxSink that keeps what it was given: for relay tests that do not need a broker.

    ``fail_next`` fails the next batch as a whole, once; ``reject(record)`` returning an error fails that
    record alone (with `PublishFailed`, as a broker's answer per record would) on every attempt.
    """

    def __init__(self, reject: Callable[[OutboxRecord], BaseException | None] | None = None) -> None:
        self.records: list[OutboxRecord] = []
        self.fail_next: BaseException | None = None
        self.reject = reject

    async def publish_batch(self, records: Sequence[OutboxRecord]) -> None:
        """Keep ``records``, or raise the error set in ``fail_next`` once, or those ``reject`` gives."""
        if self.fail_next is not None:
            error, self.fail_next = self.fail_next, None
            raise error
        failures: dict[int, BaseException] = {}
        for record in records:
            rejected = self.reject(record) if self.reject is not None else None
            if rejected is None:
                self.records.append(record)
            else:
                failures[record.id] = rejected
        if failures:
            raise PublishFailed(failures)
