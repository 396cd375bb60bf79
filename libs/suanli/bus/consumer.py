"""`EventConsumer`: group consumption with manual commits, retries and dead-lettering.

Delivery is at-least-once. Offsets are committed after every record of a fetched batch has been handled
(or dead-lettered), on partition revocation, and on stop. A crash between handling and commit repeats
those records, so handlers whose effects matter de-duplicate by ``ConsumedEvent.event_id`` (the event
store's tracking table does this for database effects).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import IllegalStateError, KafkaError
from aiokafka.structs import ConsumerRecord
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context

from suanli.bus.codec import Codec, default_codec
from suanli.bus.deadletter import DECODE, STOPPED, Failed, dead_letter, retry_failed
from suanli.bus.errors import BusClosedError
from suanli.bus.headers import EVENT_ID, header
from suanli.bus.metrics import BusMetrics
from suanli.bus.publisher import EventPublisher, ProducerSettings
from suanli.bus.records import ConsumedRecord
from suanli.bus.retry import SERVICE_RETRY, RetryPolicy
from suanli.bus.security import client_options
from suanli.bus.topics import dlq_topic
from suanli.telemetry.propagation import extract_context
from suanli.telemetry.tracing import tracer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ConsumedEvent:
    """One decoded record as a handler sees it, with where it came from and the producer's trace context."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    event_name: str
    record: dict[str, Any]
    headers: tuple[tuple[str, bytes], ...]
    context: Context
    timestamp_ms: int
    # A compacted topic's delete marker: no value, so event_name is "" and record is empty.
    tombstone: bool = False

    @property
    def event_id(self) -> str | None:
        """The id to de-duplicate by: the ``event-id`` header, else the record's ``event_id``."""
        found = header(self.headers, EVENT_ID)
        if found:
            return found
        value = self.record.get("event_id")
        return str(value) if value is not None else None

    @property
    def key_str(self) -> str | None:
        """The key as text (undecodable bytes replaced), or None for a record without key."""
        return None if self.key is None else self.key.decode("utf-8", errors="replace")


Handler = Callable[[ConsumedEvent], Awaitable[None]]
Prepare = Callable[[Sequence[ConsumedEvent]], Awaitable[None]]
"""Shown the decoded events of one partition's fetch before the handler takes them one by one: a handler
may look up what they need in one query. Changes nothing; if it raises, the records are handled without
it."""
DeadLetterHook = Callable[[ConsumedRecord, BaseException, str], Awaitable[None]]
"""Told of each record once its dead-letter copy is acknowledged: the record, the error and the reason
(``decode``, ``handler``, ``retries-exhausted``); e.g. to answer the sender of a command that failed."""


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """aiokafka consumer options, with defaults that suit Tansu as well as Apache Kafka."""

    # Tansu fails fetch_max_wait_ms=0; a short positive wait keeps latency low without busy polling.
    fetch_max_wait_ms: int = 250
    poll_timeout_ms: int = 250
    max_poll_records: int = 1000
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    max_poll_interval_ms: int = 300_000
    # A new group reads from the start: missing events is worse than seeing old ones (ids de-duplicate).
    auto_offset_reset: str = "earliest"
    client_id: str = "suanli-consumer"
    # Handle the partitions of one fetch concurrently (each still in offset order). For handlers whose
    # cost is waiting (a database commit), so that a service batching its writes (group commit) gets a
    # batch; only for handlers that tolerate interleaving across partitions (keys never share state).
    concurrent_partitions: bool = False
    # Start every fetched record of a partition at once, in offset order, and wait for all of them. For a
    # handler that queues its work in arrival order before its first wait (a group commit), so one
    # partition's records share a batch instead of one commit each; a record being retried may then be
    # handled after later records of its partition, so the handler must accept that order.
    pipelined: bool = False


