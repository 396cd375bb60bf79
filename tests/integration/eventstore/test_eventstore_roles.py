"""Per-service PostgreSQL roles on the real server: least privilege, idempotent, and migrations still run.

Each test works in a database of its own (PUBLIC's rights on it are revoked, which would disturb a shared
one) with roles named ``r<random>_<service>``; both are dropped afterwards, roles after the database
that holds their objects.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
from typer.testing import CliRunner

from suanli.billing.adapters.postgres import migrate_billing
from suanli.cli import access
from suanli.cli.main import app
from suanli.eventstore import NO_STREAM, NewEvent, PostgresEventStore
from suanli.eventstore.migrator import migrate
from suanli.eventstore.roles import ServiceRole, provision, scram_verifier
from suanli.infra.dsn import with_database, with_user
from suanli.infra.postgres import PostgresEndpoint


@dataclass(frozen=True)
class Cluster:
    admin: str  # a superuser's DSN on the test's database
    prefix: str  # of the test's role names

    def dsn(self, service: str) -> str:
        return with_user(self.admin, f"{self.prefix}{service}")

    def roles(self) -> list[ServiceRole]:
        return access.service_roles(self.prefix, env={})


async def _execute(dsn: str, *statements: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture
async def cluster(postgres_server: PostgresEndpoint) -> AsyncIterator[Cluster]:
    token = secrets.token_hex(4)
    database, prefix = f"suanli_roles_{token}", f"r{token}_"
    await _execute(postgres_server.dsn, f'CREATE DATABASE "{database}"')
    try:
        yield Cluster(with_database(postgres_server.dsn, database), prefix)
    finally:
        conn = await asyncpg.connect(postgres_server.dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            for row in await conn.fetch("SELECT rolname FROM pg_roles WHERE rolname LIKE $1", f"{prefix}%"):
                await conn.execute(f'DROP ROLE "{row["rolname"]}"')
        finally:
            await conn.close()


async def _provision(cluster: Cluster, passwords: dict[str, str] | None = None) -> None:
    conn = await asyncpg.connect(cluster.admin)
    try:
        await provision(conn, cluster.roles(), passwords)
    finally:
        await conn.close()


async def _state(cluster: Cluster) -> list[tuple[object, ...]]:
    """Every fact provisioning decides: role attributes, schema owners and rights, default privileges."""
    conn = await asyncpg.connect(cluster.admin)
    try:
        roles = await conn.fetch(
            "SELECT rolname, rolsuper, rolcreatedb, rolcreaterole, rolcanlogin, rolreplication, rolbypassrls"
            " FROM pg_roles WHERE rolname LIKE $1 ORDER BY rolname",
            f"{cluster.prefix}%",
        )
        schemas = await conn.fetch(
            "SELECT nspname, pg_get_userbyid(nspowner) AS owner, nspacl::text AS acl FROM pg_namespace"
            " WHERE nspname IN ('scheduling', 'billing', 'auth') ORDER BY nspname"
        )
        defaults = await conn.fetch("SELECT defaclacl::text AS acl FROM pg_default_acl ORDER BY 1")
        database = await conn.fetchval(
            "SELECT datacl::text FROM pg_database WHERE datname = current_database()"
        )
    finally:
        await conn.close()
    return [tuple(r.values()) for r in (*roles, *schemas, *defaults)] + [(database,)]


async def _append(store: PostgresEventStore) -> None:
    event = NewEvent(uuid.uuid4(), "Probe", b"{}")
    await store.append(f"probe-{uuid.uuid4().hex[:8]}", NO_STREAM, [event])


async def _append_as(cluster: Cluster, service: str) -> int:
    """Open the service's schema as its role (migrating it), append an event; the events now there."""
    async with await PostgresEventStore.connect(cluster.dsn(service), schema=service) as store:
        await _append(store)
        return len(await store.read_all(0, 10))


async def test_provisioning_twice_or_concurrently_leaves_the_same_roles_and_grants(cluster: Cluster) -> None:
    await asyncio.gather(*(_provision(cluster) for _ in range(3)))
    first = await _state(cluster)
    await _provision(cluster)
    assert await _state(cluster) == first
    roles = {
        row[0]: row[1:] for row in first if isinstance(row[0], str) and row[0].startswith(cluster.prefix)
    }
    assert set(roles) == {
        f"{cluster.prefix}{s}" for s in ("auth", "scheduling", "billing", "serving", "routing")
    }
    # Not superuser, no CREATEDB, no CREATEROLE, may log in, no replication, no row-security bypass.
    assert set(roles.values()) == {(False, False, False, True, False, False)}
    owners = {row[0]: row[1] for row in first if row[0] in ("scheduling", "billing", "auth")}
    assert owners == {s: f"{cluster.prefix}{s}" for s in ("scheduling", "billing", "auth")}


async def test_the_administrator_is_never_made_a_service_role(cluster: Cluster) -> None:
    conn = await asyncpg.connect(cluster.admin)
    try:
        admin = await conn.fetchval("SELECT current_user")
        with pytest.raises(ValueError, match="administrator"):
            await provision(conn, [ServiceRole(admin, schema=f"{cluster.prefix}x")])
        assert await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    finally:
        await conn.close()


async def test_each_service_migrates_and_writes_its_own_schema_as_its_own_role(cluster: Cluster) -> None:
    await _provision(cluster)
    assert await _append_as(cluster, "scheduling") == 1
    async with await PostgresEventStore.connect(cluster.dsn("billing"), schema="billing") as store:
        # Billing's own migrations: tables, functions and triggers, all created by its role.
        assert await migrate_billing(store)
        await _append(store)
    # Starting again finds everything current and runs no DDL (the role has no CREATE on the database).
    async with await PostgresEventStore.connect(cluster.dsn("scheduling"), schema="scheduling") as store:
        assert len(await store.read_all(0, 10)) == 1


