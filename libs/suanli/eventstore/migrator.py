"""Apply the ordered SQL files in `migrations/` to one schema, once each, safely from concurrent starters."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import asyncpg

from suanli.eventstore.errors import EventStoreError

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class MigrationError(EventStoreError):
    """A migration already applied differs from its file: history must not be rewritten."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One SQL file of ``migrations/``, applied once per schema."""

    version: str  # the file name without .sql, e.g. "0001_events"
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the SQL, recorded when applied so an edited file is noticed."""
        return hashlib.sha256(self.sql.encode()).hexdigest()


MIGRATION_TIMEOUT_S = 3600.0  # per migration file


def check_schema(schema: str) -> str:
    """Schema names are spliced into SQL, so only plain lower-case identifiers are accepted."""
    if not _SCHEMA.match(schema):
        raise ValueError(f"schema must match {_SCHEMA.pattern}, got {schema!r}")
    return schema


def load_migrations() -> list[Migration]:
    """The event store's own migrations, in version order."""
    folder = resources.files("suanli.eventstore.migrations")
    found = [
        Migration(entry.name.removesuffix(".sql"), entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if _NAME.match(entry.name)
    ]
    return sorted(found, key=lambda m: m.version)


async def migrate(
    conn: asyncpg.Connection, schema: str, migrations: Sequence[Migration] | None = None
) -> list[str]:
    """Bring `schema` up to date; return the versions applied now (empty when already current).

    `migrations` defaults to the package's files (`load_migrations()`).

    Everything runs in one transaction under an advisory lock, so two services starting together neither
    race on CREATE SCHEMA nor apply a file twice, and a failing file leaves the schema as it was.
    """
    check_schema(schema)
    applied_now: list[str] = []
    async with conn.transaction():
        # hashtext: the schema may not exist yet, so its OID cannot key the lock; a collision only
        # serialises two schemas' migrations, which is harmless.
        lock_name = f"suanli.eventstore.migrator:{schema}"
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", lock_name)
        # DDL only where something is missing: CREATE SCHEMA IF NOT EXISTS checks the database's CREATE
        # privilege even when the schema exists, and a service's least-privilege role has none (its
        # schema is provisioned for it, docs/security.md), nor CREATE on a schema it only reads.
        exists = await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f'"{schema}"')
        if not exists:
            await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(f'SET LOCAL search_path TO "{schema}"')
        if await conn.fetchval("SELECT to_regclass($1) IS NULL", f'"{schema}".schema_migrations'):
            await conn.execute(
                "CREATE TABLE schema_migrations ("
                " version text PRIMARY KEY, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
        rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
        done = {r["version"]: r["checksum"] for r in rows}
        for migration in migrations if migrations is not None else load_migrations():
            recorded = done.get(migration.version)
            if recorded is not None:
                if recorded != migration.checksum:
                    raise MigrationError(f"{schema}: {migration.version} changed after it was applied")
                continue
            # Not the pool's statement timeout (30 s): an index built over a large table, or a server
            # busy with other work, takes longer, and a migration cut short would stop the service for good.
            await conn.execute(migration.sql, timeout=MIGRATION_TIMEOUT_S)
            await conn.execute(
                "INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)",
                migration.version,
                migration.checksum,
            )
            applied_now.append(migration.version)
    return applied_now
