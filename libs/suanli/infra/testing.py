"""pytest fixtures over the launcher: a session broker, a session database, per-test topic names.

Registered from tests/conftest.py with `pytest_plugins = ["suanli.infra.testing"]`.
- `SUANLI_KAFKA_BOOTSTRAP` set: tests use that broker instead of starting Tansu.
- `SUANLI_TEST_PG=embedded`: ignore `SUANLI_PG_DSN` and port 5432 and start the embedded server,
  which is what a fresh machine gets.
Each test session creates its own database and drops it at the end, so tests never touch a user's data.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from suanli.infra.broker import BrokerProcess
from suanli.infra.dsn import with_database
from suanli.infra.postgres import PostgresEndpoint, PostgresMode, resolve_postgres

KAFKA_ENV = "SUANLI_KAFKA_BOOTSTRAP"
TEST_PG_ENV = "SUANLI_TEST_PG"


def outside_pytest_root(prefix: str) -> Path:
    """A new directory, readable by other users, outside pytest's temp root (removed by the caller)."""
    # As root, embedded PostgreSQL runs as a system user that must reach its data directory. pytest
    # resets its own temp root to 0700 whenever another pytest session starts on the machine, which
    # would lock that user out mid-run; a directory of our own keeps the server reachable.
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="session")
def infra_dir() -> Iterator[Path]:
    """A directory for the session's broker log and embedded PostgreSQL data."""
    path = outside_pytest_root("suanli-infra-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def service_home() -> Iterator[Path]:
    """A fresh directory for a test that starts embedded PostgreSQL (or a whole stack) itself."""
    path = outside_pytest_root("suanli-home-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka_bootstrap(infra_dir: Path) -> Iterator[str]:
    """Bootstrap address of ``SUANLI_KAFKA_BOOTSTRAP``, or of a Tansu broker started for the session."""
    external = os.environ.get(KAFKA_ENV)
    if external:
        yield external
        return
    broker = BrokerProcess(log_path=infra_dir / "tansu.log")
    bootstrap = broker.start()
    try:
        yield bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def postgres_server(infra_dir: Path) -> Iterator[PostgresEndpoint]:
    """The PostgreSQL server the session's databases are created on (see `resolve_postgres`)."""
    mode = PostgresMode(os.environ.get(TEST_PG_ENV, PostgresMode.AUTO.value))
    endpoint = resolve_postgres(mode, data_dir=infra_dir / "pg")
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture(scope="session")
def pg_dsn(postgres_server: PostgresEndpoint) -> Iterator[str]:
    """DSN of a database created for this test session and dropped after it."""
    name = f"suanli_test_{secrets.token_hex(4)}"
    asyncio.run(_admin(postgres_server.dsn, f'CREATE DATABASE "{name}"'))
    try:
        yield with_database(postgres_server.dsn, name)
    finally:
        asyncio.run(_admin(postgres_server.dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def topic_prefix(request: pytest.FixtureRequest) -> str:
    """A prefix unique to this test, so tests sharing the session broker never see each other's events."""
    stem = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40].strip("-").lower()
    return f"t-{stem}-{secrets.token_hex(3)}"


async def _admin(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()
