"""Argument checks shared by the adapters, so both reject the same calls the same way."""

from __future__ import annotations

from collections.abc import Sequence

from suanli.eventstore.errors import DuplicateEventId
from suanli.eventstore.values import NewEvent, StreamAppend


def check_append(stream: str, expected_version: int, events: Sequence[NewEvent]) -> None:
    """Refuse an append that no adapter should attempt (empty stream name, bad version, repeated ids)."""
    if not stream:
        raise ValueError("stream name must not be empty")
    if expected_version < 0:
        raise ValueError(f"expected_version must be >= 0 (0 = new stream), got {expected_version}")
    ids = [e.event_id for e in events]
    if len(set(ids)) != len(ids):
        repeated = sorted({i for i in ids if ids.count(i) > 1}, key=str)
        raise DuplicateEventId(repeated)


def check_batch(appends: Sequence[StreamAppend]) -> None:
    """Each append valid on its own, each stream once, no event id twice across the batch."""
    streams = [a.stream for a in appends]
    if len(set(streams)) != len(streams):
        repeated = sorted({s for s in streams if streams.count(s) > 1})
        raise ValueError(f"a batch appends to each stream once; repeated: {repeated}")
    for a in appends:
        check_append(a.stream, a.expected_version, a.events)
    ids = [e.event_id for a in appends for e in a.events]
    if len(set(ids)) != len(ids):
        repeated_ids = sorted({i for i in ids if ids.count(i) > 1}, key=str)
        raise DuplicateEventId(repeated_ids)
