"""The bus's path for failed records: retry by policy and classification, then dead-letter with reasons."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from aiokafka.errors import (
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)

from suanli.bus import RetriableError, RetryPolicy
from suanli.bus.deadletter import (
    DECODE,
    HANDLER,
    RETRIES_EXHAUSTED,
    STOPPED,
    Failed,
    dead_letter,
    retry_failed,
)
from suanli.bus.headers import (
    DLQ_ATTEMPTS,
    DLQ_CONSUMER,
    DLQ_ERROR_CLASS,
    DLQ_ORIGINAL_OFFSET,
    DLQ_ORIGINAL_PARTITION,
    DLQ_ORIGINAL_TOPIC,
    DLQ_VALUE_DROPPED,
    Headers,
    header,
)
from suanli.bus.metrics import BusMetrics

POLICY = RetryPolicy(max_attempts=4, initial_backoff_s=0.0, max_backoff_s=0.0)


class Flaky:
    """Fails with ``errors`` one after another, then succeeds."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> None:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


class Pauses:
    def __init__(self, stop_after: int | None = None) -> None:
        self.delays: list[float] = []
        self.stop_after = stop_after

    async def __call__(self, delay_s: float) -> bool:
        self.delays.append(delay_s)
        return self.stop_after is not None and len(self.delays) >= self.stop_after


async def test_a_retriable_failure_is_retried_until_a_try_passes() -> None:
    handle, pauses = Flaky(RetriableError("db restarting")), Pauses()
    policy = RetryPolicy(max_attempts=5, initial_backoff_s=0.1, multiplier=2.0, max_backoff_s=1.0)
    outcome = await retry_failed(RetriableError("first"), handle, policy, where="t[0]@1", pause=pauses)
    assert outcome is None
    assert handle.calls == 2
    assert pauses.delays == pytest.approx([0.1, 0.2])  # the policy's backoff before each retry


async def test_a_non_retriable_failure_is_given_up_at_once() -> None:
    handle = Flaky()
    error = ValueError("bad gpu count")
    outcome = await retry_failed(error, handle, POLICY, where="t[0]@1", pause=Pauses())
    assert outcome == Failed(error, 1, HANDLER)
    assert handle.calls == 0


async def test_retriable_failures_give_up_after_max_attempts() -> None:
    handle = Flaky(*(NotLeaderForPartitionError() for _ in range(10)))
    outcome = await retry_failed(NotLeaderForPartitionError(), handle, POLICY, where="t[0]@1", pause=Pauses())
    assert isinstance(outcome, Failed)
    assert (outcome.attempts, outcome.reason) == (POLICY.max_attempts, RETRIES_EXHAUSTED)
    assert handle.calls == POLICY.max_attempts - 1  # the first try was the caller's


async def test_a_retry_that_fails_differently_is_judged_by_its_own_error() -> None:
    handle = Flaky(RecordTooLargeError())
    outcome = await retry_failed(TimeoutError(), handle, POLICY, where="t[0]@1", pause=Pauses())
    assert isinstance(outcome, Failed)
    assert isinstance(outcome.error, RecordTooLargeError)
    assert (outcome.attempts, outcome.reason) == (2, HANDLER)


async def test_stopping_during_a_backoff_leaves_the_record_alone() -> None:
    handle = Flaky(TimeoutError(), TimeoutError())
    outcome = await retry_failed(TimeoutError(), handle, POLICY, where="t[0]@1", pause=Pauses(stop_after=2))
    assert outcome is STOPPED
    assert handle.calls == 1


@dataclass(frozen=True)
class Record:
    topic: str = "t.node.snapshots"
    partition: int = 3
    offset: int = 42
    key: bytes | None = b"node-1"
    value: bytes | None = b"not an event"
    headers: tuple[tuple[str, bytes], ...] = (("traceparent", b"00-abc-def-01"),)


class Broker:
    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.sent: list[tuple[str, bytes | None, bytes, Headers]] = []

    async def send(self, topic: str, key: bytes | None, value: bytes, headers: Headers) -> None:
        if self.errors:
            raise self.errors.pop(0)
        self.sent.append((topic, key, value, headers))


class Counted(BusMetrics):
    def __init__(self) -> None:
        super().__init__("group")
        self.counted: list[tuple[str, str]] = []

    def dead_lettered(self, topic: str, reason: str) -> None:
        self.counted.append((topic, reason))


async def _undecodable(broker: Broker, metrics: Counted) -> None:
    """`Record()` dead-lettered by metering as undecodable."""
    await dead_letter(
        Record(),
        ValueError("nope"),
        attempts=0,
        reason=DECODE,
        consumer="metering",
        send=broker.send,
        retry=POLICY,
        metrics=metrics,
    )


async def test_a_dead_letter_is_the_original_record_with_the_reason_in_headers() -> None:
    broker, metrics = Broker(), Counted()
    await _undecodable(broker, metrics)
    [(topic, key, value, headers)] = broker.sent
    assert (topic, key, value) == ("t.node.snapshots.dlq", b"node-1", b"not an event")
    assert header(headers, "traceparent") == "00-abc-def-01"
    assert header(headers, DLQ_ERROR_CLASS) == "builtins.ValueError"
    assert header(headers, DLQ_ORIGINAL_TOPIC) == "t.node.snapshots"
    assert (header(headers, DLQ_ORIGINAL_PARTITION), header(headers, DLQ_ORIGINAL_OFFSET)) == ("3", "42")
    assert header(headers, DLQ_ATTEMPTS) == "0"
    assert header(headers, DLQ_CONSUMER) == "metering"
    assert metrics.counted == [("t.node.snapshots", DECODE)]


async def test_a_tombstone_is_dead_lettered_as_an_empty_value_to_the_chosen_topic() -> None:
    broker = Broker()
    await dead_letter(
        Record(value=None),
        ValueError("nope"),
        attempts=1,
        reason=HANDLER,
        consumer="c",
        send=broker.send,
        retry=POLICY,
        metrics=Counted(),
        dlq_for=lambda topic: f"{topic}.parked",
    )
    assert [(t, v) for t, _, v, _ in broker.sent] == [("t.node.snapshots.parked", b"")]


async def test_a_broker_error_while_dead_lettering_is_retried_then_raised() -> None:
    broker, metrics = Broker(NotLeaderForPartitionError()), Counted()
    await _undecodable(broker, metrics)
    assert len(broker.sent) == 1 and len(metrics.counted) == 1

    broker, metrics = Broker(TopicAuthorizationFailedError()), Counted()
    with pytest.raises(TopicAuthorizationFailedError):
        await _undecodable(broker, metrics)
    assert not broker.sent and not metrics.counted  # never counted as dead-lettered when it is not


@pytest.mark.parametrize("refusal", [MessageSizeTooLargeError(), RecordTooLargeError()])
async def test_a_record_too_large_to_copy_is_dead_lettered_without_its_value(refusal: Exception) -> None:
    # Raising here stopped the consumer on the same record after every restart (a wedged partition).
    broker, metrics = Broker(refusal), Counted()
    await _undecodable(broker, metrics)
    [(topic, key, value, headers)] = broker.sent
    assert (topic, key, value) == ("t.node.snapshots.dlq", b"node-1", b"")
    assert header(headers, DLQ_VALUE_DROPPED) == str(len(b"not an event"))
    assert (header(headers, DLQ_ORIGINAL_TOPIC), header(headers, DLQ_ORIGINAL_OFFSET)) == (
        "t.node.snapshots",
        "42",
    )
    assert metrics.counted == [("t.node.snapshots", DECODE)]
