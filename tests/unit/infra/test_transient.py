"""One classification of transient failures: what a consumer or loop may retry, and what it may not."""

from __future__ import annotations

import asyncpg
import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, RecordTooLargeError

from suanli.bus import is_retriable
from suanli.infra.transient import RetriableError, is_transient


def _pg(cls: type[asyncpg.PostgresError]) -> asyncpg.PostgresError:
    return cls("server said so")


@pytest.mark.parametrize(
    "exc",
    [
        RetriableError("pricing down"),
        TimeoutError(),
        ConnectionRefusedError(),
        FileNotFoundError("/tmp/.s.PGSQL.5432"),
        OSError("Multiple exceptions: [Errno 111] Connect call failed"),
        KafkaTimeoutError(),
        KafkaConnectionError(),
        asyncpg.InterfaceError("connection is closed"),
        asyncpg.exceptions.InternalClientError("cannot switch to state 15; another operation is in progress"),
        _pg(asyncpg.ConnectionDoesNotExistError),
        _pg(asyncpg.CannotConnectNowError),
        _pg(asyncpg.AdminShutdownError),
        _pg(asyncpg.SerializationError),
        _pg(asyncpg.DeadlockDetectedError),
        _pg(asyncpg.TooManyConnectionsError),
    ],
    ids=lambda e: type(e).__name__,
)
def test_transient_failures_are_retried(exc: BaseException) -> None:
    assert is_transient(exc)
    assert is_retriable(exc), "the bus retries exactly what the kernel calls transient"


@pytest.mark.parametrize(
    "exc",
    [
        ValueError("bad record"),
        KeyError("job_id"),
        RecordTooLargeError(),
        _pg(asyncpg.UniqueViolationError),
        _pg(asyncpg.UndefinedTableError),
        _pg(asyncpg.InvalidTextRepresentationError),
    ],
    ids=lambda e: type(e).__name__,
)
def test_failures_of_the_input_or_the_code_are_not(exc: BaseException) -> None:
    assert not is_transient(exc)
    assert not is_retriable(exc)
