"""The developer's local stack (`suanli dev up|status|down`): state kept in `.suanli/dev.json`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from suanli.infra.broker import BrokerProcess
from suanli.infra.net import kafka_metadata_answers
from suanli.infra.postgres import PostgresMode, embedded_running, resolve_postgres, stop_embedded
from suanli.infra.process import pid_alive, terminate

__all__ = ["DevStack", "DevStatus", "down", "embedded_running", "load", "status", "up"]


@dataclass(frozen=True)
class DevStack:
    """What `suanli dev up` started, as recorded in ``.suanli/`` for `status` and `down`."""

    broker_pid: int
    kafka_bootstrap: str
    pg_dsn: str
    pg_source: str
    pg_data_dir: str | None

    @property
    def broker_port(self) -> int:
        """The port of the broker's bootstrap address."""
        return int(self.kafka_bootstrap.rsplit(":", 1)[1])


@dataclass(frozen=True)
class DevStatus:
    """Whether each part of a dev stack is up."""

    broker_running: bool
    broker_serving: bool
    postgres_running: bool


def state_file(home: Path) -> Path:
    return home / "dev.json"


def load(home: Path) -> DevStack | None:
    """The dev stack recorded under ``home``, or None when none is."""
    path = state_file(home)
    if not path.exists():
        return None
    return DevStack(**json.loads(path.read_text()))


def up(home: Path, *, pg_mode: PostgresMode = PostgresMode.AUTO, broker_port: int = 0) -> DevStack:
    """Start what is not running yet and return where everything is."""
    existing = load(home)
    if existing is not None and status(existing).broker_serving and status(existing).postgres_running:
        return existing
    if existing is not None:
        down(home)
    home.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(log_path=home / "tansu.log", port=broker_port, detached=True)
    bootstrap = broker.start()
    assert broker.pid is not None
    pg = resolve_postgres(pg_mode, data_dir=home / "pg", keep_running=True)
    stack = DevStack(
        broker_pid=broker.pid,
        kafka_bootstrap=bootstrap,
        pg_dsn=pg.dsn,
        pg_source=pg.source,
        pg_data_dir=str(pg.data_dir) if pg.data_dir else None,
    )
    state_file(home).write_text(json.dumps(asdict(stack), indent=2))
    return stack


def status(stack: DevStack) -> DevStatus:
    """Whether the broker process runs and serves, and whether PostgreSQL runs."""
    pg_running = True
    if stack.pg_source == "embedded" and stack.pg_data_dir:
        pg_running = embedded_running(Path(stack.pg_data_dir))
    return DevStatus(
        broker_running=pid_alive(stack.broker_pid),
        broker_serving=kafka_metadata_answers("127.0.0.1", stack.broker_port),
        postgres_running=pg_running,
    )


def down(home: Path) -> DevStack | None:
    """Stop what the recorded dev stack started and forget it; return it, or None when none was recorded."""
    stack = load(home)
    if stack is None:
        return None
    terminate(stack.broker_pid)
    if stack.pg_source == "embedded" and stack.pg_data_dir:
        stop_embedded(Path(stack.pg_data_dir))
    state_file(home).unlink(missing_ok=True)
    return stack
