"""Liveness with an injected clock: Lost after 3 silent intervals, Ready again on the next snapshot."""

from __future__ import annotations

import pytest

from suanli.metering.domain import Liveness, NodeStatus, check, observe, sweep

INTERVAL = 1_000


def seen(at: int, prev: Liveness | None = None) -> Liveness:
    return observe(prev, "n1", occurred_at_ms=at - 5, received_at_ms=at, interval_ms=INTERVAL)[0]


@pytest.mark.parametrize(
    ("now", "status"),
    [(0, NodeStatus.READY), (2_999, NodeStatus.READY), (3_000, NodeStatus.LOST), (60_000, NodeStatus.LOST)],
)
def test_lost_exactly_after_three_intervals_of_silence(now: int, status: NodeStatus) -> None:
    after, change = check(seen(0), now)
    assert after.status is status
    assert (change is not None) == (status is NodeStatus.LOST)


def test_transitions_ready_lost_ready() -> None:
    first, change = observe(None, "n1", occurred_at_ms=995, received_at_ms=1_000, interval_ms=INTERVAL)
    assert change is not None and (change.status, change.previous) == (NodeStatus.READY, None)
    steady, change = observe(first, "n1", occurred_at_ms=1_995, received_at_ms=2_000, interval_ms=INTERVAL)
    assert change is None
    lost, change = check(steady, 5_500)
    assert change is not None
    assert (change.status, change.previous, change.at_ms, change.last_seen_at_ms) == (
        NodeStatus.LOST,
        NodeStatus.READY,
        5_000,
        1_995,
    )
    assert check(lost, 9_000)[1] is None  # reported once
    back, change = observe(lost, "n1", occurred_at_ms=8_995, received_at_ms=9_000, interval_ms=INTERVAL)
    assert back.status is NodeStatus.READY
    assert change is not None and (change.status, change.previous) == (NodeStatus.READY, NodeStatus.LOST)


def test_timeout_follows_each_nodes_own_interval_and_our_clock_not_theirs() -> None:
    slow = observe(None, "slow", occurred_at_ms=0, received_at_ms=0, interval_ms=10_000)[0]
    # The agent's clock is an hour behind; only our receive time matters.
    fast = observe(None, "fast", occurred_at_ms=-3_600_000, received_at_ms=0, interval_ms=1_000)[0]
    changed = sweep([slow, fast], 5_000)
    assert [c.node_id for _, c in changed] == ["fast"]


def test_change_ids_are_deterministic_and_distinct_per_transition() -> None:
    a = check(seen(0), 10_000)[1]
    b = check(seen(0), 20_000)[1]
    assert a is not None and b is not None and a.event_id == b.event_id
    back = observe(
        check(seen(0), 10_000)[0], "n1", occurred_at_ms=11_000, received_at_ms=11_000, interval_ms=INTERVAL
    )[1]
    assert back is not None and back.event_id != a.event_id
