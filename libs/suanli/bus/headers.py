"""Header names the bus writes, and helpers over aiokafka's ``[(name, bytes)]`` header shape."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

EVENT_NAME = "event-name"
EVENT_ID = "event-id"

DLQ_ERROR_CLASS = "dlq-error-class"
DLQ_ERROR_MESSAGE = "dlq-error-message"
DLQ_ORIGINAL_TOPIC = "dlq-original-topic"
DLQ_ORIGINAL_PARTITION = "dlq-original-partition"
DLQ_ORIGINAL_OFFSET = "dlq-original-offset"
DLQ_ATTEMPTS = "dlq-attempts"
# The ``reason`` label of suanli_dead_lettered_total (decode, handler, retries-exhausted).
DLQ_REASON = "dlq-reason"
# The consumer (group, or faust app id) that gave up on the record: a topic read by several services
# gets one dead letter from each, and this tells them apart.
DLQ_CONSUMER = "dlq-consumer"
# Set when the record was too large to copy (over the producer's or the broker's limit): the dead letter
# then holds no value, this header its size in bytes; the original stays at its topic, partition and offset.
DLQ_VALUE_DROPPED = "dlq-value-dropped"
DLQ_HEADERS = (
    DLQ_ERROR_CLASS,
    DLQ_ERROR_MESSAGE,
    DLQ_ORIGINAL_TOPIC,
    DLQ_ORIGINAL_PARTITION,
    DLQ_ORIGINAL_OFFSET,
    DLQ_ATTEMPTS,
    DLQ_REASON,
    DLQ_CONSUMER,
)

# Written by `suanli dlq replay` on the records it republishes, and kept when such a record is
# dead-lettered again, so a replay that failed once more is told apart from a first failure.
DLQ_REPLAYED_FROM = "dlq-replayed-from"
DLQ_REPLAYS = "dlq-replays"

# Kafka has no header size limit of its own, but a stack-trace-sized message bloats every DLQ record.
MAX_ERROR_MESSAGE_BYTES = 2048

Headers = list[tuple[str, bytes]]


def header(headers: Sequence[tuple[str, bytes | None]] | None, name: str) -> str | None:
    """Last value of ``name`` decoded as UTF-8 (last wins, as when a relay appends an override)."""
    found: str | None = None
    for key, value in headers or ():
        if key == name and value is not None:
            found = value.decode("utf-8", errors="replace")
    return found


def set_headers(headers: Iterable[tuple[str, bytes]] | None, updates: Mapping[str, bytes]) -> Headers:
    """``headers`` with each name in ``updates`` present exactly once, other headers kept in order."""
    kept = [(name, value) for name, value in headers or () if name not in updates]
    return kept + list(updates.items())


def dead_letter_headers(
    original: Iterable[tuple[str, bytes]] | None,
    *,
    error: BaseException,
    topic: str,
    partition: int,
    offset: int,
    attempts: int,
    reason: str,
    consumer: str,
) -> Headers:
    """The original headers (trace context, event id) plus why and where the record failed."""
    message = str(error).encode("utf-8", errors="replace")[:MAX_ERROR_MESSAGE_BYTES]
    values = {
        DLQ_ERROR_CLASS: f"{type(error).__module__}.{type(error).__qualname__}".encode(),
        DLQ_ERROR_MESSAGE: message,
        DLQ_ORIGINAL_TOPIC: topic.encode(),
        DLQ_ORIGINAL_PARTITION: str(partition).encode(),
        DLQ_ORIGINAL_OFFSET: str(offset).encode(),
        DLQ_ATTEMPTS: str(attempts).encode(),
        DLQ_REASON: reason.encode(),
        DLQ_CONSUMER: consumer.encode(),
    }
    return set_headers(original, values)
