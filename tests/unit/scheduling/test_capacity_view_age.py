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


def test_the_schedulable_nodes_are_the_same_tuple_until_a_record_changes_a_view() -> None:
    view = CapacityView()
    view.on_capacity(CAPACITY)
    view.on_capacity({**CAPACITY, "node_id": "n2"})
    listed = view.schedulable()
    assert [n.id for n in listed] == ["n1", "n2"]
    view.on_capacity(CAPACITY)  # republished unchanged (metering republishes when due)
    view.on_snapshot({"node_id": "n1", "labels": {}})
    assert view.schedulable() is listed  # what a cycle carries for this tuple stays valid
    view.on_status({"node_id": "n2", "status": "LOST"})
    assert [n.id for n in view.schedulable()] == ["n1"]
    view.on_status({"node_id": "n2", "status": "READY"})
    again = view.schedulable()
    assert [n.id for n in again] == ["n1", "n2"] and again is not listed
    assert again[0] is listed[0]  # an unchanged node is handed out as the same object
    view.on_capacity({**CAPACITY, "allocatable": {"cpu_milli": 4000, "memory_mib": 32768}})
    assert view.schedulable()[0].cpu_milli == 4000
