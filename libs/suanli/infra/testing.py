"""pytest fixtures over the launcher: a session broker, a session database, per-test topic names.

Registered from tests/conftest.py with `pytest_plugins = ["suanli.infra.testing"]`.
- `SUANLI_KAFKA_BOOTSTRAP` set: tests use that broker instead of starting Tansu.
- `SUANLI_TEST_PG=embedded`: ignore `SUANLI_PG_DSN` and port 5432 and start the embedded server,
  which is what a fresh machine gets.
Each test session creates its own database and drops it at the end, so tests never touch a user's data.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncpg
import pytest

from suanli.infra.broker import BrokerProcess
from suanli.infra.dsn import with_database
from suanli.infra.postgres import PostgresEndpoint, PostgresMode, resolve_postgres

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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


@contextlib.contextmanager
def recorded_spans(service: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Telemetry set up as ``service`` while the block runs, every span it ends kept in memory.

    Never exported over OTLP, whatever the environment says; a test's fixture yields from it.
    """
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from suanli import telemetry

    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    exporter = InMemorySpanExporter()
    handle = telemetry.setup(service, span_exporter=exporter)
    try:
        yield exporter
    finally:
        handle.shutdown()


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


SERVICE_DOC_OUTLINE: tuple[str, ...] = (
    "What it owns",
    "Events in",
    "Events out",
    "RPCs",
    "Settings",
    "Metrics",
    "Failure behaviour",
)
"""The sections every ``docs/<service>.md`` starts with, in this order (CONTRIBUTING.md)."""


def service_doc_problems(
    doc: Path, settings: type[Any], command: Any, not_settings: frozenset[str] = frozenset()
) -> list[str]:
    """What is wrong with a service's document: its outline, and its Settings table against the code.

    ``settings`` is the service's ``ServiceSettings`` subclass and ``command`` the click command of its
    CLI (``typer.main.get_command``). Every field must have a row ``| `name` | `ENV` | flag | default |``
    whose variable is the field's, whose flag (or ``—``) is one the command takes, and whose default
    cell starts with the field's default; further columns and words after the default are free. Every
    option of the command is a documented setting's flag, or named in ``not_settings`` (``--loglevel``).
    """
    text = doc.read_text(encoding="utf-8")
    problems: list[str] = []
    headings = tuple(line[3:].strip() for line in text.splitlines() if line.startswith("## "))
    if headings[: len(SERVICE_DOC_OUTLINE)] != SERVICE_DOC_OUTLINE:
        problems.append(f"{doc.name}: sections {headings} do not start with {SERVICE_DOC_OUTLINE}")
    section = text.split("\n## Settings\n", 1)[-1].split("\n## ", 1)[0]
    rows = {
        cells[0].strip("`"): cells[1:]
        for line in section.splitlines()
        if line.startswith("| `")
        and len(cells := [c.strip() for c in line.strip().strip("|").split("|")]) >= 4
    }
    fields = settings.model_fields
    if set(rows) != set(fields):
        problems.append(
            f"{doc.name}: Settings rows {sorted(rows)} are not the fields of {settings.__name__}: "
            f"{sorted(fields)}"
        )
    flags = {opt for param in command.params if param.name != "help" for opt in param.opts}
    documented = {cell.replace("`", "").split()[0] for cells in rows.values() if (cell := cells[1]) != "—"}
    typer_own = {"--help", "--install-completion", "--show-completion"}
    undocumented = sorted(flags - documented - not_settings - typer_own)
    if undocumented:
        problems.append(
            f"{doc.name}: options {undocumented} are neither in the Settings table nor not_settings"
        )
    for name in sorted(set(rows) & set(fields)):
        env, flag, default = (cell.replace("`", "") for cell in rows[name][:3])
        if env != settings.env_name(name):
            problems.append(
                f"{doc.name}: {name}: variable {env!r}, the code reads {settings.env_name(name)!r}"
            )
        if flag != "—" and flag.split()[0] not in flags:
            problems.append(f"{doc.name}: {name}: flag {flag!r} is not an option of the command")
        shown = _shown_defaults(settings, name)
        if not any(default.startswith(s) for s in shown):
            problems.append(f"{doc.name}: {name}: default {default!r}, the code's is {shown[0]!r}")
    return problems


def _shown_defaults(settings: type[Any], name: str) -> tuple[str, ...]:
    """Ways a document may write a field's default (``1`` for ``1.0``, paths from the data root)."""
    text = settings.default_text(name).removeprefix("default: ")
    default = settings.model_fields[name].get_default(call_default_factory=False)
    forms = [text]
    if isinstance(default, float) and default.is_integer():
        forms.append(str(int(default)))
    if isinstance(default, Path):
        from suanli.data import data_root

        with contextlib.suppress(ValueError):
            forms.append(str(default.relative_to(data_root())))
    return tuple(forms)
