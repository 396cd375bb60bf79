"""The capacity view's age (suanli_scheduler_capacity_view_age_seconds): seconds since any node record."""

from __future__ import annotations

from datetime import timedelta

from suanli.clock import ManualClock
from suanli.scheduling.service_layer.capacity import CapacityView

CAPACITY = {
    "node_id": "n1",
    "region": "r",
    "zone": "r-a",
    "allocatable": {"cpu_milli": 8000, "memory_mib": 32768},
    "devices": [],
}


def test_the_age_grows_between_records_and_restarts_with_each_kind_of_record() -> None:
    clock = ManualClock()
    view = CapacityView(clock)
    assert view.age_s() is None  # nothing heard yet: no value rather than a made-up one
    view.on_capacity(CAPACITY)
    clock.advance(timedelta(seconds=42))
    assert view.age_s() == 42.0
    view.on_status({"node_id": "n1", "status": "READY"})
    assert view.age_s() == 0.0
    clock.advance(timedelta(seconds=5))
    view.on_snapshot({"node_id": "n1", "labels": {}})
    clock.advance(timedelta(seconds=1))
    assert view.age_s() == 1.0


def test_a_view_without_a_clock_reports_no_age() -> None:
    view = CapacityView()
    view.on_capacity(CAPACITY)
    assert view.age_s() is None
