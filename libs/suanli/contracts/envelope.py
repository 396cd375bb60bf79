"""The envelope every event starts with: ``event_id``, ``occurred_at``, ``producer``, ``subject_id``."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any


def new_envelope(
    producer: str, subject_id: str, *, event_id: str | uuid.UUID, occurred_at: dt.datetime
) -> dict[str, Any]:
    """Envelope fields for a new event, to be merged with the event's own fields.

    Pure: the id and the time come from the caller's id factory and clock (ARCHITECTURE §2.1), so a
    replayed decision produces identical events. The time is normalised to UTC and truncated to whole
    milliseconds — what ``timestamp-millis`` carries — so the record compares equal after a round trip.
    """
    if not producer:
        raise ValueError("producer must be non-empty")
    if not subject_id:
        raise ValueError("subject_id must be non-empty")
    if occurred_at.utcoffset() is None:
        raise ValueError("occurred_at must be timezone-aware (pass the injected clock's UTC time)")
    try:
        eid = event_id if isinstance(event_id, uuid.UUID) else uuid.UUID(event_id)
    except (ValueError, AttributeError, TypeError) as exc:
        raise ValueError(f"event_id must be a UUID, got {event_id!r}") from exc
    at = occurred_at.astimezone(dt.UTC)
    at = at.replace(microsecond=at.microsecond - at.microsecond % 1000)
    return {"event_id": str(eid), "occurred_at": at, "producer": producer, "subject_id": subject_id}
