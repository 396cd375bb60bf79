"""One acting autoscaler: the `serving-autoscaler` lease of serving's schema (`suanli.eventstore.lease`).

Serving may run several instances, and the autoscaler apart from them (`suanli serve serving
autoscaler`); each runs the loop, and only the lease's holder decides. The holder renews the lease
once per tick on its own connection; a standby tries to take it once per tick, and does when it has
run out or its holder's session is gone. Every write of the holder is fenced by the epoch (`check`,
first in its transaction): a holder paused past its lease and resumed scales nothing.
"""

from __future__ import annotations

import contextlib
import logging

import asyncpg

from suanli.eventstore.lease import LeaseLost, PgLease

log = logging.getLogger(__name__)

LEASE = "serving-autoscaler"


class AutoscalerLease:
    def __init__(self, dsn: str, schema: str, *, lease_s: float) -> None:
        self._dsn = dsn
        self._lease = PgLease(schema, LEASE, lease_s=lease_s, poll_s=lease_s)
        self._conn: asyncpg.Connection | None = None
        self.epoch: int | None = None

    async def hold(self) -> int | None:
        """Renew the lease, or try to take it: the epoch held now, None while another holds it."""
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn, self.epoch = await asyncpg.connect(self._dsn), None
            if self.epoch is None:
                self.epoch = await self._lease.try_acquire(self._conn)
                if self.epoch is not None:
                    log.info("autoscaler: acting (lease epoch %d)", self.epoch)
            else:
                await self._lease.renew(self._conn, self.epoch)
        except LeaseLost as exc:
            log.warning("autoscaler: standing by: %s", exc)
            self.epoch = None
        except BaseException:
            self.epoch = None
            await self.close()
            raise
        return self.epoch

    async def check(self, conn: asyncpg.Connection) -> None:
        """First in each write transaction: `LeaseLost` unless this process still holds the lease."""
        if self.epoch is None:
            raise LeaseLost(f"this process does not hold the {LEASE} lease")
        await self._lease.check(conn, self.epoch)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)
