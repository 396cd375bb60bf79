"""Errors the service layer raises; each is one of the kernel's request kinds (`suanli.errors`), so a
gRPC server answers it with that kind's status (`suanli.rpc`)."""

from __future__ import annotations

from suanli.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unavailable,
)


class NotLeader(Unavailable):
    """This instance is a standby (or lost its leadership): it does not write."""


class InvalidSpec(InvalidArgument):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class JobNotFound(NotFound):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} not found")


class EvictedJob(JobNotFound):
    """The job is recorded but no longer in the projection (a finished job past the retention): its
    stream answers for it."""

    def __init__(self, job_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id


class QueueNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"queue {name!r} not found")


class Conflict(AlreadyExists):
    """The request contradicts an earlier one (same idempotency key, other spec)."""


class Precondition(FailedPrecondition):
    """The job is not in a state that allows the request."""
