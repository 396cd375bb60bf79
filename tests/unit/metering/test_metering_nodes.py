"""Per-node state: stale snapshots, placements held and released, rating placements, republishing."""

from __future__ import annotations

import pytest

from suanli.metering.domain import (
    DeviceShare,
    MeteringPolicy,
    NodeAllocation,
    NodeStatus,
    PlacementError,
    newest_per_node,
    on_placed,
    on_preempted,
    on_snapshot,
)
from suanli.metering.testing import gpu, ms, node_snapshot
from suanli.resources import default_catalogue

CAT = default_catalogue()
T0 = ms("2025-01-01T10:00:00")
INTERVAL = 1_000


def snap(seq: int, at: int, tasks: tuple[str, ...] = ()) -> dict:
    return node_snapshot(
        "n1", at, sequence=seq, devices=[gpu(0), gpu(1)], task_ids=tasks, interval_ms=INTERVAL
    )


def placement(task: str, at: int, index: int = 0, milli: int = 500) -> NodeAllocation:
    return NodeAllocation(task, "job", 1, "n1", (DeviceShare(index, milli),), 1000, 512, 0, at)


def test_first_snapshot_publishes_capacity_and_ready() -> None:
    out = on_snapshot(None, snap(1, T0), received_at_ms=T0, catalogue=CAT)
    assert out.capacity is not None and out.capacity.total.gpu_count == 2
    assert out.status is not None and out.status.status is NodeStatus.READY


@pytest.mark.parametrize(
    ("seq", "offset", "stale"), [(1, 0, True), (0, -5, True), (2, 0, False), (0, 10, False)]
)
def test_stale_or_duplicate_snapshots_change_nothing(seq: int, offset: int, stale: bool) -> None:
    state = on_snapshot(None, snap(1, T0), received_at_ms=T0, catalogue=CAT).state
    out = on_snapshot(state, snap(seq, T0 + offset), received_at_ms=T0 + 1, catalogue=CAT)
    assert out.stale is stale
    if stale:
        assert out.state == state


def test_unchanged_view_is_not_republished_until_due() -> None:
    policy = MeteringPolicy(republish_after_ms=10_000)
    state = on_snapshot(None, snap(1, T0), received_at_ms=T0, catalogue=CAT, policy=policy).state
    again = on_snapshot(state, snap(2, T0 + 1000), received_at_ms=T0 + 1000, catalogue=CAT, policy=policy)
    assert again.capacity is None and again.status is None
    due = on_snapshot(
        again.state, snap(3, T0 + 10_000), received_at_ms=T0 + 10_000, catalogue=CAT, policy=policy
    )
    assert due.capacity is not None


def test_placement_before_any_snapshot_is_rated_when_the_node_reports() -> None:
    state, placed = on_placed(None, placement("t1", T0), catalogue=CAT)
    assert placed is None
    out = on_snapshot(state, snap(1, T0 + 100, ("t1",)), received_at_ms=T0 + 100, catalogue=CAT)
    assert [p.task_id for p in out.placed] == ["t1"]
    assert out.placed[0].allocation.devices[0].cu == pytest.approx(989.5 / 2)
    assert out.capacity is not None and out.capacity.used.gpu_milli == 500
    assert [s.task_id for s in out.seen] == ["t1"]
    # Rated once: the next snapshot does not hand it to the task meter again.
    assert (
        on_snapshot(out.state, snap(2, T0 + 200, ("t1",)), received_at_ms=T0 + 200, catalogue=CAT).placed
        == ()
    )


def test_placement_rated_late_is_charged_even_though_it_no_longer_holds_room() -> None:
    # Metering learnt of the node only after the task had run and gone (a restart, a lost table):
    # the placement holds nothing any more, but its charge is still owed.
    state, placed = on_placed(None, placement("t1", T0), catalogue=CAT)
    assert placed is None
    out = on_snapshot(state, snap(1, T0 + 60_000), received_at_ms=T0 + 60_000, catalogue=CAT)
    assert [p.task_id for p in out.placed] == ["t1"]
    assert out.capacity is not None and out.capacity.used.gpu_milli == 0
    assert out.state.placements == () and out.state.forwarded == ()


def test_placement_is_released_when_the_node_stops_listing_it() -> None:
    state = on_snapshot(None, snap(1, T0), received_at_ms=T0, catalogue=CAT).state
    state, placed = on_placed(state, placement("t1", T0 + 10), catalogue=CAT)
    assert placed is not None
    # Not yet listed but recent: still held (the agent may not have started it).
    out = on_snapshot(state, snap(2, T0 + 1000), received_at_ms=T0 + 1000, catalogue=CAT)
    assert out.capacity is not None and out.capacity.used.gpu_milli == 500
    out = on_snapshot(out.state, snap(3, T0 + 5000), received_at_ms=T0 + 5000, catalogue=CAT)
    assert out.capacity is not None and out.capacity.used.gpu_milli == 0


def test_preemption_releases_at_once() -> None:
    state = on_snapshot(None, snap(1, T0), received_at_ms=T0, catalogue=CAT).state
    state, _ = on_placed(state, placement("t1", T0), catalogue=CAT)
    state = on_preempted(state, "t1", 1)
    assert state is not None and state.placements == ()


@pytest.mark.parametrize(("index", "milli"), [(5, 500), (0, 0), (0, 1001)])
def test_impossible_placement_is_refused(index: int, milli: int) -> None:
    state = on_snapshot(None, snap(1, T0), received_at_ms=T0, catalogue=CAT).state
    with pytest.raises(PlacementError):
        on_placed(state, placement("t1", T0, index, milli), catalogue=CAT)


def test_impossible_pending_placement_is_rejected_not_counted() -> None:
    state, _ = on_placed(None, placement("t1", T0, index=9), catalogue=CAT)
    out = on_snapshot(state, snap(1, T0 + 10, ("t1",)), received_at_ms=T0 + 10, catalogue=CAT)
    assert [a.task_id for a, _ in out.rejected] == ["t1"]
    assert out.capacity is not None and out.capacity.used.cpu_milli == 0


def test_running_tasks_are_forwarded_as_evidence_once_per_window() -> None:
    out = on_snapshot(None, snap(1, T0 + 1000, ("a",)), received_at_ms=T0, catalogue=CAT)
    assert [s.task_id for s in out.seen] == ["a"]
    out = on_snapshot(out.state, snap(2, T0 + 2000, ("a", "b")), received_at_ms=T0, catalogue=CAT)
    assert [s.task_id for s in out.seen] == ["b"]
    out = on_snapshot(out.state, snap(3, T0 + 61_000, ("a", "b")), received_at_ms=T0, catalogue=CAT)
    assert [(s.task_id, s.at_ms) for s in out.seen] == [("a", T0 + 61_000), ("b", T0 + 61_000)]


def test_of_snapshots_read_together_each_nodes_newest_by_its_own_clock_is_kept() -> None:
    batch = [
        node_snapshot("n1", T0, sequence=7),
        node_snapshot("n2", T0, sequence=1),
        node_snapshot("n1", T0 + 1000, sequence=1),  # its agent restarted: sequence reset, clock later
        node_snapshot("n2", T0 - 1000, sequence=0),  # older, read late
        node_snapshot("n2", T0, sequence=1),  # the same record again
    ]
    assert newest_per_node(batch) == [2, 4]
    assert newest_per_node([]) == []
