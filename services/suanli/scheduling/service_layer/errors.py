"""Errors the service layer raises; the gRPC entrypoint maps each to one status code."""

from __future__ import annotations


class ServiceError(Exception):
    pass


class NotLeader(ServiceError):
    """This instance is a standby (or lost its leadership): it does not write."""


class InvalidSpec(ServiceError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class JobNotFound(ServiceError):
    def __init__(self, job_id: str) -> None:
        super().__init__(f"job {job_id!r} not found")


class QueueNotFound(ServiceError):
    def __init__(self, name: str) -> None:
        super().__init__(f"queue {name!r} not found")


class Conflict(ServiceError):
    """The request contradicts an earlier one (same idempotency key, other spec)."""


class Precondition(ServiceError):
    """The job is not in a state that allows the request."""
