"""The telemetry tests' fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from suanli.infra.testing import recorded_spans


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Every span the process ends from now on, kept in memory (no OTLP export)."""
    with recorded_spans("tests", monkeypatch) as exporter:
        yield exporter
