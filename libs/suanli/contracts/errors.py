"""Typed errors of the contracts package.

Consumers route a bad event to its dead-letter topic with a reason (ARCHITECTURE §2.5), so every failure
carries a short, stable ``reason`` code fit for a header, and no fastavro or struct error escapes the codec.
"""

from __future__ import annotations


class ContractError(Exception):
    """Base of every error raised by ``suanli.contracts``."""

    reason: str = "contract-error"
    # Retrying the same bytes or the same record can never succeed; callers dead-letter instead.
    retriable: bool = False


class CatalogueError(ContractError):
    """The schema directory itself is broken (bad JSON, misnamed file, version clash, ...)."""

    reason = "bad-catalogue"


class UnknownEventError(ContractError, KeyError):
    """An event name that has no schema in the repository."""

    reason = "unknown-event"

    def __init__(self, event_name: str) -> None:
        super().__init__(event_name)
        self.event_name = event_name

    def __str__(self) -> str:  # KeyError would quote the repr; say what happened instead.
        return f"no schema for event {self.event_name!r}"


class EventEncodeError(ContractError, ValueError):
    """A record does not match its event's current schema."""

    reason = "invalid-record"

    def __init__(self, event_name: str, message: str) -> None:
        super().__init__(f"{event_name}: {message}")
        self.event_name = event_name


class EventDecodeError(ContractError, ValueError):
    """Bytes that cannot be decoded into an event."""

    reason = "undecodable"


class UnknownSchemaError(EventDecodeError):
    """Well-formed header, but no schema version in the repository has this fingerprint."""

    reason = "unknown-schema"

    def __init__(self, fingerprint: bytes) -> None:
        super().__init__(f"no schema in the repository has fingerprint {fingerprint.hex()}")
        self.fingerprint = fingerprint


class CorruptEventError(EventDecodeError):
    """Bad magic, truncated, trailing or otherwise unreadable bytes."""

    reason = "corrupt"
