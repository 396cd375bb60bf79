"""What a handler's exception becomes at the gRPC edge: its kind's status, UNAVAILABLE, or UNKNOWN."""

from __future__ import annotations

from typing import Any, cast

import asyncpg
import grpc
import pytest

from suanli import errors
from suanli.rpc import rpc_errors


class Aborted(Exception):
    pass


class Context:
    """Records the status a call was aborted with, and raises as grpc.aio's abort does."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    async def abort(self, code: grpc.StatusCode, details: str, trailing_metadata: Any = ()) -> None:
        self.code, self.details = code, details
        raise Aborted


async def answer(exc: Exception) -> Context:
    context = Context()
    with pytest.raises(Aborted):
        async with rpc_errors(cast(grpc.aio.ServicerContext, context)):
            raise exc
    return context


@pytest.mark.parametrize(
    "exc",
    [
        FileNotFoundError(2, "No such file or directory"),  # the database's Unix socket gone mid-restart
        asyncpg.CannotConnectNowError("the database system is starting up"),
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError(),
    ],
)
async def test_a_dependency_that_is_away_answers_unavailable(exc: Exception) -> None:
    context = await answer(exc)
    assert context.code is grpc.StatusCode.UNAVAILABLE
    assert context.details.startswith("a dependency of this service is unavailable, retry shortly")
    assert type(exc).__name__ in context.details


async def test_a_request_error_keeps_its_own_status() -> None:
    context = await answer(errors.NotFound("job 'j1' not found"))
    assert (context.code, context.details) == (grpc.StatusCode.NOT_FOUND, "job 'j1' not found")


async def test_a_bug_is_not_dressed_up_as_unavailable() -> None:
    with pytest.raises(KeyError):
        async with rpc_errors(cast(grpc.aio.ServicerContext, Context())):
            raise KeyError("tasks")
