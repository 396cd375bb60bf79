"""The outbox relay's two catalogue metrics: rows waiting and the oldest one's age.

The state is per process, not per relay: a service replaces its relay after a failure, and the age must
keep growing across the replacements while nothing gets published. Both gauges are observed at scrape
time, so the age grows even while the relay hangs in a publish. One relay per process is what every
service runs; several (tests) share the state and the gauges show the last one's read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from opentelemetry import metrics

from suanli.eventstore.values import OutboxRecord
from suanli.telemetry.names import OUTBOX_OLDEST_AGE, OUTBOX_PENDING, described


class OutboxProgress:
    """What the relay's last read found: how many rows were waiting and when the oldest was written."""

    def __init__(self) -> None:
        self.pending = 0
        self.oldest: datetime | None = None

    def read(self, rows: Sequence[OutboxRecord]) -> None:
        """The relay's read of the oldest unpublished rows (at most its batch size) returned ``rows``."""
        self.pending = len(rows)
        self.oldest = rows[0].created_at if rows else None

    def caught_up(self) -> None:
        """A batch shorter than the limit was published: nothing older is waiting."""
        self.pending = 0
        self.oldest = None

    def age_s(self, now: datetime) -> float:
        """Seconds the oldest waiting row has waited at ``now``; 0 when nothing waits."""
        if self.oldest is None:
            return 0.0
        return max(0.0, (now - self.oldest).total_seconds())


PROGRESS = OutboxProgress()

_lock = threading.Lock()
# The meter provider the gauges were registered with: a process whose telemetry is set up again (tests)
# registers them with the new one.
_exported_to: object | None = None


def export(progress: OutboxProgress = PROGRESS) -> None:
    """Register the two gauges with the current meter provider, once per provider."""
    global _exported_to
    provider = metrics.get_meter_provider()
    with _lock:
        if _exported_to is provider:
            return
        _exported_to = provider
    meter = metrics.get_meter("suanli.eventstore")

    def pending(_: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(progress.pending)]

    def oldest(_: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [metrics.Observation(progress.age_s(datetime.now(UTC)))]

    for name, callback in ((OUTBOX_PENDING, pending), (OUTBOX_OLDEST_AGE, oldest)):
        meter.create_observable_gauge(name, callbacks=[callback], **described(name))
