"""Routing's instruments of the telemetry catalogue (suanli.telemetry.names)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from opentelemetry import metrics

from suanli.routing.domain.links import LinkState
from suanli.telemetry.names import (
    ROUTING_LINKS,
    ROUTING_RESOLVE_LATENCY,
    ROUTING_RESOLVES,
    ROUTING_VIEW_FRESHNESS,
    described,
)


class ResolveMetrics:
    """Resolves by kind and outcome, and their server-side latency.

    The resolves are tallied here and observed when metrics are collected: a counter's ``add`` with
    attributes costs several microseconds a call, more than writing the answer.
    """

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.routing")
        self._tally: Counter[tuple[str, str]] = Counter()
        meter.create_observable_counter(
            ROUTING_RESOLVES,
            callbacks=[self._observe],
            **described(ROUTING_RESOLVES),
        )
        self._latency = meter.create_histogram(
            ROUTING_RESOLVE_LATENCY,
            **described(ROUTING_RESOLVE_LATENCY),
        )

    def resolved(self, kind: str, outcome: str, seconds: float) -> None:
        self._tally[(kind, outcome)] += 1
        self._latency.record(seconds)

    def _observe(self, options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        return [
            metrics.Observation(n, {"kind": kind, "outcome": outcome})
            for (kind, outcome), n in list(self._tally.items())
        ]


class ViewMetrics:
    """The processor's side: how fresh the view is, and its links by status."""

    def __init__(self, meter: metrics.Meter | None = None) -> None:
        meter = meter or metrics.get_meter("suanli.routing")
        self._freshness = meter.create_histogram(
            ROUTING_VIEW_FRESHNESS,
            **described(ROUTING_VIEW_FRESHNESS),
        )
        self._links = meter.create_gauge(
            ROUTING_LINKS,
            **described(ROUTING_LINKS),
        )
        self._seen: set[tuple[str, str]] = set()

    def fresh(self, seconds: float) -> None:
        self._freshness.record(max(0.0, seconds))

    def links(self, states: Iterable[LinkState]) -> None:
        counts = Counter((s.scope, s.status.value.lower()) for s in states)
        # Label sets that emptied report 0, so a panel does not keep showing a stale count.
        for scope, status in self._seen - counts.keys():
            self._links.set(0, {"scope": scope, "status": status})
        for (scope, status), n in counts.items():
            self._links.set(n, {"scope": scope, "status": status})
        self._seen |= counts.keys()
