"""One PostgreSQL role per service, each owning its own schema and nothing else (docs/security.md).

Run as an administrator (a superuser, or a role that may create roles and is a member of those it
creates), `provision` makes the database match a list of `ServiceRole`: a LOGIN role per service that
is no superuser and may create no database or role, the schema the service keeps its state in created
and owned by that role, PUBLIC's rights on that schema revoked, and read access (SELECT) to the schemas
a service is named a reader of (the token ledger) — nothing else across schemas. The service then
migrates its own schema as its own role (`suanli.eventstore.migrator` runs no DDL a role may not).

Everything happens in one transaction under an advisory lock, so two provisioners started together (two
compose replicas of the init step) neither race on CREATE ROLE nor see half of the other's work, and a
second run changes nothing but passwords it is given. Passwords are hashed here (SCRAM-SHA-256) and sent
as verifiers, so the clear text never reaches the server's statement log.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import asyncpg

from suanli.eventstore.migrator import check_schema, migrate

__all__ = ["DEFAULT_ROLE_PREFIX", "ServiceRole", "provision", "scram_verifier"]

DEFAULT_ROLE_PREFIX = "suanli_"  # suanli_scheduling, suanli_billing, ...

_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_LOCK = "suanli.eventstore.roles"
# What no service role may hold, set again on every run so a role widened by hand is narrowed back.
_ATTRIBUTES = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT"
SCRAM_ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)


@dataclass(frozen=True, slots=True)
class ServiceRole:
    """A service's database role: the schema it owns (if any) and the schemas it may read."""

    role: str
    schema: str | None = None
    reads: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _ROLE.match(self.role):
            raise ValueError(f"role must match {_ROLE.pattern}, got {self.role!r}")
        for schema in (*([self.schema] if self.schema else []), *self.reads):
            check_schema(schema)


def scram_verifier(password: str, *, salt: bytes | None = None, iterations: int = SCRAM_ITERATIONS) -> str:
    """The SCRAM-SHA-256 verifier PostgreSQL stores for ``password`` (RFC 5802, as libpq computes it)."""
    salt = salt if salt is not None else secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"


async def provision(
    conn: asyncpg.Connection,
    roles: Sequence[ServiceRole],
    passwords: Mapping[str, str] | None = None,
    *,
    lock_database: bool = True,
) -> None:
    """Create or correct every role, its schema and its grants; `passwords` by role (absent: unchanged).

    A role created without a password cannot log in until one is given. ``lock_database`` also revokes
    PUBLIC's CONNECT and TEMPORARY on the database and CREATE on its ``public`` schema, so a role not in
    ``roles`` (another application's) cannot open it; leave it off on a database shared with others.
    Schemas that have readers are migrated here, as their owner, so a reader (which may not create their
    tables) finds them current on its first start.
    """
    passwords = passwords or {}
    owners = {r.schema: r.role for r in roles if r.schema}
    unknown = sorted({s for r in roles for s in r.reads} - set(owners))
    if unknown:
        raise ValueError(f"schemas read but owned by no role: {', '.join(unknown)}")
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", _LOCK)
        database, admin = await conn.fetchrow("SELECT quote_ident(current_database()), current_user")
        if admin in {r.role for r in roles}:
            # Narrowing it would take the administrator's own rights away in the middle of the run.
            raise ValueError(f"{admin} is the administrator running this, not a service role")
        if lock_database:
            await conn.execute(f"REVOKE CONNECT, TEMPORARY ON DATABASE {database} FROM PUBLIC")
            await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        for spec in roles:
            await _role(conn, spec.role, passwords.get(spec.role))
            await conn.execute(f'GRANT CONNECT ON DATABASE {database} TO "{spec.role}"')
            if spec.schema:
                await _schema(conn, spec.schema, spec.role)
        for spec in roles:
            for schema in spec.reads:
                await _reader(conn, schema, owners[schema], spec.role)
        for schema in sorted({s for r in roles for s in r.reads}):
            # SET LOCAL ROLE: the tables are the owner's, so its later migrations may alter them.
            await conn.execute(f'SET LOCAL ROLE "{owners[schema]}"')
            await migrate(conn, schema)
            await conn.execute("RESET ROLE")


async def _role(conn: asyncpg.Connection, role: str, password: str | None) -> None:
    exists = await conn.fetchval("SELECT true FROM pg_roles WHERE rolname = $1", role)
    verb = "ALTER" if exists else "CREATE"
    statement = f'{verb} ROLE "{role}" {_ATTRIBUTES}'
    if password is not None:
        # A verifier, quoted by the server (utility statements take no parameters).
        literal = await conn.fetchval("SELECT quote_literal($1)", scram_verifier(password))
        statement += f" PASSWORD {literal}"
    await conn.execute(statement)
    # A non-superuser administrator must be a member to hand the role its schema and to migrate as it.
    if not exists and not await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        await conn.execute(f'GRANT "{role}" TO CURRENT_USER')


async def _schema(conn: asyncpg.Connection, schema: str, role: str) -> None:
    exists = await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", f'"{schema}"')
    if exists:
        await conn.execute(f'ALTER SCHEMA "{schema}" OWNER TO "{role}"')
        await _adopt(conn, schema, role)
    else:
        await conn.execute(f'CREATE SCHEMA "{schema}" AUTHORIZATION "{role}"')
    await conn.execute(f'REVOKE ALL ON SCHEMA "{schema}" FROM PUBLIC')


# Relations by kind, in an order where a table's owned sequences move with it before sequences are seen.
_KINDS = (("r", "TABLE"), ("p", "TABLE"), ("v", "VIEW"), ("m", "MATERIALIZED VIEW"), ("S", "SEQUENCE"))


async def _adopt(conn: asyncpg.Connection, schema: str, role: str) -> None:
    """Give ``role`` what a schema made before provisioning holds (one a superuser migrated)."""
    for kind, word in _KINDS:
        names = await conn.fetch(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = $1 AND c.relkind::text = $2 AND c.relowner <> $3::regrole",
            schema,
            kind,
            f'"{role}"',
        )
        for row in names:
            await conn.execute(f'ALTER {word} "{schema}"."{row["relname"]}" OWNER TO "{role}"')
    functions = await conn.fetch(
        "SELECT p.oid::regprocedure::text AS signature FROM pg_proc p"
        " WHERE p.pronamespace = $1::regnamespace AND p.proowner <> $2::regrole",
        f'"{schema}"',
        f'"{role}"',
    )
    for row in functions:
        await conn.execute(f'ALTER FUNCTION {row["signature"]} OWNER TO "{role}"')


async def _reader(conn: asyncpg.Connection, schema: str, owner: str, reader: str) -> None:
    await conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{reader}"')
    await conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{reader}"')
    # Tables the owner creates later (its next migrations) are readable too.
    await conn.execute(
        f'ALTER DEFAULT PRIVILEGES FOR ROLE "{owner}" IN SCHEMA "{schema}"'
        f' GRANT SELECT ON TABLES TO "{reader}"'
    )
