"""When to believe that lost nodes are lost: the eviction guard.

A node is Lost when metering has heard nothing from it for a few intervals. When most of the fleet goes
silent at once, the likelier cause is the path between the nodes and us (the broker restarted, metering
stopped, a network partition) rather than the nodes themselves, and their tasks are most likely still
running. Evicting them then would start second copies of every task. Like Kubernetes' node lifecycle
controller, which performs no evictions when every zone is unhealthy, the scheduler holds evictions while
the lost fraction of the fleet is at or above a threshold, and resumes them as nodes report again.

A Lost node is a suspicion until it has been Lost for `confirm_after`: before that only preemptible jobs
are requeued from it (their lost attempts are told to stop, should the node be alive after all);
non-preemptible ones keep their room and are requeued once the loss is confirmed. Should the node report
again meanwhile, reconciliation decides from what it lists.

A Lost node is evicted only once it has been Lost in this view for `settle` (on the scheduler's clock,
from the sweep that first saw it): Lost statuses that were held up on the way (the broker unavailable,
metering stopped) arrive as one burst once the path heals, and without the wait the first of them was
judged before the rest had been read, as one node of a healthy fleet, and its jobs requeued although
every node was alive.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from suanli.clock import Clock
from suanli.scheduling.domain.jobs import lost_on
from suanli.scheduling.service_layer.capacity import CapacityView, NodeView
from suanli.scheduling.service_layer.commands import MarkNodeLost
from suanli.scheduling.service_layer.projection import Projection

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.75
DEFAULT_LOST_CONFIRM = timedelta(seconds=60)
DEFAULT_LOST_SETTLE = timedelta(seconds=2)


@dataclass(frozen=True, slots=True)
class EvictionVerdict:
    evict: tuple[NodeView, ...]
    held: tuple[NodeView, ...]
    lost: int
    known: int

    @property
    def disrupted(self) -> bool:
        return bool(self.held)


def lost_nodes_to_evict(nodes: Iterable[NodeView], threshold: float = DEFAULT_THRESHOLD) -> EvictionVerdict:
    """Split the Lost nodes into those whose tasks may be requeued and those held back.

    Only nodes that have reported capacity count as the fleet; a fleet of one node is never "disrupted",
    since there is no majority to compare with.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"disruption threshold must be in (0, 1], got {threshold}")
    fleet = [n for n in nodes if n.has_capacity]
    lost = tuple(n for n in fleet if n.status == "LOST")
    if len(fleet) > 1 and len(lost) >= threshold * len(fleet):
        return EvictionVerdict((), lost, len(lost), len(fleet))
    return EvictionVerdict(lost, (), len(lost), len(fleet))


class LostNodeEvictions:
    """Requeues the tasks of Lost nodes (before each cycle), unless the guard holds evictions back."""

    def __init__(
        self,
        capacity: CapacityView,
        projection: Projection,
        mark_lost: Callable[[MarkNodeLost], Awaitable[Any]],
        *,
        clock: Clock,
        threshold: float = DEFAULT_THRESHOLD,
        confirm_after: timedelta = DEFAULT_LOST_CONFIRM,
        settle: timedelta = DEFAULT_LOST_SETTLE,
    ) -> None:
        self._capacity = capacity
        self._projection = projection
        self._mark_lost = mark_lost
        self._clock = clock
        self._threshold = threshold
        self._confirm_after = confirm_after
        self._settle = settle
        self._held = False
        # Each Lost node's episode (its status time) and when a sweep first saw it.
        self._seen: dict[str, tuple[datetime | None, datetime]] = {}

    async def sweep(self) -> None:
        verdict = lost_nodes_to_evict(self._capacity.nodes.values(), self._threshold)
        if verdict.disrupted != self._held:
            self._held = verdict.disrupted
            if verdict.disrupted:
                log.warning(
                    "%d of %d nodes are Lost at once: holding evictions (disruption threshold %.2f)",
                    verdict.lost,
                    verdict.known,
                    self._threshold,
                )
            else:
                log.info("evictions resumed: %d of %d nodes Lost", verdict.lost, verdict.known)
        now = self._clock.now()
        lost = (*verdict.evict, *verdict.held)
        self._seen = {
            v.id: seen
            if (seen := self._seen.get(v.id)) is not None and seen[0] == v.status_at
            else (v.status_at, now)
            for v in lost
        }
        for view in verdict.evict:
            if now - self._seen[view.id][1] < self._settle:
                continue  # the rest of a burst may still be on its way: judged at a later sweep
            lost_at = view.status_at or now
            confirmed = now - lost_at >= self._confirm_after
            jobs = self._projection.live.values()
            if any(lost_on(j, view.id, lost_at, confirmed=confirmed) for j in jobs):
                await self._mark_lost(MarkNodeLost(view.id, lost_at, confirmed))
