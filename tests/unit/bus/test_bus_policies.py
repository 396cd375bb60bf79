"""Retry backoff, retriable classification and the headers the bus writes."""

from __future__ import annotations

import pytest
from aiokafka.errors import KafkaTimeoutError, NotLeaderForPartitionError, RecordTooLargeError

from suanli.bus import SERVICE_RETRY, RetriableError, RetryPolicy, is_retriable
from suanli.bus.headers import (
    DLQ_ATTEMPTS,
    DLQ_CONSUMER,
    DLQ_ERROR_CLASS,
    DLQ_ERROR_MESSAGE,
    DLQ_HEADERS,
    DLQ_ORIGINAL_OFFSET,
    DLQ_ORIGINAL_PARTITION,
    DLQ_ORIGINAL_TOPIC,
    DLQ_REASON,
    MAX_ERROR_MESSAGE_BYTES,
    dead_letter_headers,
    header,
    set_headers,
)


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(max_attempts=6, initial_backoff_s=0.1, multiplier=2.0, max_backoff_s=0.5)
    assert [policy.backoff_s(n) for n in range(1, 6)] == pytest.approx([0.1, 0.2, 0.4, 0.5, 0.5])
    assert policy.backoff_s(0) == 0.0


def test_retries_stop_at_max_attempts_and_never_for_non_retriable_errors() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert [policy.should_retry(n, True) for n in (1, 2, 3)] == [True, True, False]
    assert not policy.should_retry(1, False)
    assert not RetryPolicy(max_attempts=1).should_retry(1, True)


def test_a_dependency_that_is_away_is_ridden_out_then_given_up_on() -> None:
    policy = RetryPolicy(
        max_attempts=3, initial_backoff_s=1.0, multiplier=2.0, max_backoff_s=4.0, ride_out_s=20.0
    )
    # waited before each failure: 0, 1, 3, 7, 11, 15, 19, 23 s
    assert [policy.waited_s(n) for n in range(1, 9)] == [0, 1, 3, 7, 11, 15, 19, 23]
    assert [policy.should_retry(n, True) for n in range(1, 9)] == [True] * 7 + [False]
    assert not policy.should_retry(1, False)  # a bad record never waits for the dependency


def test_services_ride_out_two_minutes_of_a_dependency_restarting() -> None:
    tries = next(n for n in range(1, 1000) if not SERVICE_RETRY.should_retry(n, True))
    assert SERVICE_RETRY.waited_s(tries) >= 120.0
    assert SERVICE_RETRY.waited_s(tries) < 120.0 + SERVICE_RETRY.max_backoff_s + 1e-9


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_attempts": 0},
        {"initial_backoff_s": -1.0},
        {"multiplier": 0.5},
        {"ride_out_s": -1.0},
        {"ride_out_s": 5.0, "max_backoff_s": 0.0},
        {"ride_out_s": 5.0, "initial_backoff_s": 0.0},
    ],
)
def test_nonsense_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_retriable_classification() -> None:
    assert is_retriable(RetriableError("db restarting"))
    assert is_retriable(NotLeaderForPartitionError())
    assert is_retriable(KafkaTimeoutError())
    assert is_retriable(TimeoutError())
    assert not is_retriable(RecordTooLargeError())
    assert not is_retriable(ValueError("bad quota"))
    assert not is_retriable(KeyError("tenant"))


def test_dead_letter_headers_keep_originals_and_say_why() -> None:
    original = [("traceparent", b"00-abc-def-01"), ("event-id", b"e-1"), (DLQ_ATTEMPTS, b"stale")]
    headers = dead_letter_headers(
        original,
        error=ValueError("bad gpu count"),
        topic="jobs.events",
        partition=3,
        offset=42,
        attempts=2,
        reason="handler",
        consumer="billing",
    )
    assert [name for name, _ in headers][:2] == ["traceparent", "event-id"]
    assert {name for name, _ in headers} >= set(DLQ_HEADERS)
    assert header(headers, DLQ_ERROR_CLASS) == "builtins.ValueError"
    assert header(headers, DLQ_ERROR_MESSAGE) == "bad gpu count"
    assert header(headers, DLQ_ORIGINAL_TOPIC) == "jobs.events"
    assert header(headers, DLQ_ORIGINAL_PARTITION) == "3"
    assert header(headers, DLQ_ORIGINAL_OFFSET) == "42"
    assert header(headers, DLQ_REASON) == "handler"
    assert header(headers, DLQ_CONSUMER) == "billing"
    # A record dead-lettered twice (replayed, failed again) must not carry two attempt counts.
    assert [v for n, v in headers if n == DLQ_ATTEMPTS] == [b"2"]


def test_dead_letter_error_message_is_bounded() -> None:
    headers = dead_letter_headers(
        None,
        error=RuntimeError("x" * 10_000),
        topic="t",
        partition=0,
        offset=0,
        attempts=1,
        reason="handler",
        consumer="c",
    )
    assert len(dict(headers)[DLQ_ERROR_MESSAGE]) == MAX_ERROR_MESSAGE_BYTES


def test_set_headers_replaces_without_duplicates() -> None:
    out = set_headers([("a", b"1"), ("event-id", b"old"), ("b", b"2")], {"event-id": b"new"})
    assert out == [("a", b"1"), ("b", b"2"), ("event-id", b"new")]
    assert header(out, "missing") is None
