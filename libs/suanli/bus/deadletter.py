"""What the bus does with a record whose handling failed: retry what may pass, dead-letter the rest.

`EventConsumer` runs every failed record through these two functions; a consumer that cannot be an
`EventConsumer` (metering's faust agents own their consumption) calls the same ones, so every service
retries by the same `RetryPolicy` and the same classification (`is_retriable`), and writes the same
``dlq-*`` headers to ``<topic>.dlq`` under the same metric reasons.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)

from suanli.bus.errors import is_retriable
from suanli.bus.headers import DLQ_VALUE_DROPPED, Headers, dead_letter_headers, set_headers
from suanli.bus.metrics import BusMetrics
from suanli.bus.records import ConsumedRecord
from suanli.bus.retry import RetryPolicy
from suanli.bus.topics import dlq_topic

log = logging.getLogger(__name__)

# The ``reason`` label of suanli_dead_lettered_total.
DECODE: Final = "decode"
HANDLER: Final = "handler"
RETRIES_EXHAUSTED: Final = "retries-exhausted"

# The producer's or the broker's answer to a record over its size limit: sending it again cannot help.
TOO_LARGE: Final = (MessageSizeTooLargeError, RecordListTooLargeError, RecordTooLargeError)


@dataclass(frozen=True, slots=True)
class Failed:
    """Handling gave up on a record: it goes to the dead-letter topic."""

    error: Exception
    attempts: int
    reason: str


class Stopped:
    """The consumer was stopped during a backoff: the record is neither handled nor dead-lettered."""


STOPPED: Final = Stopped()

Pause = Callable[[float], Awaitable[bool]]
"""Waits out a backoff of so many seconds; True when the consumer is stopping meanwhile."""


async def sleep(delay_s: float) -> bool:
    """A `Pause` for a consumer that is not stopped while it waits (its task is cancelled instead)."""
    await asyncio.sleep(delay_s)
    return False


async def retry_failed(
    error: Exception,
    handle: Callable[[], Awaitable[None]],
    retry: RetryPolicy,
    *,
    where: str,
    pause: Pause = sleep,
) -> Failed | Stopped | None:
    """After a first failure with ``error``, try ``handle`` again while ``retry`` allows it.

    None once a try succeeds; `Failed` when the error is not retriable or the tries are used up;
    ``STOPPED`` when ``pause`` reports that the consumer is stopping. Called only after a failure, so a
    record handled at the first try costs its consumer nothing here.
    """
    failures = 1
    while True:
        retriable = is_retriable(error)
        if not retry.should_retry(failures, retriable):
            return Failed(error, failures, RETRIES_EXHAUSTED if retriable else HANDLER)
        delay = retry.backoff_s(failures)
        log.warning(
            "retriable error handling %s (attempt %d, %.1fs of %.0fs waited), retrying in %.2fs: %r",
            where,
            failures,
            retry.waited_s(failures),
            retry.ride_out_s,
            delay,
            error,
        )
        if await pause(delay):
            return STOPPED
        try:
            await handle()
            return None
        except Exception as exc:
            failures += 1
            error = exc


SendRaw = Callable[[str, bytes | None, bytes, Headers], Awaitable[object]]
"""Sends encoded bytes to a topic (topic, key, value, headers) and returns once acknowledged."""


async def dead_letter(
    record: ConsumedRecord,
    error: BaseException,
    *,
    attempts: int,
    reason: str,
    consumer: str,
    send: SendRaw,
    retry: RetryPolicy,
    metrics: BusMetrics,
    dlq_for: Callable[[str], str] = dlq_topic,
) -> None:
    """Copy ``record`` (key, value, headers) to its dead-letter topic with ``dlq-*`` headers saying why.

    The headers name the ``consumer`` (its group, or faust app id) that gave up on it. Returns only once
    the copy is acknowledged: a caller commits past the record only then. A broker
    error is retried by ``retry``; one that outlasts it propagates.
    """
    target = dlq_for(record.topic)
    headers = dead_letter_headers(
        record.headers,
        error=error,
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        attempts=attempts,
        reason=reason,
        consumer=consumer,
    )
    log.error(
        "%s dead-lettering %s[%d]@%d to %s (%s): %r",
        consumer,
        record.topic,
        record.partition,
        record.offset,
        target,
        reason,
        error,
    )
    value = record.value or b""
    failures = 0
    while True:
        try:
            await send(target, record.key, value, headers)
            break
        except TOO_LARGE as exc:
            if not value:
                raise
            # A record the broker took but the dead-letter copy cannot carry (limits differ between
            # producers, or the headers tipped it over): raising would stop the consumer on it at every
            # restart. The letter keeps the key, the reason and where the original still lies.
            log.error(
                "dead letter of %s[%d]@%d too large (%r): sent without its value",
                record.topic,
                record.partition,
                record.offset,
                exc,
            )
            headers = set_headers(headers, {DLQ_VALUE_DROPPED: str(len(value)).encode()})
            value = b""
        except KafkaError as exc:
            failures += 1
            if not retry.should_retry(failures, is_retriable(exc)):
                raise
            await asyncio.sleep(retry.backoff_s(failures))
    metrics.dead_lettered(record.topic, reason)
