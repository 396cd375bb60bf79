"""Leader fencing on real PostgreSQL: a lease with a persistent epoch, checked inside every write.

A leader that is paused (SIGSTOP, a long GC, a partition) keeps its database session, so nothing that
depends on the session alone can replace it. These tests stand in for the pause at the database: the
lease running out while the leader does not renew, and the leader stuck inside a write transaction. The
process-level SIGSTOP is in tests/e2e/test_e2e_faults.py.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import asyncpg
import pytest

from suanli.eventstore.lease import LeaseLost, PgLease
from suanli.eventstore.migrator import migrate
from suanli.infra.polling import until
from suanli.scheduling.adapters.leader import LEASE, LeaderElection
from suanli.scheduling.service_layer.errors import NotLeader

pytestmark = pytest.mark.timeout(60)

LEASE_S = 3.0
DEADLINE_S = 20.0


@dataclass
class Candidate:
    election: LeaderElection
    deposed: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    async def lead(self) -> int:
        """Start campaigning with no rival and wait until elected; the epoch."""
        self.start()
        await eventually(lambda: self.election.is_leader, "the first candidate elected")
        assert self.election.epoch is not None
        return self.election.epoch

    def start(self) -> None:
        async def elected() -> None:
            self.deposed.clear()

        async def deposed() -> None:
            self.deposed.set()

        self.task = asyncio.create_task(self.election.run(elected, deposed))

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


@pytest.fixture
async def schema(pg_dsn: str) -> AsyncIterator[str]:
    name = f"fence_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(pg_dsn)
    try:
        await migrate(conn, name)
        await conn.execute(f"CREATE TABLE {name}.writes (x int)")
        yield name
    finally:
        await conn.execute(f"DROP SCHEMA {name} CASCADE")
        await conn.close()


def candidate(pg_dsn: str, schema: str) -> Candidate:
    return Candidate(LeaderElection(pg_dsn, schema, poll_s=0.2, ping_s=0.5, lease_s=LEASE_S))


async def eventually(check: Callable[[], bool], what: str) -> None:
    async def probe() -> bool:
        return check()

    await until(probe, DEADLINE_S, what, every=0.05)


async def fenced_write(conn: asyncpg.Connection, election: LeaderElection, schema: str) -> None:
    async with conn.transaction():
        await election.check(conn)
        await conn.execute(f"INSERT INTO {schema}.writes VALUES (1)")


async def test_a_leader_whose_lease_ran_out_can_write_nothing_and_steps_down(
    pg_dsn: str, schema: str
) -> None:
    first, second = candidate(pg_dsn, schema), candidate(pg_dsn, schema)
    conn = await asyncpg.connect(pg_dsn)
    try:
        epoch = await first.lead()
        await fenced_write(conn, first.election, schema)  # the leader writes
        second.start()
        await asyncio.sleep(LEASE_S / 2)
        assert not second.election.is_leader  # a renewed lease is not taken while its holder lives

        # The leader pauses past its lease: from the database's side, its lease runs out unrenewed.
        await conn.execute(f"UPDATE {schema}.leases SET lease_until = clock_timestamp() - interval '1 s'")
        await eventually(lambda: second.election.is_leader, "the standby taking over")
        assert second.election.epoch == epoch + 1
        await eventually(first.deposed.is_set, "the old leader stepping down at its next renewal")
        # Before that renewal it still believed it led: a write fenced with its epoch is refused all the same.
        stale = PgLease(schema, LEASE, lease_s=LEASE_S, poll_s=0.2)
        with pytest.raises(LeaseLost, match=f"lease of epoch {epoch} was taken over or ran out"):
            async with conn.transaction():
                await stale.check(conn, epoch)
                await conn.execute(f"INSERT INTO {schema}.writes VALUES (1)")
        # And a deposed election refuses every write itself.
        with pytest.raises(NotLeader, match="does not hold the leader lease"):
            await fenced_write(conn, first.election, schema)
        assert await conn.fetchval(f"SELECT count(*) FROM {schema}.writes") == 1  # only the first write
        await fenced_write(conn, second.election, schema)  # the new leader writes
        assert await conn.fetchval(f"SELECT max(epoch) FROM {schema}.leases") == epoch + 1
    finally:
        await first.stop()
        await second.stop()
        await conn.close()


async def test_a_leader_paused_inside_a_write_is_rolled_back_before_the_standby_leads(
    pg_dsn: str, schema: str
) -> None:
    first, second = candidate(pg_dsn, schema), candidate(pg_dsn, schema)
    conn = await asyncpg.connect(pg_dsn)
    try:
        epoch = await first.lead()
        transaction = conn.transaction()
        await transaction.start()
        await first.election.check(conn)
        await conn.execute(f"INSERT INTO {schema}.writes VALUES (1)")
        # Paused here, inside the write. Its own renewals queue behind the write's lock, so it steps
        # down; the standby's takeover waits for the write, which PostgreSQL cuts off after one lease.
        second.start()
        await eventually(lambda: second.election.is_leader, "the standby taking over")
        # How the cut-off session surfaces depends on when asyncpg reads the server's goodbye: an
        # error of the server, a closed connection, or a protocol that refuses the COMMIT.
        with pytest.raises(
            (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.exceptions.InternalClientError)
        ):
            await transaction.commit()
        assert (second.election.epoch or 0) > epoch
        check = await asyncpg.connect(pg_dsn)
        try:
            assert await check.fetchval(f"SELECT count(*) FROM {schema}.writes") == 0  # rolled back
        finally:
            await check.close()
    finally:
        await first.stop()
        await second.stop()
        await conn.close()


async def test_a_crashed_leaders_session_is_replaced_within_a_poll_not_a_lease(
    pg_dsn: str, schema: str
) -> None:
    first, second = candidate(pg_dsn, schema), candidate(pg_dsn, schema)
    admin = await asyncpg.connect(pg_dsn)
    try:
        await first.lead()
        second.start()
        await asyncio.sleep(0.5)
        assert not second.election.is_leader
        loop = asyncio.get_running_loop()
        await first.stop()  # the process dies: its session ends, its lease has seconds left
        terminated_at = loop.time()
        assert await admin.fetchval(f"SELECT lease_until > clock_timestamp() FROM {schema}.leases")
        await eventually(lambda: second.election.is_leader, "the standby taking over")
        assert loop.time() - terminated_at < LEASE_S  # the session's end, not the lease, decided
    finally:
        await first.stop()
        await second.stop()
        await admin.close()
