"""The scheduler's own events as records to store: body, envelope (event id, time, producer, subject)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from suanli.clock import Clock, IdFactory
from suanli.contracts import new_envelope
from suanli.contracts.catalogue import EVENTS
from suanli.scheduling.domain.jobs import JobEvent, JobView, event_name, evolve, follow_ups
from suanli.scheduling.service_layer.payloads import body
from suanli.scheduling.service_layer.ports import Outgoing
from suanli.telemetry.tracing import TRACEPARENT, current_traceparent

_FOLLOW_UP_ROUNDS = 4


class Envelopes:
    def __init__(self, clock: Clock, ids: IdFactory, producer: str = "scheduling") -> None:
        self._clock = clock
        self._ids = ids
        self._producer = producer

    def event(self, event: JobEvent, metadata: Mapping[str, Any] | None = None) -> Outgoing:
        name, record = event_name(event), body(event)
        return self._outgoing(name, record, str(record[EVENTS[name].key]), metadata)

    def fact(self, name: str, record: Mapping[str, Any]) -> Outgoing:
        """A catalogued event that is not a job event (queue administration), about its key field."""
        return self._outgoing(name, record, str(record[EVENTS[name].key]), None)

    def events(self, events: Sequence[JobEvent]) -> list[Outgoing]:
        return [self.event(e) for e in events]

    def with_follow_ups(self, job: JobView, decisions: Sequence[JobEvent]) -> list[Outgoing]:
        """The decisions, then whatever they make necessary (stop siblings, requeue, finish), in order."""
        return self.followed_through(job, decisions)[0]

    def followed_through(self, job: JobView, decisions: Sequence[JobEvent]) -> tuple[list[Outgoing], JobView]:
        """`with_follow_ups`, and the job as those events leave it."""
        out: list[Outgoing] = []
        now = self._clock.now()
        batch = list(decisions)
        for _ in range(_FOLLOW_UP_ROUNDS):
            for decision in batch:
                out.append(self.event(decision))
                job = evolve(job, decision, job.version + 1, now)
            batch = follow_ups(job)
            if not batch:
                break
        return out, job

    def _outgoing(
        self, name: str, record: Mapping[str, Any], subject: str, metadata: Mapping[str, Any] | None
    ) -> Outgoing:
        event_id = self._ids()
        envelope = new_envelope(self._producer, subject, event_id=event_id, occurred_at=self._clock.now())
        # The trace of the command (or, in a cycle, of the job's submission) decided this event: stored
        # with it and its outbox row, so the record's consumers continue that trace.
        traceparent = current_traceparent()
        if traceparent is not None:
            metadata = {**(metadata or {}), TRACEPARENT: traceparent}
        return Outgoing(name, {**envelope, **record}, event_id, metadata or {})
