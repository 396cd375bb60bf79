"""The network-view stream processor (faust): probe rounds in, full-state link views out.

Data flow::

    links.measured --> intake agent --> routing.probes --> view agent --> NetworkView --> network.links
    (by src_site)      decode, check;   (by region pair)   fold           (domain)        (compacted)
                       garbage -> links.measured.dlq                       timer: DOWN after silence,
                                                                            republish unchanged states

Re-keying by region pair gives one worker every site path of a pair, so its summary is whole whatever
the number of workers. The view is in memory: at start it is seeded from ``network.links`` (the view's
own full-state output, read whole before the worker joins its group), so a restarted processor keeps
each link's figures, baseline and status, and a link that went silent while it was down still goes DOWN.
Silence is judged per probe partition at how far it has been read (`StreamTimes`), so the backlog a
restarted or rebalanced worker reads through is not taken for silent paths.
A replayed probe round (no newer than the link's last) is ignored by the fold.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiokafka.partitioner import DefaultPartitioner

from suanli.bus.deadletter import DECODE, HANDLER, Failed, dead_letter, retry_failed
from suanli.bus.faust import arrived_batches, delivered, processor_app, traceparent_of
from suanli.bus.faust_reading import ReadPositions
from suanli.bus.headers import Headers
from suanli.bus.metrics import BusMetrics
from suanli.bus.retry import RetryPolicy
from suanli.clock import Clock, IdFactory, StreamTimes, to_ms
from suanli.contracts import EventDecodeError, decode, encode
from suanli.errors import InvalidArgument
from suanli.routing.adapters.metrics import ViewMetrics
from suanli.routing.domain.links import LinkState
from suanli.routing.domain.probes import occurred_ms, probe_from_record
from suanli.routing.domain.view import NetworkView
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.entrypoints.topics import PROBES, RoutingTopics
from suanli.routing.service_layer.records import EVENT, link_record
from suanli.telemetry import inject_headers
from suanli.telemetry.tracing import SpansPerTrace

log = logging.getLogger(__name__)
PRODUCER = "routing/network-view"
MEASURED = "LinkMeasured"

_RAW: dict[str, Any] = {
    "key_type": bytes,
    "value_type": bytes,
    "key_serializer": "raw",
    "value_serializer": "raw",
}


class NotAProbe(InvalidArgument):
    """A record on links.measured that decodes but is another event."""


class NetworkViewProcessor:
    """Builds the faust app; ``app`` is what a worker runs. Wired by `suanli.routing.bootstrap`."""

    def __init__(
        self,
        settings: RoutingSettings,
        view: NetworkView,
        *,
        clock: Clock,
        ids: IdFactory,
        metrics: ViewMetrics,
        retry: RetryPolicy,
        bus_metrics: BusMetrics,
    ) -> None:
        self.settings = settings
        self.view = view
        self.clock = clock
        self.ids = ids
        self.metrics = metrics
        self.retry = retry
        self.bus_metrics = bus_metrics
        self.names = RoutingTopics(settings.topic_prefix)
        # network.links is read back to its end offset at start-up: processor_app writes one record per
        # batch, which is what keeps that end offset right on Tansu.
        self.app = processor_app(
            settings.group_id,
            settings.bootstrap,
            partitions=PROBES.partitions,
            fetch_wait_ms=settings.fetch_wait_ms,
            metrics=bus_metrics,
        )
        self.measured = self.app.topic(self.names.measured, **_RAW)
        self.probes = self.app.topic(self.names.probes, **_RAW)
        self.links = self.app.topic(self.names.links, **_RAW)
        self._dlq: dict[str, Any] = {}
        self._partitioner = DefaultPartitioner()
        # The view agent and the timer both change the view and publish; one at a time keeps the order
        # of publications the order of the states.
        self._lock = asyncio.Lock()
        # Silence is judged per probe partition at how far it has been read: after a restart or a
        # rebalance the backlog of rounds is not mistaken for silent paths.
        self.streams = StreamTimes(started_ms=to_ms(clock.now()))
        self._judged: set[int] = set()  # the probe partitions the last check judged
        # How far the rounds have been read, against what the broker holds: no silence is judged in a
        # backlog, nor while the broker answers no fetch or has started over (`ReadPositions.heard`).
        self._read = ReadPositions(self.app, self.names.probes)
        self.app.agent(self.measured, name="routing.intake")(self._intake)
        self.app.agent(self.probes, name="routing.view")(self._fold)
        self.app.timer(settings.check_s, name="routing.check")(self._check)

    # -- agents ----------------------------------------------------------------------------------------

    async def _intake(self, stream: Any) -> AsyncIterator[None]:
        async for events in arrived_batches(stream, metrics=self.bus_metrics):
            with SpansPerTrace("routing.intake", attributes={"batch.records": len(events)}) as spans:
                for event in events:
                    with spans.scope(traceparent_of(event)):
                        await self._forward(event)
            yield None

    async def _forward(self, event: Any) -> None:
        value = event.message.value
        try:
            name, record = decode(value)
            if name != MEASURED:
                raise NotAProbe(f"{name} on {self.names.measured}: only {MEASURED} belongs here")
            probe = probe_from_record(record, occurred_ms(record["occurred_at"]))
            self.view.policy.refuse_future(probe.at_ms, to_ms(self.clock.now()))
        except EventDecodeError as exc:
            await self._dead_letter(event, exc, DECODE)
            return
        except InvalidArgument as exc:
            await self._dead_letter(event, exc, HANDLER)
            return
        key = f"{probe.src_region}->{probe.dst_region}".encode()
        # With the round's trace context, so the view's span (and the link changes) continue its trace.
        await self._send(self.probes, key, value, inject_headers())

    async def _fold(self, stream: Any) -> AsyncIterator[None]:
        async for events in arrived_batches(stream, metrics=self.bus_metrics):
            # One span per probe round's trace, a child of the round's span: the link changes it causes are
            # published inside it, so they continue that trace.
            with SpansPerTrace("routing.view", attributes={"batch.records": len(events)}) as spans:
                for event in events:
                    with spans.scope(traceparent_of(event)):
                        await self._fold_one(event)
            self._read.handled(events)
            yield None

    async def _fold_one(self, event: Any) -> None:
        _, record = decode(event.message.value)  # checked by the intake
        probe = probe_from_record(record, occurred_ms(record["occurred_at"]))
        async with self._lock:
            now = self.clock.now()
            self.streams.read(event.message.partition, probe.at_ms, to_ms(now))
            changed = self.view.observe(probe, to_ms(now))
            if changed:
                self.metrics.fresh((to_ms(now) - probe.at_ms) / 1000)
            await self._publish(changed)

    async def _check(self) -> None:
        async with self._lock:
            now = to_ms(self.clock.now())
            mine = self._assigned()
            if mine != self._judged:
                self._judged = mine
                self.streams.restart(now)
            time_of = self.streams.judge(now, self.view.quiet_ms(), self._read.behind(), self._read.heard())
            due = self.view.check(now, self._owned(mine), lambda pair: time_of(self._partition(pair)))
            await self._publish(due)
        self.metrics.links([*self.view.links.values(), *self.view.regions.values()])

    # -- output ----------------------------------------------------------------------------------------

    async def _publish(self, states: list[LinkState]) -> None:
        at = self.clock.now()
        for state in states:
            record = link_record(state, producer=PRODUCER, event_id=str(self.ids()), at=at)
            await self._send(self.links, state.link_id.encode(), encode(EVENT, record), inject_headers())

    async def _send(self, topic: Any, key: bytes, value: bytes, headers: Headers) -> None:
        async def once() -> None:
            await (await topic.send(key=key, value=value, headers=headers))

        try:
            await once()
        except Exception as exc:
            outcome = await retry_failed(exc, once, self.retry, where=f"send to {topic.get_topic_name()}")
            if isinstance(outcome, Failed):
                # Full state: the timer republishes every state within republish_s, which heals this.
                log.error("could not publish to %s: %r", topic.get_topic_name(), outcome.error)

    async def _dead_letter(self, event: Any, error: Exception, reason: str) -> None:
        await dead_letter(
            delivered(event),
            error,
            attempts=1,
            reason=reason,
            consumer=self.app.conf.id,
            send=self._send_raw,
            retry=self.retry,
            metrics=self.bus_metrics,
        )

    async def _send_raw(self, topic: str, key: bytes | None, value: bytes, headers: Headers) -> None:
        target = self._dlq.get(topic) or self._dlq.setdefault(topic, self.app.topic(topic, **_RAW))
        await (await target.send(key=key, value=value, headers=headers))

    # -- ownership -------------------------------------------------------------------------------------

    def _assigned(self) -> set[int]:
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == self.names.probes}

    def _owned(self, mine: set[int]) -> Callable[[tuple[str, str]], bool]:
        # With several workers each checks only the region pairs whose probe partitions it owns.
        if not mine:
            return lambda pair: False
        return lambda pair: self._partition(pair) in mine

    def _partition(self, pair: tuple[str, str]) -> int:
        """The routing.probes partition a region pair's rounds are keyed to (see ``_forward``)."""
        partitions = list(range(PROBES.partitions))
        return int(self._partitioner(f"{pair[0]}->{pair[1]}".encode(), partitions, partitions))
