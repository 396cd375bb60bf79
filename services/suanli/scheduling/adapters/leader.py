"""One active scheduler: a session-level PostgreSQL advisory lock held on a dedicated connection.

The holder is the leader. Standbys poll `pg_try_advisory_lock` (so they stay cancellable) and take over
when the leader's session ends, e.g. its process dies or its connection is terminated: PostgreSQL then
releases the lock. The leader pings its lock connection and steps down as soon as it fails. Writes are
fenced too: every write transaction checks that the lock is still held by this leader's backend, so a
leader that lost its session cannot commit even before it notices.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import asyncpg

from suanli.infra.transient import is_transient
from suanli.scheduling.service_layer.errors import NotLeader

log = logging.getLogger(__name__)

LOCK_CLASS = 0x5CED  # first key of the lock; the second is derived from the event store schema
_KEY = "SELECT hashtext($1) & 2147483647"
_TRY = "SELECT pg_try_advisory_lock($1, $2)"
_HELD = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = $1 "
    "AND classid = $2::int::oid AND objid = $3::int::oid AND objsubid = 2)"
)

Callback = Callable[[], Awaitable[None]]


class LeaderElection:
    def __init__(self, dsn: str, schema: str, *, poll_s: float = 0.5, ping_s: float = 1.0) -> None:
        self._dsn = dsn
        self._name = f"suanli.scheduling:{schema}"
        self._poll_s = poll_s
        self._ping_s = ping_s
        self._pid: int | None = None
        self._key: int | None = None
        self.elected = asyncio.Event()
        self.terms = 0

    @property
    def is_leader(self) -> bool:
        return self._pid is not None

    @property
    def backend_pid(self) -> int | None:
        return self._pid

    async def check(self, conn: asyncpg.Connection) -> None:
        if self._pid is None or not await conn.fetchval(_HELD, self._pid, LOCK_CLASS, self._key):
            raise NotLeader("this scheduler does not hold the leader lock")

    async def run(self, on_elected: Callback, on_deposed: Callback) -> None:
        """Campaign forever: wait for the lock, lead until the session fails, then campaign again."""
        backoff = self._poll_s
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self._dsn)
                self._key = await conn.fetchval(_KEY, self._name)
                while not await conn.fetchval(_TRY, LOCK_CLASS, self._key):
                    await asyncio.sleep(self._poll_s)
                self._pid = conn.get_server_pid()
                self.terms += 1
                self.elected.set()
                log.info("elected leader (backend pid %s)", self._pid)
                await on_elected()
                while True:
                    await asyncio.sleep(self._ping_s)
                    await asyncio.wait_for(conn.fetchval("SELECT 1"), self._ping_s * 3)
            except Exception as exc:
                # The session is gone (connection lost or refused, server shutting down, ping timed
                # out): campaign again. Anything else is unexpected, and is logged in full, but still
                # ends in a new campaign: an election loop that died would leave the platform without
                # a leader for good (seen under overload: every write refused as NotLeader).
                if is_transient(exc):
                    log.warning("leader election session failed: %r", exc)
                else:
                    log.exception("leader election session failed unexpectedly")
                await asyncio.sleep(backoff)
            finally:
                was_leader = self._pid is not None
                self._pid = None
                self.elected.clear()
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(conn.close(timeout=2))
                if was_leader:
                    log.warning("stepped down as leader")
                    await asyncio.shield(on_deposed())
