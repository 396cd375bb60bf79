"""Which failures are worth retrying, and which go straight to the dead-letter topic."""

from __future__ import annotations

from suanli.infra.transient import RetriableError, is_transient

__all__ = ["BusClosedError", "RetriableError", "is_retriable"]


class BusClosedError(RuntimeError):
    """The publisher or consumer was used before ``start()`` or after ``stop()``."""


def is_retriable(exc: BaseException) -> bool:
    """Whether the bus retries a handler's failure: the kernel's one classification of transient errors."""
    return is_transient(exc)