async def test_a_service_role_is_denied_another_services_tables(cluster: Cluster) -> None:
    await _provision(cluster)
    for service in ("scheduling", "billing"):
        await _append_as(cluster, service)
    for reader, owner in (("scheduling", "billing"), ("billing", "scheduling"), ("routing", "billing")):
        conn = await asyncpg.connect(cluster.dsn(reader))
        try:
            with pytest.raises(asyncpg.InsufficientPrivilegeError) as denied:
                await conn.fetch(f"SELECT * FROM {owner}.events")
            assert denied.value.sqlstate == "42501"
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(f"CREATE TABLE {owner}.intruder (x int)")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute("CREATE TABLE public.intruder (x int)")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await conn.execute(f"CREATE SCHEMA {reader}_extra")
        finally:
            await conn.close()


async def test_services_read_the_token_ledger_and_cannot_write_it(cluster: Cluster) -> None:
    await _provision(cluster)
    await _append_as(cluster, "auth")
    for service in ("scheduling", "billing", "serving", "routing"):
        # What a gRPC service does at start to refuse revoked tokens: open the ledger (no DDL) and read.
        async with await PostgresEventStore.connect(cluster.dsn(service), schema="auth") as store:
            assert len(await store.read_all(0, 10)) == 1
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await _append(store)


async def test_a_schema_made_before_provisioning_is_handed_to_its_role(cluster: Cluster) -> None:
    # A deployment that ran as the superuser until now: its tables and functions change owner.
    conn = await asyncpg.connect(cluster.admin)
    try:
        await migrate(conn, "scheduling")
    finally:
        await conn.close()
    await _provision(cluster)
    assert await _append_as(cluster, "scheduling") == 1


async def test_the_verifier_is_the_one_postgres_computes(cluster: Cluster) -> None:
    role = f"{cluster.prefix}verifier"
    conn = await asyncpg.connect(cluster.admin)
    try:
        await conn.execute("SET password_encryption = 'scram-sha-256'")
        await conn.execute(f"CREATE ROLE {role} PASSWORD 'correct horse'")
        stored = await conn.fetchval("SELECT rolpassword FROM pg_authid WHERE rolname = $1", role)
    finally:
        await conn.close()
    match = re.fullmatch(r"SCRAM-SHA-256\$(\d+):([^$]+)\$.*", stored)
    assert match is not None
    import base64

    salt = base64.b64decode(match.group(2))
    assert scram_verifier("correct horse", salt=salt, iterations=int(match.group(1))) == stored


def test_the_cli_sets_passwords_from_the_environment_and_never_prints_them(cluster: Cluster) -> None:
    secret = f"pw-{secrets.token_hex(8)}"
    env = {"SUANLI_SCHEDULING_PG_PASSWORD": secret, "COLUMNS": "200"}
    runner = CliRunner(env=env)
    argv = ["dev", "db-roles", "--dsn", cluster.admin, "--role-prefix", cluster.prefix]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert secret not in result.output
    assert f"{cluster.prefix}scheduling" in result.output and "SUANLI_SCHEDULING_PG_PASSWORD" in result.output

    async def stored() -> dict[str, str | None]:
        conn = await asyncpg.connect(cluster.admin)
        try:
            rows = await conn.fetch(
                "SELECT rolname, rolpassword FROM pg_authid WHERE rolname LIKE $1", f"{cluster.prefix}%"
            )
        finally:
            await conn.close()
        return {r["rolname"]: r["rolpassword"] for r in rows}

    passwords = asyncio.run(stored())
    assert passwords[f"{cluster.prefix}scheduling"].startswith("SCRAM-SHA-256$")
    assert passwords[f"{cluster.prefix}billing"] is None  # its variable is unset: it cannot log in
    assert runner.invoke(app, argv).exit_code == 0  # again: nothing to do, no error


def test_the_cli_fails_cleanly_on_a_server_it_cannot_reach_or_that_refuses(cluster: Cluster) -> None:
    runner = CliRunner(env={"COLUMNS": "200"})
    unreachable = runner.invoke(app, ["dev", "db-roles", "--dsn", "postgresql://x@127.0.0.1:1/x"])
    assert unreachable.exit_code == 4 and "PostgreSQL" in unreachable.output
    asyncio.run(_provision(cluster))
    # A service role is no administrator: it may not create roles.
    refused = runner.invoke(
        app, ["dev", "db-roles", "--dsn", cluster.dsn("scheduling"), "--role-prefix", "zz_"]
    )
    assert refused.exit_code == 4 and "InsufficientPrivilege" in refused.output


def test_doctor_sees_a_service_role_as_least_privilege_and_warns_on_the_superuser(cluster: Cluster) -> None:
    asyncio.run(_provision(cluster))
    runner = CliRunner(env={"COLUMNS": "200"})

    def role_check(dsn: str) -> dict[str, str]:
        result = runner.invoke(
            app, ["doctor", "--dsn", dsn, "--kafka", "127.0.0.1:1", "--production", "-o", "json"]
        )
        return {c["check"]: c for c in json.loads(result.stdout)["checks"]}["postgres.role"]

    assert role_check(cluster.dsn("scheduling"))["level"] == "OK"
    superuser = role_check(cluster.admin)
    assert superuser["level"] == "WARN" and "superuser" in superuser["message"]
