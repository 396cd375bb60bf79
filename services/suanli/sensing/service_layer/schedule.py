"""When each node of a host reports: once per interval, on its own phase, as independent agents would.

A host of hundreds of simulated nodes that reported them all at the same instant would hand metering a
burst of hundreds of snapshots every interval, and the last of the burst would wait behind all the others.
Real agents start at different moments, so their reports are spread over the interval; the schedule does
the same for a fleet in one process: the nodes are dealt round-robin (in host order) into slices, and
slice ``k`` reports at ``k * interval / slices`` into every interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

# Reports closer together than this are taken in one wake-up: 200 nodes over 5 s is 100 wake-ups of 2
# nodes rather than 200 of one, and the publisher's linger still batches each wake-up's records.
DEFAULT_MIN_GAP_S = 0.05


class ReportSchedule:
    def __init__(
        self, node_ids: Sequence[str], interval_s: float, *, min_gap_s: float = DEFAULT_MIN_GAP_S
    ) -> None:
        if interval_s <= 0 or min_gap_s <= 0:
            raise ValueError(f"interval and gap must be positive: {interval_s}, {min_gap_s}")
        count = max(1, min(len(node_ids), math.floor(interval_s / min_gap_s)))
        self.slices: tuple[tuple[str, ...], ...] = tuple(tuple(node_ids[k::count]) for k in range(count))
        self.interval_s = interval_s
        self.tick_s = interval_s / count

    def slice(self, tick: int) -> tuple[str, ...]:
        """The nodes to report at tick ``tick`` (ticks are ``tick_s`` apart, counted from 0)."""
        return self.slices[tick % len(self.slices)]

    def phase_s(self, node_id: str) -> float:
        """Seconds into each interval at which the node reports."""
        for k, nodes in enumerate(self.slices):
            if node_id in nodes:
                return k * self.tick_s
        raise KeyError(node_id)
