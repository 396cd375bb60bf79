"""The gateway's memory of unreachable replicas: per service, each forgotten after its time."""

from __future__ import annotations

from suanli.inference.gateway import Unreachable


def test_an_unreachable_replica_is_left_out_of_its_service_until_its_time_passes() -> None:
    now = [100.0]
    memory = Unreachable(10.0, monotonic=lambda: now[0])
    memory.add("svc-a", "svc-a-r2")
    now[0] += 4.0
    memory.add("svc-a", "svc-a-r1")
    assert memory.of("svc-a") == ["svc-a-r1", "svc-a-r2"]
    assert memory.of("svc-b") == []
    now[0] += 6.0  # r2's 10 s are over, r1 has 4 s left
    assert memory.of("svc-a") == ["svc-a-r1"]
    memory.add("svc-a", "svc-a-r1")  # failed again: remembered anew
    now[0] += 9.0
    assert memory.of("svc-a") == ["svc-a-r1"]
    now[0] += 1.0
    assert memory.of("svc-a") == []
