"""Which failures are worth retrying, and which go straight to the dead-letter topic."""

from __future__ import annotations

from aiokafka.errors import KafkaError, KafkaTimeoutError


class RetriableError(Exception):
    """Raise from a handler when the same record may succeed later (a dependency is briefly down)."""


class BusClosedError(RuntimeError):
    """The publisher or consumer was used before ``start()`` or after ``stop()``."""


def is_retriable(exc: BaseException) -> bool:
    """Handler-marked ``RetriableError``, aiokafka errors flagged ``retriable``, and timeouts."""
    # aiokafka leaves KafkaTimeoutError unflagged, but a handler's publish timing out is transient.
    if isinstance(exc, RetriableError | KafkaTimeoutError):
        return True
    if isinstance(exc, KafkaError):
        return bool(getattr(exc, "retriable", False))
    return isinstance(exc, TimeoutError | ConnectionError)
