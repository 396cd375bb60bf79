"""One active scheduler: the ``scheduler`` lease of the store's schema (`suanli.eventstore.lease`).

A standby takes the lease, with the next epoch, when it has run out or the holder's session is gone, so
a crash fails over within one poll and a paused or partitioned leader within one lease. The leader
renews it every ``ping_s`` on its own connection and steps down as soon as a renewal fails or does not
come back in time. Every write transaction is fenced by the epoch (``check``): a leader SIGSTOPped past
its lease and resumed commits nothing, and a write it was paused in is rolled back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from suanli.eventstore.lease import LeaseLost, PgLease
from suanli.infra.transient import is_transient
from suanli.scheduling.service_layer.errors import NotLeader

log = logging.getLogger(__name__)

LEASE = "scheduler"

Callback = Callable[[], Awaitable[None]]


class LeaderElection:
    def __init__(
        self, dsn: str, schema: str, *, poll_s: float = 0.5, ping_s: float = 1.0, lease_s: float = 10.0
    ) -> None:
        if lease_s < 3 * ping_s:
            raise ValueError(f"lease_s ({lease_s}) must be at least 3 x ping_s ({ping_s})")
        self._dsn = dsn
        self._lease = PgLease(schema, LEASE, lease_s=lease_s, poll_s=poll_s)
        self._poll_s = poll_s
        self._ping_s = ping_s
        self._pid: int | None = None
        self._epoch: int | None = None
        self.elected = asyncio.Event()
        self.terms = 0

    @property
    def is_leader(self) -> bool:
        return self._epoch is not None

    @property
    def backend_pid(self) -> int | None:
        """The backend pid of the lease connection while leading (terminating it deposes this leader)."""
        return self._pid

    @property
    def epoch(self) -> int | None:
        """The epoch of the lease held now; None when not leading."""
        return self._epoch

    async def check(self, conn: asyncpg.Connection) -> None:
        """Raise `NotLeader` unless the lease still carries this leader's epoch (first in each write)."""
        epoch = self._epoch
        if epoch is None:
            raise NotLeader("this scheduler does not hold the leader lease")
        try:
            await self._lease.check(conn, epoch)
        except LeaseLost as exc:
            raise NotLeader(str(exc)) from None

    async def run(self, on_elected: Callback, on_deposed: Callback) -> None:
        """Campaign forever: wait for the lease, lead until a renewal fails, then campaign again."""
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self._dsn)
                epoch = await self._lease.acquire(conn)
                self._pid = conn.get_server_pid()
                self._epoch = epoch
                self.terms += 1
                self.elected.set()
                log.info("elected leader (epoch %d, backend pid %s)", epoch, self._pid)
                await on_elected()
                while True:
                    await asyncio.sleep(self._ping_s)
                    await asyncio.wait_for(self._lease.renew(conn, epoch), self._ping_s * 3)
            except Exception as exc:
                # The session is gone (connection lost or refused, server shutting down, renewal timed
                # out) or the lease was taken over: campaign again. Anything else is unexpected, and is
                # logged in full, but still ends in a new campaign: an election loop that died would
                # leave the platform without a leader for good (seen under overload).
                if isinstance(exc, LeaseLost) or is_transient(exc):
                    log.warning("leader election session failed: %r", exc)
                else:
                    log.exception("leader election session failed unexpectedly")
                await asyncio.sleep(self._poll_s)
            finally:
                was_leader = self._epoch is not None
                self._pid = None
                self._epoch = None
                self.elected.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.close(timeout=2))
                if was_leader:
                    log.warning("stepped down as leader")
                    await asyncio.shield(on_deposed())
