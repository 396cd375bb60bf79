"""Lost attempts a requeued job waits for, so that two attempts of a task never run side by side.

A node declared LOST may be alive after all (a starved agent, a broker that restarted empty): the commit
that requeues its tasks also sends each lost attempt a stop order, but the next attempt, placed on another
node, could start before the old node's agent reads that order. So the job waits (pending reason
``WAITING_FOR_LOST_ATTEMPT``) until every attempt it lost is known to have ended: the old node's agent
reported that attempt's end (TaskFinished or TaskFailed of that attempt), or ``fence`` has passed since
the stop order. By then an agent cut off from the platform has stopped its tasks by itself (its
self-fencing timeout, `SUANLI_AGENT_SELF_FENCE_S`, must not exceed the scheduler's
`SUANLI_SCHEDULING_LOST_FENCE_S`); a node that is really gone simply costs the fence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WAITING_FOR_LOST_ATTEMPT = "WAITING_FOR_LOST_ATTEMPT"
DEFAULT_LOST_FENCE = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class LostAttempt:
    """An attempt taken for lost and told to stop, whose end its node has not reported yet."""

    task_id: str
    node_id: str
    attempt: int
    stop_sent_at: datetime

    def fenced_until(self, fence: timedelta) -> datetime:
        """When the attempt counts as stopped without a report (its agent has fenced itself by then)."""
        return self.stop_sent_at + fence


def outstanding(lost: Sequence[LostAttempt], now: datetime, fence: timedelta) -> tuple[LostAttempt, ...]:
    """The lost attempts the job still waits for at ``now``."""
    return tuple(a for a in lost if now < a.fenced_until(fence))


def waiting_reason(waiting: Sequence[LostAttempt], fence: timedelta) -> dict[str, object]:
    """The pending reason of a job held for its lost attempts (``waiting`` is not empty)."""
    first = min(waiting, key=lambda a: a.fenced_until(fence))
    until = max(a.fenced_until(fence) for a in waiting)
    more = f" and {len(waiting) - 1} more" if len(waiting) > 1 else ""
    message = (
        f"attempt {first.attempt} of task {first.task_id} on lost node {first.node_id}{more} has not "
        f"reported its end; the next attempt starts when it does, at the latest at "
        f"{until.isoformat(timespec='seconds')} (the lost node has stopped it by itself then)"
    )
    return {
        "code": WAITING_FOR_LOST_ATTEMPT,
        "message": message,
        "tasks": [a.task_id for a in waiting],
        "nodes": sorted({a.node_id for a in waiting}),
        "until": until.isoformat(),
    }
