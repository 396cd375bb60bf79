"""A replica's load report every interval: the loop simulated replicas and real ones' scrapers share.

Reports are full state (docs/inference.md), so a report that cannot be made or sent is skipped and the
next one heals it; the loop never ends on its own, only when its task is cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from suanli.contracts.load import ReplicaLoad

log = logging.getLogger(__name__)

ReportSink = Callable[[ReplicaLoad], Awaitable[None]]
#: The report now, or None when there is none this interval (a real server not answering yet).
ReportSource = Callable[[], Awaitable[ReplicaLoad | None]]


async def report_every(interval_s: float, source: ReportSource, sink: ReportSink, replica_id: str) -> None:
    """Send ``source``'s report to ``sink`` every ``interval_s``, the first at once, until cancelled."""
    loop = asyncio.get_running_loop()
    due = loop.time()
    while True:
        try:
            load = await source()
            if load is not None:
                await sink(load)
        except Exception:  # a report not made or lost is healed by the next one; the loop goes on
            log.warning("%s: load report not made or not sent", replica_id, exc_info=True)
        # Due times step from the start, so a slow report does not stretch the interval.
        due += interval_s
        await asyncio.sleep(max(0.0, due - loop.time()))
