"""A lease with a persistent epoch in PostgreSQL: one holder per role, fenced, replaced when it pauses.

A session advisory lock alone cannot replace a holder that is paused (SIGSTOP, a stalled VM, a long GC)
or cut off but whose session lives on: PostgreSQL keeps the lock as long as the connection stays open.
A lease row in the store's schema (``leases``, migration 0006) carries the role's ``epoch``, the backend
pid of the holder's lease connection, and ``lease_until``:

- ``acquire`` takes the lease, with the next epoch, when it has run out or the holder's session is gone
  (its pid is no longer a backend): a crashed holder is replaced within one poll, a paused one within
  one lease;
- ``renew`` extends it, only while the row still carries the holder's epoch and it has not run out;
- ``check``, first in a write transaction, share-locks the row and checks the epoch and expiry, so a
  takeover (which updates that row) waits for the writes in flight, and a holder paused inside one is
  cut off by PostgreSQL after one lease (``idle_in_transaction_session_timeout``, for that transaction
  only), which rolls the write back. A holder resumed after its lease was taken writes nothing.
"""

from __future__ import annotations

import asyncio

import asyncpg

from suanli.eventstore.migrator import check_schema


class LeaseLost(Exception):
    """The lease was taken over or ran out: the holder must stop acting as one."""


class PgLease:
    """The lease ``name`` in ``schema``'s ``leases`` table: ``lease_s`` long, polled every ``poll_s``."""

    def __init__(self, schema: str, name: str, *, lease_s: float, poll_s: float) -> None:
        if lease_s <= 0 or poll_s <= 0:
            raise ValueError(f"lease_s and poll_s must be positive, got {lease_s} and {poll_s}")
        self.name = name
        self.lease_s = lease_s
        self._table = f'"{check_schema(schema)}".leases'
        self._poll_s = poll_s

    async def acquire(self, conn: asyncpg.Connection) -> int:
        """Poll until this session holds the lease; its new epoch."""
        while True:
            epoch = await self.try_acquire(conn)
            if epoch is not None:
                return epoch
            await asyncio.sleep(self._poll_s)

    async def try_acquire(self, conn: asyncpg.Connection) -> int | None:
        """Take the lease if free, run out, or its holder's session is gone: the new epoch, else None."""
        epoch = await conn.fetchval(
            f"INSERT INTO {self._table} AS l (name, epoch, holder_pid, lease_until) "
            "VALUES ($1, 1, pg_backend_pid(), clock_timestamp() + make_interval(secs => $2)) "
            "ON CONFLICT (name) DO UPDATE SET epoch = l.epoch + 1, holder_pid = EXCLUDED.holder_pid, "
            "lease_until = EXCLUDED.lease_until "
            "WHERE l.lease_until < clock_timestamp() "
            "OR NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = l.holder_pid) "
            "RETURNING epoch",
            self.name,
            self.lease_s,
        )
        return None if epoch is None else int(epoch)

    async def renew(self, conn: asyncpg.Connection, epoch: int) -> None:
        """Extend the lease of ``epoch`` by ``lease_s`` from now; `LeaseLost` if it is no longer held."""
        renewed = await conn.fetchval(
            f"UPDATE {self._table} SET lease_until = clock_timestamp() + make_interval(secs => $3) "
            "WHERE name = $1 AND epoch = $2 AND lease_until > clock_timestamp() RETURNING epoch",
            self.name,
            epoch,
            self.lease_s,
        )
        if renewed is None:
            raise LeaseLost(f"the {self.name} lease of epoch {epoch} was taken over or ran out")

    async def check(self, conn: asyncpg.Connection, epoch: int) -> None:
        """Inside a transaction on ``conn``: `LeaseLost` unless ``epoch`` still holds an unexpired lease."""
        await conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {int(self.lease_s * 1000)}")
        held = await conn.fetchval(
            f"SELECT epoch = $2 AND lease_until > clock_timestamp() FROM {self._table} "
            "WHERE name = $1 FOR SHARE",
            self.name,
            epoch,
        )
        if not held:
            raise LeaseLost(f"the {self.name} lease of epoch {epoch} was taken over or ran out")
