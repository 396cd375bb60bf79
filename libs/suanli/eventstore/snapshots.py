"""Snapshots of a projection folded from the store: the state up to a position, in a format the reader names.

A snapshot is derived data (the events stay the record), so whoever has folded the same events may write
one, and a reader that finds none, or none in its format, folds from position 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import asyncpg

from suanli.eventstore.migrator import check_schema


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The state of projection ``name`` covering every event up to ``position``, encoded in ``format``."""

    name: str
    position: int
    format: str
    state: bytes
    taken_at: datetime | None = None  # set by the store


class SnapshotStore(Protocol):
    """Where snapshots are kept: `PostgresSnapshots` in service, `InMemorySnapshots` in unit tests."""

    async def save(self, snapshot: Snapshot, *, keep: int) -> None:
        """Record ``snapshot`` and delete all but the ``keep`` latest of its name."""
        ...

    async def latest(self, name: str, format: str) -> Snapshot | None:
        """The snapshot of ``name`` in ``format`` with the highest position; None when there is none."""
        ...


class PostgresSnapshots:
    """Table ``<schema>.snapshots`` (migration 0009)."""

    def __init__(self, pool: asyncpg.Pool, schema: str) -> None:
        self._pool = pool
        table = f"{check_schema(schema)}.snapshots"
        self._insert = (
            f"INSERT INTO {table} (name, position, format, state) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (name, position) DO UPDATE SET format = EXCLUDED.format, state = EXCLUDED.state,"
            " taken_at = now()"
        )
        self._trim = (
            f"DELETE FROM {table} WHERE name = $1 AND position < ALL ("
            f"SELECT position FROM {table} WHERE name = $1 ORDER BY position DESC LIMIT $2)"
        )
        self._latest = (
            f"SELECT name, position, format, state, taken_at FROM {table}"
            " WHERE name = $1 AND format = $2 ORDER BY position DESC LIMIT 1"
        )

    async def save(self, snapshot: Snapshot, *, keep: int) -> None:
        """Record ``snapshot`` (replacing one at its position) and trim to ``keep``, in one transaction."""
        async with self._pool.acquire() as conn, conn.transaction():
            await conn.execute(
                self._insert, snapshot.name, snapshot.position, snapshot.format, snapshot.state
            )
            await conn.execute(self._trim, snapshot.name, max(keep, 1))

    async def latest(self, name: str, format: str) -> Snapshot | None:
        """The newest snapshot of ``name`` in ``format`` (rows of other formats are skipped)."""
        row = await self._pool.fetchrow(self._latest, name, format)
        if row is None:
            return None
        return Snapshot(row["name"], row["position"], row["format"], bytes(row["state"]), row["taken_at"])


class InMemorySnapshots:
    """For the in-memory event store (unit tests)."""

    def __init__(self) -> None:
        self.saved: dict[str, list[Snapshot]] = {}

    async def save(self, snapshot: Snapshot, *, keep: int) -> None:
        """Record ``snapshot`` and keep the ``keep`` latest of its name."""
        kept = [s for s in self.saved.get(snapshot.name, []) if s.position != snapshot.position]
        kept.append(snapshot)
        kept.sort(key=lambda s: s.position)
        self.saved[snapshot.name] = kept[-max(keep, 1) :]

    async def latest(self, name: str, format: str) -> Snapshot | None:
        """The newest snapshot of ``name`` in ``format``."""
        found = [s for s in self.saved.get(name, []) if s.format == format]
        return found[-1] if found else None
