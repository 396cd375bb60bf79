"""Where the last pending reason of each job is kept (derived, for GetJob and ExplainJob), written in the
same transaction as the cycle's events: a PostgreSQL table beside the event store, or memory."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from suanli.eventstore import Transaction
from suanli.scheduling.adapters.store import PendingChanges

PENDING_TABLE = "scheduler_pending"


class PostgresPendingReasons:
    """Table `<schema>.scheduler_pending(job_id, reason jsonb)`; written on the transaction's connection."""

    def __init__(self, pool: asyncpg.Pool, schema: str) -> None:
        self._pool = pool
        self._table = f"{schema}.{PENDING_TABLE}"

    async def setup(self) -> None:
        await self._pool.execute(
            f"CREATE TABLE IF NOT EXISTS {self._table} ("
            "job_id text PRIMARY KEY, reason jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )

    async def load(self) -> dict[str, dict[str, Any]]:
        rows = await self._pool.fetch(f"SELECT job_id, reason FROM {self._table}")
        return {r["job_id"]: json.loads(r["reason"]) for r in rows}

    async def write(self, tx: Transaction, changes: PendingChanges) -> None:
        gone = [job_id for job_id, reason in changes.items() if reason is None]
        if gone:
            await tx.connection.execute(f"DELETE FROM {self._table} WHERE job_id = ANY($1)", gone)
        rows = [(job_id, json.dumps(reason)) for job_id, reason in changes.items() if reason is not None]
        if rows:
            await tx.connection.executemany(
                f"INSERT INTO {self._table} (job_id, reason) VALUES ($1, $2::jsonb) ON CONFLICT (job_id) "
                "DO UPDATE SET reason = EXCLUDED.reason, updated_at = now()",
                rows,
            )


class InMemoryPendingReasons:
    """For an in-memory event store. Kept as JSON text, as PostgreSQL keeps it: what is loaded back is a
    copy in JSON's types, never the caller's own objects."""

    def __init__(self) -> None:
        self._rows: dict[str, str] = {}

    async def setup(self) -> None:
        return None

    async def load(self) -> dict[str, dict[str, Any]]:
        return {job_id: json.loads(reason) for job_id, reason in self._rows.items()}

    async def write(self, tx: Transaction, changes: PendingChanges) -> None:
        # The writer calls this last in its transaction, after the appends succeeded: nothing after it
        # can roll the transaction back, so applying it now is applying it on commit.
        for job_id, reason in changes.items():
            if reason is None:
                self._rows.pop(job_id, None)
            else:
                self._rows[job_id] = json.dumps(reason)
