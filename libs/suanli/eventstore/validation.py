"""Argument checks shared by the adapters, so both reject the same calls the same way."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.eventstore.errors import DuplicateEventId
from suanli.eventstore.values import NewEvent


def check_append(stream: str, expected_version: int, events: Sequence[NewEvent]) -> None:
    if not stream:
        raise ValueError("stream name must not be empty")
    if expected_version < 0:
        raise ValueError(f"expected_version must be >= 0 (0 = new stream), got {expected_version}")
    ids = [e.event_id for e in events]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1}, key=str)
        raise DuplicateEventId(repeated)
