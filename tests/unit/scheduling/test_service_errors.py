"""The scheduling service's errors are kernel request kinds with the gRPC status each always had."""

from __future__ import annotations

import grpc
import pytest

from suanli.errors import RequestError
from suanli.rpc import status_of
from suanli.scheduling.service_layer.errors import (
    Conflict,
    InvalidSpec,
    JobNotFound,
    NotLeader,
    Precondition,
    QueueNotFound,
)


@pytest.mark.parametrize(
    ("error", "status", "message"),
    [
        (
            InvalidSpec("tasks[0].name", "is required"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "tasks[0].name: is required",
        ),
        (JobNotFound("j1"), grpc.StatusCode.NOT_FOUND, "job 'j1' not found"),
        (QueueNotFound("acme"), grpc.StatusCode.NOT_FOUND, "queue 'acme' not found"),
        (
            Conflict("request_id r1 names another job"),
            grpc.StatusCode.ALREADY_EXISTS,
            "request_id r1 names another job",
        ),
        (Precondition("job j1 is final"), grpc.StatusCode.FAILED_PRECONDITION, "job j1 is final"),
        (NotLeader("standby"), grpc.StatusCode.UNAVAILABLE, "standby"),
    ],
)
def test_each_error_keeps_its_status_and_message(
    error: RequestError, status: grpc.StatusCode, message: str
) -> None:
    assert isinstance(error, RequestError)
    assert status_of(error) is status
    assert str(error) == message


def test_invalid_spec_names_its_field() -> None:
    assert InvalidSpec("queue", "unknown").field == "queue"
