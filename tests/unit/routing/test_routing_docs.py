"""docs/routing.md names every metric routing exports (outline and Settings: tests/unit/architecture)."""

from __future__ import annotations

from pathlib import Path

from suanli.telemetry.names import METRICS

DOCS = Path(__file__).resolve().parents[3] / "docs" / "routing.md"


def test_the_docs_list_routings_metrics() -> None:
    text = DOCS.read_text()
    assert [m.name for m in METRICS if m.exporter == "routing" and f"`{m.name}" not in text] == []
