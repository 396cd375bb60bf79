"""One decision at a time on a current projection: the lock every writer of the scheduler takes.

Every decision reads the projection the previous commit produced, so deciding and committing are
serialised. Whoever holds the lock catches the projection up from the store first; a commit is caught up
right after, so the leader decides on exactly what is recorded. The group commit holds the lock for a
whole drain and asks `others_waiting` between batches, so a cancel or the interval cycle is let in after
the batch in progress rather than after the queue empties (asyncio's lock is fair).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from suanli.scheduling.service_layer.errors import NotLeader
from suanli.scheduling.service_layer.ports import Append, Writer
from suanli.scheduling.service_layer.projection import Projection


class WriteLock:
    def __init__(
        self, writer: Writer, projection: Projection, *, is_leader: Callable[[], bool] = lambda: True
    ) -> None:
        self._writer = writer
        self._projection = projection
        self._is_leader = is_leader
        self._lock = asyncio.Lock()
        self._waiters = 0  # turns asked for outside the group commit, not yet granted

    @property
    def lock(self) -> asyncio.Lock:
        """The lock itself, for the group commit's drainer (which counts as one long turn)."""
        return self._lock

    def others_waiting(self) -> bool:
        return self._waiters > 0

    def check_leader(self) -> None:
        if not self._is_leader():
            raise NotLeader("this scheduler is a standby; writes go to the leader")

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold the lock as the leader, on a projection caught up with the store."""
        self._waiters += 1  # seen by the group commit, which then hands the lock over
        try:
            await self._lock.acquire()
        finally:
            self._waiters -= 1
        try:
            self.check_leader()
            await self._writer.catch_up(self._projection)
            yield
        finally:
            self._lock.release()

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold every writer back (no leader check, no catch-up); a drain in progress finishes first."""
        async with self._lock:
            yield

    async def commit(
        self, appends: Sequence[Append], pending: Mapping[str, Mapping[str, Any] | None] | None = None
    ) -> None:
        """Record (within a turn) and catch the projection up with it."""
        await self._writer.commit(appends, pending)
        await self._writer.catch_up(self._projection)

    async def refresh(self) -> None:
        """Catch the projection up between writers (a newly elected leader rebuilding its state)."""
        async with self._lock:
            await self._writer.catch_up(self._projection)

    async def follow(self) -> None:
        """A standby's tail: the leader's events and its pending reasons."""
        await self.refresh()
        await self._writer.load_pending(self._projection)
