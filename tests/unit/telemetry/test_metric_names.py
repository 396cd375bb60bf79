"""Every catalogued metric, created as its kind with its unit, is served by the real Prometheus exporter
under its catalogued name (the capacity gauge's unit ``CU`` once made it ``suanli_capacity_cu_CU``)."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from suanli.telemetry import METRICS, MetricSpec

SUFFIXES = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_count", "_sum")}


def served(spec: MetricSpec) -> dict[str, set[str]]:
    """Sample name → its label names, as /metrics serves one observation of ``spec``'s instrument."""
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    meter = provider.get_meter("test")
    labels = {label: "x" for label in spec.labels}
    if spec.kind == "counter":
        meter.create_counter(spec.name, unit=spec.unit).add(1, labels)
    elif spec.kind == "gauge":
        meter.create_gauge(spec.name, unit=spec.unit).set(1, labels)
    else:
        meter.create_histogram(spec.name, unit=spec.unit).record(0.5, labels)
    try:
        text = generate_latest(registry).decode()
    finally:
        provider.shutdown()
    return {
        sample.name: set(sample.labels) - {"otel_scope_name", "otel_scope_version", "otel_scope_schema_url"}
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name != "target_info"
    }


@pytest.mark.parametrize("spec", METRICS, ids=lambda s: s.name)
def test_the_exporter_serves_the_catalogued_name_and_labels(spec: MetricSpec) -> None:
    samples = served(spec)
    expected = {spec.name + suffix for suffix in SUFFIXES[spec.kind]}
    assert set(samples) == expected
    for name, labels in samples.items():
        assert labels - {"le"} == set(spec.labels), name


def test_catalogued_names_are_unique_and_prefixed() -> None:
    names = [spec.name for spec in METRICS]
    assert len(names) == len(set(names))
    assert all(name.startswith("suanli_") for name in names)
