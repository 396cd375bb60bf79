"""When the scheduling cycle runs: on a wake-up (a commit that may let a waiting job in, a capacity
change), and at least every `interval_s` regardless.

The running service also runs the cycle as the group commit's turn between batches (`turn_if_woken`):
under steady load the commit queue never empties, and a cycle waiting for the lock would wait behind
seconds of batches. A wake that turn already consumed needs no second cycle from the loop; the interval
still brings one.

Cycles that place start at least `min_gap_s` apart. A cycle costs little since it carries its books,
so under load the service ran one after nearly every batch: each placed a job or two, and every cycle's
placements are one more commit, one more relay batch and one more batch on `placements` and
`jobs.events` for the agents, metering, billing and serving to fetch and handle. On the 2-core bench
machine that extra work cost more latency than the earlier start saved (docs/BENCHMARKS.md, "The cycle
made cheap, then paced"). A job submitted to an idle scheduler is still placed at once: the gap only
holds a cycle back that would start within `min_gap_s` of the previous one that had a job to place (one
that found nothing commits nothing, and does not count).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from suanli.scheduling.service_layer.cycle_runner import CycleRunner
from suanli.scheduling.service_layer.errors import NotLeader

log = logging.getLogger(__name__)


def _never(exc: Exception) -> bool:
    return False


class CycleLoop:
    def __init__(self, runner: CycleRunner, interval_s: float, min_gap_s: float = 0.0) -> None:
        self._runner = runner
        self._interval_s = interval_s
        self._min_gap_s = min_gap_s
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Ask for a cycle soon."""
        self._wake.set()

    @property
    def woken(self) -> bool:
        """A cycle has been asked for and not run yet."""
        return self._wake.is_set()

    async def turn_if_woken(self) -> None:
        """The cycle as a turn of the holder of the write lock (the group commit between batches); a wake
        within the gap is left set, for a later turn or the loop."""
        if not self._wake.is_set() or self._runner.since_last_deciding() < self._min_gap_s:
            return
        self._wake.clear()
        try:
            await self._runner.run_locked()
        except Exception as exc:  # the loop retries it; the commands queued behind must still run
            log.warning("scheduling cycle between batches failed: %r", exc)
            self._wake.set()

    async def run(
        self,
        *,
        before_each: Callable[[], Awaitable[None]] | None = None,
        retry_if: Callable[[Exception], bool] = _never,
    ) -> None:
        """Cycle until this instance is no longer the leader. `before_each` runs on every wake-up and
        interval (the lost nodes' requeue); a failure that `retry_if` accepts is logged and retried
        after an interval, any other ends the loop."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._interval_s)
            early = self._min_gap_s - self._runner.since_last_deciding()
            if early > 0:  # a batch's own turn may run it meanwhile (and consume the wake)
                await asyncio.sleep(early)
            due = self._wake.is_set() or self._runner.since_last() >= self._interval_s
            self._wake.clear()
            try:
                if before_each is not None:
                    await before_each()
                if due:
                    await self._runner.run()
            except NotLeader:
                return
            except Exception as exc:
                if not retry_if(exc):
                    raise
                log.warning("scheduling cycle failed, retrying: %r", exc)
                await asyncio.sleep(self._interval_s)
