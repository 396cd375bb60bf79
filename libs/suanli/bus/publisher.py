"""`EventPublisher`: the one way services put events on Kafka."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata
from opentelemetry import trace

from suanli.bus.codec import Codec, default_codec
from suanli.bus.errors import BusClosedError
from suanli.bus.headers import EVENT_ID, EVENT_NAME, Headers, set_headers
from suanli.bus.security import client_options
from suanli.telemetry.propagation import inject_headers
from suanli.telemetry.tracing import tracer


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """An already-encoded record, as the outbox relay stores it."""

    topic: str
    key: bytes | str | None
    value: bytes
    headers: Sequence[tuple[str, bytes]] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    """aiokafka producer options (no idempotence: Tansu refuses InitProducerId)."""

    # Tansu answers InitProducerId with an error, so no idempotence; aiokafka keeps one batch in flight
    # per partition, so ordering per key still holds across retries.
    acks: str | int = "all"
    linger_ms: int = 5
    # Fetch cost on Tansu grows with the number of stored batches: fewer, fuller batches help consumers.
    max_batch_size: int = 256 * 1024
    max_request_size: int = 4 * 1024 * 1024
    compression_type: str | None = None
    request_timeout_ms: int = 30_000
    client_id: str = "suanli-publisher"


def _key_bytes(key: bytes | str | None) -> bytes | None:
    if key is None or isinstance(key, bytes):
        return key
    return key.encode("utf-8")


class EventPublisher:
    """Publishes events keyed by subject id, with event-name, event-id and W3C trace headers.

    Use ``async with EventPublisher(bootstrap) as bus:`` or ``start()`` / ``stop()``; ``stop()`` flushes.
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        codec: Codec | None = None,
        settings: ProducerSettings | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._codec = codec
        self._settings = settings or ProducerSettings()
        self._producer: AIOKafkaProducer | None = None

    @property
    def codec(self) -> Codec:
        """The codec records are encoded with (`default_codec()` unless one was given)."""
        if self._codec is None:
            self._codec = default_codec()
        return self._codec

    async def start(self) -> None:
        """Connect the producer; a second call does nothing."""
        if self._producer is not None:
            return
        s = self._settings
        producer = AIOKafkaProducer(
            bootstrap_servers=self._bootstrap,
            client_id=s.client_id,
            acks=s.acks,
            enable_idempotence=False,
            linger_ms=s.linger_ms,
            max_batch_size=s.max_batch_size,
            max_request_size=s.max_request_size,
            compression_type=s.compression_type,
            request_timeout_ms=s.request_timeout_ms,
            **client_options(),
        )
        await producer.start()
        self._producer = producer

    async def stop(self) -> None:
        """Flush what is pending and disconnect; a second call does nothing."""
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def _running(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise BusClosedError("EventPublisher is not started")
        return self._producer

    def encode(
        self,
        topic: str,
        key: bytes | str | None,
        event_name: str,
        record: dict[str, Any],
        *,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> OutgoingRecord:
        """Encode an event into the record ``publish`` would send (the outbox stores exactly this)."""
        value = self.codec.encode(event_name, record)
        # Records carry their own event_id (every contract has one); the header lets consumers and
        # operators de-duplicate and trace without decoding Avro.
        event_id = str(record.get("event_id") or uuid.uuid4())
        base = set_headers(headers, {EVENT_NAME: event_name.encode(), EVENT_ID: event_id.encode()})
        return OutgoingRecord(topic, key, value, tuple(inject_headers(base)))

    async def publish(
        self,
        topic: str,
        key: bytes | str | None,
        event_name: str,
        record: dict[str, Any],
        *,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> RecordMetadata:
        """Encode, send and wait for the broker's acknowledgement (acks=all)."""
        attributes = {
            "messaging.system": "kafka",
            "messaging.destination.name": topic,
            "messaging.operation.type": "send",
            "suanli.event_name": event_name,
        }
        if key is not None:
            attributes["messaging.kafka.message.key"] = (
                key if isinstance(key, str) else key.decode(errors="replace")
            )
        with tracer("suanli.bus").start_as_current_span(
            f"{topic} publish", kind=trace.SpanKind.PRODUCER, attributes=attributes
        ):
            out = self.encode(topic, key, event_name, record, headers=headers)
            return await self.publish_raw(out.topic, out.key, out.value, out.headers)

    async def publish_raw(
        self,
        topic: str,
        key: bytes | str | None,
        value: bytes,
        headers: Iterable[tuple[str, bytes]] | None = None,
    ) -> RecordMetadata:
        """Send already-encoded bytes; the relay's stored headers (event id, trace) are kept as they are."""
        future = await self._send(OutgoingRecord(topic, key, value, tuple(headers or ())))
        return await future

    async def publish_many(self, records: Iterable[OutgoingRecord]) -> list[RecordMetadata]:
        """Send ``records`` in order and return once every one is acknowledged (results in input order).

        Records of one key go to one partition in input order, and aiokafka keeps one batch in flight per
        partition, so they are stored in input order. If any send fails this raises after all others have
        settled, so the caller knows nothing is still in flight when it retries the lot.
        """
        results = await self.publish_each(records)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return [r for r in results if not isinstance(r, BaseException)]

    async def publish_each(self, records: Iterable[OutgoingRecord]) -> list[RecordMetadata | Exception]:
        """Like `publish_many`, but each record's outcome in input order: its metadata or its error.

        A record the producer refuses before sending (larger than ``max_request_size``) fails alone,
        with the others still sent; returns only once nothing is in flight.
        """
        pending: list[asyncio.Future[RecordMetadata] | Exception] = []
        for record in records:
            try:
                pending.append(await self._send(record))
            except BusClosedError:
                raise
            except Exception as exc:
                pending.append(exc)
        futures = [p for p in pending if not isinstance(p, Exception)]
        settled = iter(await asyncio.gather(*futures, return_exceptions=True))
        outcomes: list[RecordMetadata | Exception] = []
        for entry in pending:
            if isinstance(entry, Exception):
                outcomes.append(entry)
                continue
            result = next(settled)
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result  # cancellation and the like are not a record's outcome
            outcomes.append(result)
        return outcomes

    async def flush(self) -> None:
        """Return once every record sent so far is acknowledged (or failed)."""
        await self._running().flush()

    async def _send(self, record: OutgoingRecord) -> asyncio.Future[RecordMetadata]:
        headers: Headers = list(record.headers)
        return await self._running().send(
            record.topic, record.value, key=_key_bytes(record.key), headers=headers
        )
