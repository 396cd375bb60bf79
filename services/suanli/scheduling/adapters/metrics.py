"""The scheduler's metrics of the telemetry catalogue (suanli.telemetry.names), via OpenTelemetry."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from opentelemetry import metrics

from suanli.telemetry.names import (
    PLACEMENT_LATENCY,
    SCHEDULER_CAPACITY_VIEW_AGE,
    SCHEDULER_CYCLE,
    SCHEDULER_DECISIONS,
    SCHEDULER_LEADER,
    SCHEDULER_NETWORK_VIEW_AGE,
    SCHEDULER_PENDING_JOBS,
    SCHEDULER_QUEUE_DEPTH,
)
from suanli.telemetry.names import described as spec


class OtelMetrics:
    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.scheduling")
        self._meter = meter

        self._depth = meter.create_gauge(SCHEDULER_QUEUE_DEPTH, **spec(SCHEDULER_QUEUE_DEPTH))
        self._pending = meter.create_gauge(SCHEDULER_PENDING_JOBS, **spec(SCHEDULER_PENDING_JOBS))
        self._decisions = meter.create_counter(SCHEDULER_DECISIONS, **spec(SCHEDULER_DECISIONS))
        self._cycle = meter.create_histogram(SCHEDULER_CYCLE, **spec(SCHEDULER_CYCLE))
        self._latency = meter.create_histogram(PLACEMENT_LATENCY, **spec(PLACEMENT_LATENCY))
        # Label sets seen before are reset to 0 when they drop out, so panels do not show stale values.
        self._seen_depth: set[str] = set()
        self._seen_pending: set[tuple[str, str]] = set()

    def cycle(
        self,
        seconds: float,
        placed: int,
        preempted: int,
        pending: Mapping[tuple[str, str], int],
        depth: Mapping[str, int],
    ) -> None:
        self._cycle.record(seconds)
        if placed:
            self._decisions.add(placed, {"outcome": "placed"})
        if preempted:
            self._decisions.add(preempted, {"outcome": "preempted"})
        for queue in self._seen_depth - depth.keys():
            self._depth.set(0, {"queue": queue})
        for queue, count in depth.items():
            self._depth.set(count, {"queue": queue})
        self._seen_depth |= depth.keys()
        for queue, reason in self._seen_pending - pending.keys():
            self._pending.set(0, {"queue": queue, "reason": reason})
        for (queue, reason), count in pending.items():
            self._pending.set(count, {"queue": queue, "reason": reason})
        self._seen_pending |= pending.keys()

    def placed(self, region: str, latency_s: float) -> None:
        self._latency.record(max(0.0, latency_s), {"region": region})

    def decision(self, outcome: str, count: int = 1) -> None:
        self._decisions.add(count, {"outcome": outcome})

    def watch_network(self, age_s: Callable[[], float | None]) -> None:
        """Export the network view's age, read at each scrape: it keeps growing while routing is down and
        the scheduler places from its last snapshot (nothing is exported before the first record)."""
        self._watch(SCHEDULER_NETWORK_VIEW_AGE, age_s)

    def watch_capacity(self, age_s: Callable[[], float | None]) -> None:
        """Export the capacity view's age, read at each scrape: it grows while metering and the agents are
        silent (a broker outage, metering down) and placement uses what it last heard."""
        self._watch(SCHEDULER_CAPACITY_VIEW_AGE, age_s)

    def watch_leader(self, is_leader: Callable[[], bool]) -> None:
        """Export 1 while this instance leads, 0 while it stands by: summed over instances, 0 means no
        scheduler places anything."""
        self._watch(SCHEDULER_LEADER, lambda: float(is_leader()))

    def _watch(self, name: str, value: Callable[[], float | None]) -> None:
        def observe(options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            current = value()
            return [] if current is None else [metrics.Observation(current)]

        self._meter.create_observable_gauge(name, callbacks=[observe], **spec(name))
