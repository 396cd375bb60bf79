"""Resolve metrics: resolves by kind and outcome (tallied, observed at collection) and their latency."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from suanli.routing.adapters.metrics import ResolveMetrics
from suanli.telemetry.names import ROUTING_RESOLVE_LATENCY, ROUTING_RESOLVES


def test_resolves_are_counted_by_kind_and_outcome_and_timed() -> None:
    reader = InMemoryMetricReader()
    metrics = ResolveMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    for kind, outcome in [("training", "routed")] * 3 + [("inference", "none"), ("unknown", "invalid")]:
        metrics.resolved(kind, outcome, 0.0005)
    data = reader.get_metrics_data()
    assert data is not None
    found = {m.name: m.data for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    counts = {
        (p.attributes["kind"], p.attributes["outcome"]): p.value for p in found[ROUTING_RESOLVES].data_points
    }
    assert counts == {("training", "routed"): 3, ("inference", "none"): 1, ("unknown", "invalid"): 1}
    assert found[ROUTING_RESOLVES].is_monotonic
    (latency,) = found[ROUTING_RESOLVE_LATENCY].data_points
    assert latency.count == 5
    metrics.resolved("training", "routed", 0.001)
    again = reader.get_metrics_data()
    assert again is not None
    points = [
        p
        for rm in again.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == ROUTING_RESOLVES
        for p in m.data.data_points
    ]
    assert {(p.attributes["kind"], p.attributes["outcome"]): p.value for p in points}[
        ("training", "routed")
    ] == 4
