"""Node liveness as a pure function of when each node was last heard from and the stream's time now.

Which clock: a snapshot is heard at its Kafka record timestamp (the time the record entered the broker:
the producer's send time under CreateTime, the broker's under LogAppendTime), capped at metering's own
clock; never at the moment metering got round to processing it. "Now" for the timeout is the stream's
time (`suanli.clock.StreamClock`): the newest record timestamp consumed, so while metering works through
a backlog the deadline moves only as fast as the records it has read, and its own lag cannot make a live node
look silent. Only when no snapshot at all has been consumed for a whole timeout while metering itself
kept running (every node on the partition silent, or metering cut off from them) does the stream's time
follow the wall clock, less the lag last seen; a stall of metering's own (its checks late) restarts that
timeout, since what it has not read meanwhile may be its own backlog.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from suanli.metering.domain.ids import derived_id

DEFAULT_LOST_AFTER = 3


class NodeStatus(StrEnum):
    # Values are the Avro enum symbols of NodeStatusChanged.status.
    UNKNOWN = "UNKNOWN"
    READY = "READY"
    LOST = "LOST"
    DRAINING = "DRAINING"


@dataclass(frozen=True, slots=True)
class Liveness:
    node_id: str
    status: NodeStatus
    last_seen_at_ms: int  # occurred_at of the newest snapshot (the agent's clock), reported downstream
    received_at_ms: int  # the record timestamp of that snapshot (see above): the timeout runs from here
    interval_ms: int  # the agent's report interval

    def lost_at_ms(self, lost_after: int = DEFAULT_LOST_AFTER) -> int:
        return self.received_at_ms + lost_after * self.interval_ms


@dataclass(frozen=True, slots=True)
class StatusChange:
    node_id: str
    status: NodeStatus
    previous: NodeStatus | None
    reason: str
    last_seen_at_ms: int
    at_ms: int

    @property
    def event_id(self) -> str:
        # A transition is identified by what caused it: the status and the snapshot it is measured from.
        return derived_id("status", self.node_id, self.status.value, self.last_seen_at_ms)


def observe(
    prev: Liveness | None, node_id: str, *, occurred_at_ms: int, received_at_ms: int, interval_ms: int
) -> tuple[Liveness, StatusChange | None]:
    """A snapshot arrived: the node is Ready; a change is reported for a new node or one coming back."""
    seen = Liveness(node_id, NodeStatus.READY, occurred_at_ms, received_at_ms, interval_ms)
    if prev is not None:
        seen = replace(seen, last_seen_at_ms=max(prev.last_seen_at_ms, occurred_at_ms))
    if prev is not None and prev.status is NodeStatus.READY:
        return seen, None
    previous = prev.status if prev is not None else None
    reason = "first snapshot" if prev is None else f"snapshot received after {prev.status.value.lower()}"
    change = StatusChange(node_id, NodeStatus.READY, previous, reason, seen.last_seen_at_ms, received_at_ms)
    return seen, change


def check(
    node: Liveness, now_ms: int, *, lost_after: int = DEFAULT_LOST_AFTER
) -> tuple[Liveness, StatusChange | None]:
    """Lost once no snapshot arrived for ``lost_after`` report intervals."""
    if node.status is not NodeStatus.READY or now_ms < node.lost_at_ms(lost_after):
        return node, None
    change = StatusChange(
        node.node_id,
        NodeStatus.LOST,
        node.status,
        f"no snapshot for {lost_after} x {node.interval_ms} ms",
        node.last_seen_at_ms,
        # The moment the deadline passed, not when the timer noticed: the same inputs give the same event.
        node.lost_at_ms(lost_after),
    )
    return replace(node, status=NodeStatus.LOST), change


def sweep(
    nodes: Iterable[Liveness], now_ms: int, *, lost_after: int = DEFAULT_LOST_AFTER
) -> list[tuple[Liveness, StatusChange]]:
    """Every node that became Lost by ``now_ms``, with its new liveness."""
    changed = []
    for node in nodes:
        after, change = check(node, now_ms, lost_after=lost_after)
        if change is not None:
            changed.append((after, change))
    return changed
