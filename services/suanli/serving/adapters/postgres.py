"""Serving's ports on PostgreSQL: the state rows next to the event store in serving's own schema."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from suanli.clock import Clock
from suanli.eventstore import PostgresEventStore
from suanli.eventstore.migrator import Migration, migrate
from suanli.eventstore.postgres import PostgresTransaction
from suanli.serving.adapters import records
from suanli.serving.domain.service import Decision, Service, ServiceCreated, ServiceState
from suanli.serving.service_layer.errors import ServiceExists
from suanli.serving.service_layer.ports import ExplainedDecision, ServicePage, StoredService

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def load_migrations() -> list[Migration]:
    return [Migration(p.stem, p.read_text(encoding="utf-8")) for p in sorted(MIGRATIONS_DIR.glob("*.sql"))]


async def migrate_serving(store: PostgresEventStore) -> list[str]:
    """Apply serving's migrations to the event store's schema (its own files: 0001.. are the store's)."""
    async with store.pool.acquire() as conn:
        return await migrate(conn, store.schema, migrations=load_migrations())


class PostgresServices:
    """`Services` inside one transaction; a service read is locked (FOR UPDATE) until the unit commits."""

    def __init__(
        self,
        tx: PostgresTransaction,
        schema: str,
        topics: tuple[str, str],
        new_id: Callable[[], uuid.UUID],
        clock: Clock,
    ) -> None:
        self._tx = tx
        self._conn: asyncpg.Connection = tx.connection
        self._s = schema
        self._topics = topics
        self._new_id = new_id
        self._clock = clock

    async def named(self, tenant: str, name: str) -> Service | None:
        state = await self._conn.fetchval(
            f"SELECT state FROM {self._s}.services WHERE tenant = $1 AND name = $2 AND live FOR UPDATE",
            tenant,
            name,
        )
        return None if state is None else records.service_from(json.loads(state))

    async def _keyed(self, key: str) -> Service | None:
        state = await self._conn.fetchval(
            f"SELECT s.state FROM {self._s}.replica_keys k JOIN {self._s}.services s USING (service_id)"
            " WHERE k.key = $1 FOR UPDATE OF s",
            key,
        )
        return None if state is None else records.service_from(json.loads(state))

    async def of_request(self, request_id: str) -> Service | None:
        return await self._keyed(f"request:{request_id}")

    async def of_job(self, job_id: str) -> Service | None:
        return await self._keyed(f"job:{job_id}")

    async def of_replica(self, replica_id: str) -> Service | None:
        return await self._keyed(f"replica:{replica_id}")

    async def record(self, service: Service, decision: Decision) -> None:
        now = self._clock.now()
        state = json.dumps(records.state_of(service))
        live = service.state is ServiceState.ACTIVE
        if decision.events and isinstance(decision.events[0], ServiceCreated):
            inserted = await self._conn.fetchval(
                f"INSERT INTO {self._s}.services VALUES ($1, $2, $3, $4, $5, $6, $7, $7)"
                " ON CONFLICT (tenant, name) WHERE live DO NOTHING RETURNING 1",
                service.service_id,
                service.tenant,
                service.name,
                live,
                state,
                service.version,
                now,
            )
            if inserted is None:
                raise ServiceExists(service.tenant, service.name)
        else:
            await self._conn.execute(
                f"UPDATE {self._s}.services SET state = $2, version = $3, live = $4, updated_at = $5"
                " WHERE service_id = $1",
                service.service_id,
                state,
                service.version,
                live,
                now,
            )
        keys = [
            f"{kind}:{value}"
            for r in service.replicas.values()
            for kind, value in (
                ("request", r.request_id),
                ("replica", r.replica_id),
                ("job", service.job_of(r)),
            )
            if value
        ]
        await self._conn.executemany(
            f"INSERT INTO {self._s}.replica_keys VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
            [(k, service.service_id) for k in keys],
        )
        told = records.announcement(decision, service.service_id, *self._topics, self._new_id, now)
        # The stream's expected version is the state row's: a second writer of the service would have
        # waited on the row lock, so a conflict here is a bug, and it rolls everything back.
        before = service.version - len(decision.events)
        await self._tx.append(records.stream_of(service.service_id), before, told.events, outbox=told.outbox)

    async def explained(self, entries: Sequence[ExplainedDecision], keep: int) -> None:
        table = f"{self._s}.autoscaler_decisions"
        # Only the latest hold is kept: a hold is the same answer as the one before, seen later.
        held = [e.service_id for e in entries if not e.changed]
        if held:
            await self._conn.execute(f"DELETE FROM {table} WHERE service_id = ANY($1) AND NOT changed", held)
        await self._conn.executemany(
            f"INSERT INTO {table} (service_id, decided_at, from_replicas, changed, decision)"
            " VALUES ($1, $2, $3, $4, $5)",
            [
                (
                    e.service_id,
                    e.decided_at,
                    e.from_replicas,
                    e.changed,
                    json.dumps(records.decision_of(e.decision)),
                )
                for e in entries
            ],
        )
        for changed in (e for e in entries if e.changed):
            await self._conn.execute(
                f"DELETE FROM {table} WHERE service_id = $1 AND changed AND seq NOT IN"
                f" (SELECT seq FROM {table} WHERE service_id = $1 AND changed ORDER BY seq DESC LIMIT $2)",
                changed.service_id,
                keep,
            )


Fence = Callable[[asyncpg.Connection], Awaitable[None]]


class PostgresServing:
    """`UnitOfWork` on the event store's transactions (which also carry the tracked offset).

    With a `fence`, each unit begun runs it first in its transaction (a lease check, which raises when
    the writer no longer holds the lease): `fenced` makes such a unit of work for a lease's holder.
    """

    def __init__(
        self,
        store: PostgresEventStore,
        topics: tuple[str, str],
        new_id: Callable[[], uuid.UUID],
        clock: Clock,
        fence: Fence | None = None,
    ) -> None:
        self.store = store
        self._topics = topics
        self._new_id = new_id
        self._clock = clock
        self._fence = fence

    def fenced(self, fence: Fence) -> PostgresServing:
        return PostgresServing(self.store, self._topics, self._new_id, self._clock, fence)

    @asynccontextmanager
    async def tracked(
        self, group: str, topic: str, partition: int, offset: int, event_id: str | None = None
    ) -> AsyncIterator[PostgresServices]:
        async with self.store.tracking_transaction(group, topic, partition, offset, event_id=event_id) as tx:
            yield PostgresServices(tx, self.store.schema, self._topics, self._new_id, self._clock)

    @asynccontextmanager
    async def begin(self) -> AsyncIterator[PostgresServices]:
        async with self.store.transaction(appending=True) as tx:
            if self._fence is not None:
                await self._fence(tx.connection)
            yield PostgresServices(tx, self.store.schema, self._topics, self._new_id, self._clock)


class PostgresServingQueries:
    """`ServingQueries`: plain reads of committed rows, no lock."""

    def __init__(self, pool: asyncpg.Pool, schema: str) -> None:
        self._pool = pool
        self._s = schema

    async def get(self, tenant: str, name: str) -> StoredService | None:
        row = await self._pool.fetchrow(
            f"SELECT state, created_at, updated_at FROM {self._s}.services WHERE tenant = $1 AND name = $2"
            " ORDER BY live DESC, updated_at DESC LIMIT 1",
            tenant,
            name,
        )
        return None if row is None else _stored(row)

    async def page(self, tenant: str | None, after: str, limit: int) -> ServicePage:
        rows = await self._pool.fetch(
            f"SELECT tenant || '/' || name AS key, state, created_at, updated_at FROM {self._s}.services"
            " WHERE live AND ($1::text IS NULL OR tenant = $1) AND tenant || '/' || name > $2"
            " ORDER BY key LIMIT $3",
            tenant,
            after,
            limit + 1,
        )
        shown = rows[:limit]
        return ServicePage([_stored(r) for r in shown], shown[-1]["key"] if len(rows) > limit else None)

    async def knows_job(self, job_id: str) -> bool:
        found = await self._pool.fetchval(
            f"SELECT 1 FROM {self._s}.replica_keys WHERE key = $1", f"job:{job_id}"
        )
        return found is not None

    async def known_jobs(self, job_ids: Collection[str]) -> set[str]:
        rows = await self._pool.fetch(
            f"SELECT key FROM {self._s}.replica_keys WHERE key = ANY($1::text[])",
            [f"job:{job_id}" for job_id in job_ids],
        )
        return {r["key"].removeprefix("job:") for r in rows}

    async def decisions(self, service_id: str, limit: int) -> list[ExplainedDecision]:
        rows = await self._pool.fetch(
            f"SELECT service_id, decided_at, from_replicas, decision FROM {self._s}.autoscaler_decisions"
            " WHERE service_id = $1 ORDER BY seq DESC LIMIT $2",
            service_id,
            limit,
        )
        return [
            ExplainedDecision(
                r["service_id"],
                r["decided_at"],
                r["from_replicas"],
                records.decision_from(json.loads(r["decision"])),
            )
            for r in rows
        ]


def _stored(row: asyncpg.Record) -> StoredService:
    return StoredService(records.service_from(json.loads(row["state"])), row["created_at"], row["updated_at"])
