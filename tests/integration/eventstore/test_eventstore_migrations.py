"""Migrations on a real PostgreSQL: idempotent, safe for concurrent starters, history is immutable."""

from __future__ import annotations

import asyncio
import secrets

import asyncpg
import pytest

from suanli.eventstore.migrator import Migration, MigrationError, check_schema, load_migrations, migrate


async def _migrate_once(dsn: str, schema: str, migrations: list[Migration] | None = None) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return await migrate(conn, schema, migrations)
    finally:
        await conn.close()


async def test_concurrent_starters_apply_each_migration_exactly_once(pg_dsn: str) -> None:
    schema = f"esm_{secrets.token_hex(4)}"
    results = await asyncio.gather(*(_migrate_once(pg_dsn, schema) for _ in range(4)))

    every = [m.version for m in load_migrations()]
    assert sorted(results, key=len, reverse=True) == [every, [], [], []]
    assert await _migrate_once(pg_dsn, schema) == []
    conn = await asyncpg.connect(pg_dsn)
    try:
        recorded = await conn.fetch(f"SELECT version FROM {schema}.schema_migrations ORDER BY version")
    finally:
        await conn.close()
    assert [r["version"] for r in recorded] == every


async def test_an_applied_migration_that_changed_is_refused(pg_dsn: str) -> None:
    schema = f"esm_{secrets.token_hex(4)}"
    await _migrate_once(pg_dsn, schema)
    edited = [Migration(m.version, m.sql + "\n-- edited") for m in load_migrations()]
    with pytest.raises(MigrationError):
        await _migrate_once(pg_dsn, schema, edited)


def test_schema_names_are_validated() -> None:
    with pytest.raises(ValueError):
        check_schema('x"; DROP TABLE events; --')