@dataclass(slots=True)
class _Progress:
    """Next offset to commit per partition; only offsets of records fully handled or dead-lettered."""

    pending: dict[TopicPartition, int] = field(default_factory=dict)

    def take(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        if partitions is None:
            taken, self.pending = self.pending, {}
            return taken
        return {tp: self.pending.pop(tp) for tp in list(partitions) if tp in self.pending}

    def put_back(self, offsets: Mapping[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            self.pending[tp] = max(offset, self.pending.get(tp, offset))


class _CommitOnRevoke(ConsumerRebalanceListener):
    def __init__(self, owner: EventConsumer, consumer: AIOKafkaConsumer) -> None:
        self._owner = owner
        self._consumer = consumer

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self._owner._rebalances += 1
        await self._owner._commit(revoked)

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        if assigned:
            await self._owner._rewind_if_asked(self._consumer, assigned)
            self._owner._assigned.set()


class EventConsumer:
    """Consumes ``topics`` in group ``group_id`` and calls ``handler`` once per record, in offset order.

    A record that fails to decode, whose handler raises a non-retriable error, or that still fails after
    its retries (``retry``: a few quick tries, then up to ``ride_out_s`` while a dependency is away) is
    copied (original key, value and headers) to ``<topic>.dlq`` with ``dlq-*`` headers saying why; then
    its offset is committed and consumption moves on. ``on_dead_letter``, when given, is awaited after
    each copy; if it raises, ``run()`` fails before the offset is committed (the record comes again).

    ``async with`` starts the consumer and runs it in a background task; services can instead call
    ``start()`` and ``await run()``. ``stop()`` lets the record in hand finish, commits and leaves the group.

    ``from_start``: the partitions first assigned are read from their beginning, and that beginning is
    committed for the group, whatever offsets the group had. For a consumer built after the broker
    started over (`suanli.bus.watch`): a consumer of the old logs may have committed its old positions
    into the new broker (the embedded broker accepts such a commit from a member it never knew), and a
    member starting from them would begin past the new logs' end and skip all they hold. Reading from
    the beginning repeats at most what the group read since the restart (consumers de-duplicate).
    """

    def __init__(
        self,
        bootstrap: str,
        group_id: str,
        topics: Iterable[str],
        handler: Handler,
        *,
        codec: Codec | None = None,
        retry: RetryPolicy | None = None,
        settings: ConsumerSettings | None = None,
        dead_letter_publisher: EventPublisher | None = None,
        dlq_for: Callable[[str], str] = dlq_topic,
        on_dead_letter: DeadLetterHook | None = None,
        prepare: Prepare | None = None,
        from_start: bool = False,
    ) -> None:
        self._bootstrap = bootstrap
        self._rewind = from_start
        self.group_id = group_id
        self.topics = tuple(topics)
        if not self.topics:
            raise ValueError("EventConsumer needs at least one topic")
        self._handler = handler
        self._prepare = prepare
        self._codec = codec
        self._retry = retry or SERVICE_RETRY
        self._settings = settings or ConsumerSettings()
        self._dlq_publisher = dead_letter_publisher
        self._owns_dlq_publisher = dead_letter_publisher is None
        self._dlq_for = dlq_for
        self._on_dead_letter = on_dead_letter
        self._consumer: AIOKafkaConsumer | None = None
        self._progress = _Progress()
        self._stopping = asyncio.Event()
        self._assigned = asyncio.Event()
        # Bumped by every revocation, so record handling re-checks its assignment only when it may differ.
        self._rebalances = 0
        self._task: asyncio.Task[None] | None = None
        # Set whenever no run() loop is active, so stop() never closes the client under a handler.
        self._idle = asyncio.Event()
        self._idle.set()
        self._positions: dict[TopicPartition, int] = {}
        self._metrics = BusMetrics(group_id)

    @property
    def codec(self) -> Codec:
        """The codec records are decoded with (`default_codec()` unless one was given)."""
        if self._codec is None:
            self._codec = default_codec()
        return self._codec

    async def start(self) -> None:
        """Connect and join the group; a second call does nothing."""
        if self._consumer is not None:
            return
        s = self._settings
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=self.group_id,
            client_id=s.client_id,
            enable_auto_commit=False,
            auto_offset_reset=s.auto_offset_reset,
            fetch_max_wait_ms=s.fetch_max_wait_ms,
            max_poll_records=s.max_poll_records,
            session_timeout_ms=s.session_timeout_ms,
            heartbeat_interval_ms=s.heartbeat_interval_ms,
            max_poll_interval_ms=s.max_poll_interval_ms,
            **client_options(),
        )
        if self._dlq_publisher is None:
            self._dlq_publisher = EventPublisher(
                self._bootstrap, settings=ProducerSettings(linger_ms=0, client_id=f"{s.client_id}-dlq")
            )
        await self._dlq_publisher.start()
        consumer.subscribe(list(self.topics), listener=_CommitOnRevoke(self, consumer))
        try:
            await consumer.start()
        except BaseException:
            await self._close_dlq_publisher()
            raise
        self._consumer = consumer
        self._stopping.clear()

    async def run(self) -> None:
        """Consume until ``stop()``; then commit what was handled. Errors other than a handler's propagate."""
        consumer = self._running()
        self._idle.clear()
        try:
            while not self._stopping.is_set():
                batches = await consumer.getmany(timeout_ms=self._settings.poll_timeout_ms)
                if self._settings.concurrent_partitions and len(batches) > 1:
                    outcomes = await asyncio.gather(
                        *(self._handle_partition(consumer, tp, records) for tp, records in batches.items()),
                        return_exceptions=True,
                    )
                    # Every partition has finished (its offsets are recorded) before an error propagates.
                    for outcome in outcomes:
                        if isinstance(outcome, BaseException):
                            raise outcome
                else:
                    for tp, records in batches.items():
                        if not await self._handle_partition(consumer, tp, records):
                            break
                await self._commit()
                self._metrics.observe_lag(consumer, self._positions)
        finally:
            try:
                await self._commit()
            finally:
                self._idle.set()

    def request_stop(self) -> None:
        """Ask ``run()`` to return after the record in hand (for signal handlers)."""
        self._stopping.set()

    async def stop(self) -> None:
        """Finish the record in hand, commit handled offsets and leave the group."""
        self._stopping.set()
        task, self._task = self._task, None
        error: BaseException | None = None
        if task is not None:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as exc:
                error = exc
        await self._idle.wait()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await self._commit_with(consumer, None)
            await consumer.stop()
        await self._close_dlq_publisher()
        if error is not None:
            raise error

    @property
    def rewind_pending(self) -> bool:
        """Built ``from_start`` and not yet rewound (it never got its partitions)."""
        return self._rewind

    async def _rewind_if_asked(self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> None:
        """With ``from_start``, once: seek ``partitions`` to their beginning and commit it for the group.

        Offsets come from ListOffsets directly (not ``position``, whose reset waits on the fetcher, which
        waits on this rebalance). A failure is logged and the next assignment tries again.
        """
        if not self._rewind:
            return
        try:
            beginnings = await consumer.beginning_offsets(partitions)
            for tp, offset in beginnings.items():
                consumer.seek(tp, offset)
            await consumer.commit(beginnings)
        except KafkaError as exc:
            log.warning("could not rewind %s to the beginning: %r", self.group_id, exc)
            return
        self._rewind = False
        log.info(
            "%s reads %s from the beginning (the broker started over)",
            self.group_id,
            ", ".join(f"{tp.topic}[{tp.partition}]@{o}" for tp, o in sorted(beginnings.items())),
        )

    async def wait_assigned(self, timeout_s: float = 30.0) -> None:
        """Wait until this member holds at least one partition and knows where it reads each from.

        So a record written after this returns is read, also by a consumer that starts at the latest
        offset (whose position is only taken after the assignment).
        """

        async def positioned() -> None:
            await self._assigned.wait()
            consumer = self._consumer
            if consumer is None:
                return
            for tp in consumer.assignment():
                with contextlib.suppress(IllegalStateError):  # revoked meanwhile: the next owner's
                    await consumer.position(tp)

        await asyncio.wait_for(positioned(), timeout_s)

    async def __aenter__(self) -> Self:
        await self.start()
        self._task = asyncio.create_task(self.run(), name=f"suanli-bus-consumer-{self.group_id}")
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _running(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise BusClosedError("EventConsumer is not started")
        return self._consumer

    async def _handle_partition(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, records: list[ConsumerRecord[Any, Any]]
    ) -> bool:
        """Handle ``records`` in order; False once stopping (the rest stay uncommitted for the next owner)."""
        if self._settings.pipelined:
            return await self._handle_pipelined(consumer, tp, records)
        decoded = await self._prepared(records)
        seen = -1
        for record, event in zip(records, decoded, strict=True):
            if self._stopping.is_set():
                return False
            # A rebalance may have revoked the partition while earlier records were handled; its new
            # owner starts from the committed offset, so handling more here would only duplicate work.
            # Asked again only after a revocation: the assignment is copied on every call.
            if seen != self._rebalances:
                seen = self._rebalances
                if tp not in consumer.assignment():
                    return True
            if not await self._process(record, event):
                return False
            self._progress.pending[tp] = self._positions[tp] = record.offset + 1
        return True

    async def _prepared(
        self, records: list[ConsumerRecord[Any, Any]]
    ) -> list[ConsumedEvent | Exception | None]:
        """The records decoded up front and shown to the `Prepare` hook, when there is one.

        An error stands in for a record that does not decode. Without a hook nothing is decoded here.
        """
        if self._prepare is None:
            return [None] * len(records)
        decoded: list[ConsumedEvent | Exception | None] = []
        for record in records:
            try:
                decoded.append(self._decode(record, tuple(record.headers or ())))
            except Exception as exc:
                decoded.append(exc)
        events = [e for e in decoded if isinstance(e, ConsumedEvent)]
        if events:
            try:
                await self._prepare(events)
            except Exception as exc:  # only a shortcut: each record is handled as it would be without it
                log.warning("%s: preparing %d records failed: %r", self.group_id, len(events), exc)
        return decoded

    async def _handle_pipelined(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, records: list[ConsumerRecord[Any, Any]]
    ) -> bool:
        if self._stopping.is_set():
            return False
        if tp not in consumer.assignment():
            return True
        # gather starts the handlers in argument order, so each reaches its first wait in offset order.
        done = await asyncio.gather(*(self._process(record) for record in records))
        handled = 0
        while handled < len(done) and done[handled]:
            handled += 1
        if handled:  # only the unbroken run of handled records from the start may be committed
            self._progress.pending[tp] = self._positions[tp] = records[handled - 1].offset + 1
        return handled == len(done)

    async def _process(
        self, record: ConsumerRecord[Any, Any], decoded: ConsumedEvent | Exception | None = None
    ) -> bool:
        """Handle or dead-letter one record; False only when stopped during a retry backoff.

        ``decoded``: the record already decoded, or the error its decoding gave.
        """
        started = time.perf_counter()
        try:
            return await self._process_timed(record, decoded)
        finally:
            self._metrics.handled(record.topic, time.perf_counter() - started)

    async def _process_timed(
        self, record: ConsumerRecord[Any, Any], decoded: ConsumedEvent | Exception | None
    ) -> bool:
        if isinstance(decoded, ConsumedEvent):
            event = decoded
        else:
            try:
                if decoded is not None:
                    raise decoded
                event = self._decode(record, tuple(record.headers or ()))
            except Exception as exc:
                await self._dead_letter(record, exc, attempts=0, reason=DECODE)
                return True
        try:
            await self._handle(event)
            return True
        except Exception as exc:
            outcome = await retry_failed(
                exc,
                lambda: self._handle(event),
                self._retry,
                where=f"{record.topic}[{record.partition}]@{record.offset}",
                pause=lambda delay_s: self._retry_after(record.topic, delay_s),
            )
        if outcome is STOPPED:
            return False
        if isinstance(outcome, Failed):
            await self._dead_letter(record, outcome.error, attempts=outcome.attempts, reason=outcome.reason)
        return True

    async def _handle(self, event: ConsumedEvent) -> None:
        token = otel_context.attach(event.context)
        try:
            # The producer's span is the parent (ConsumedEvent.context), so the handler's work and what it
            # publishes or commits continue the producer's trace.
            with tracer("suanli.bus").start_as_current_span(
                f"{event.topic} process", kind=trace.SpanKind.CONSUMER
            ) as span:
                if span.is_recording():  # without an SDK the attributes would be built for nothing
                    span.set_attributes(
                        {
                            "messaging.system": "kafka",
                            "messaging.destination.name": event.topic,
                            "messaging.operation.type": "process",
                            "messaging.consumer.group.name": self.group_id,
                            "messaging.destination.partition.id": str(event.partition),
                            "messaging.kafka.offset": event.offset,
                            "messaging.kafka.message.key": event.key_str or "",
                            "suanli.event_name": event.event_name,
                        }
                    )
                await self._handler(event)
        finally:
            otel_context.detach(token)

    def _decode(
        self, record: ConsumerRecord[Any, Any], headers: tuple[tuple[str, bytes], ...]
    ) -> ConsumedEvent:
        value: dict[str, Any]
        if record.value is None:
            event_name, value, tombstone = "", {}, True
        else:
            event_name, value = self.codec.decode(record.value)
            tombstone = False
        return ConsumedEvent(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            key=record.key,
            event_name=event_name,
            record=value,
            headers=headers,
            context=extract_context(headers),
            timestamp_ms=record.timestamp,
            tombstone=tombstone,
        )

    async def _dead_letter(
        self, record: ConsumerRecord[Any, Any], error: BaseException, *, attempts: int, reason: str
    ) -> None:
        publisher = self._dlq_publisher
        if publisher is None:
            raise BusClosedError("EventConsumer is not started")
        await dead_letter(
            record,
            error,
            attempts=attempts,
            reason=reason,
            consumer=self.group_id,
            send=publisher.publish_raw,
            retry=self._retry,
            metrics=self._metrics,
            dlq_for=self._dlq_for,
        )
        if self._on_dead_letter is not None:
            await self._on_dead_letter(record, error, reason)

    async def _retry_after(self, topic: str, delay_s: float) -> bool:
        self._metrics.retried(topic)
        return await self._wait_or_stop(delay_s)

    async def _wait_or_stop(self, delay_s: float) -> bool:
        """Sleep ``delay_s``; True if ``stop()`` was called meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay_s)
        return self._stopping.is_set()

    async def _commit(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        if self._consumer is not None:
            await self._commit_with(self._consumer, partitions)

    async def _commit_with(
        self, consumer: AIOKafkaConsumer, partitions: Iterable[TopicPartition] | None
    ) -> None:
        # A partition revoked while its record was being handled now belongs to another member, and a
        # commit naming it would fail the whole request; that record is simply redelivered there.
        assigned = consumer.assignment()
        offsets = {tp: o for tp, o in self._progress.take(partitions).items() if tp in assigned}
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:
            if getattr(exc, "retriable", False):
                self._progress.put_back(offsets)
            # Otherwise the partition moved to another member (CommitFailedError): it redelivers these
            # records from the last committed offset, which at-least-once delivery allows.
            log.warning("commit of %s failed: %r", offsets, exc)

    async def _close_dlq_publisher(self) -> None:
        if self._dlq_publisher is not None and self._owns_dlq_publisher:
            await self._dlq_publisher.stop()
            self._dlq_publisher = None


async def run_consumer(
    bootstrap: str,
    group_id: str,
    topics: Iterable[str],
    handler: Handler,
    *,
    stop: asyncio.Event | None = None,
    **options: Any,
) -> None:
    """Run an `EventConsumer` until ``stop`` is set or the task is cancelled, then stop it gracefully.

    ``options`` are `EventConsumer` keyword arguments (codec, retry, settings, ...).
    """
    consumer = EventConsumer(bootstrap, group_id, topics, handler, **options)
    await consumer.start()
    watcher: asyncio.Task[None] | None = None
    if stop is not None:

        async def _watch(event: asyncio.Event) -> None:
            await event.wait()
            consumer.request_stop()

        watcher = asyncio.create_task(_watch(stop))
    try:
        await consumer.run()
    finally:
        if watcher is not None:
            watcher.cancel()
        await consumer.stop()
