"""`suanli dev up|status|down`: the embedded broker and database on a developer's machine."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from suanli.infra import devstack
from suanli.infra.postgres import PostgresMode

app = typer.Typer(
    help="Start, inspect and stop the local broker and PostgreSQL; create development TLS certificates.",
    no_args_is_help=True,
)
console = Console()

HomeOption = typer.Option(Path(".suanli"), "--home", help="Where state, logs and the embedded database live.")


@app.command()
def up(
    home: Path = HomeOption,
    embedded_pg: bool = typer.Option(
        False, "--embedded-pg", help="Always start the embedded PostgreSQL, ignoring SUANLI_PG_DSN and :5432."
    ),
    broker_port: int = typer.Option(0, help="Broker port on 127.0.0.1 (0 picks a free one)."),
) -> None:
    """Start the Tansu broker and find or start PostgreSQL; print where they are."""
    mode = PostgresMode.EMBEDDED if embedded_pg else PostgresMode.AUTO
    stack = devstack.up(home, pg_mode=mode, broker_port=broker_port)
    console.print(f"[green]up[/] kafka={stack.kafka_bootstrap} postgres={stack.pg_dsn} ({stack.pg_source})")
    console.print(f"export SUANLI_KAFKA_BOOTSTRAP={stack.kafka_bootstrap}")
    console.print(f"export SUANLI_PG_DSN='{stack.pg_dsn}'")


@app.command()
def status(home: Path = HomeOption) -> None:
    """Show whether the local broker and PostgreSQL are running. Exit code 1 when something is down."""
    stack = devstack.load(home)
    if stack is None:
        console.print("nothing started: run `suanli dev up`")
        raise typer.Exit(1)
    state = devstack.status(stack)
    table = Table("component", "where", "state")
    table.add_row("broker (tansu)", stack.kafka_bootstrap, _word(state.broker_serving))
    table.add_row(f"postgres ({stack.pg_source})", stack.pg_dsn, _word(state.postgres_running))
    console.print(table)
    if not (state.broker_serving and state.postgres_running):
        raise typer.Exit(1)


@app.command()
def down(home: Path = HomeOption) -> None:
    """Stop what `suanli dev up` started (a PostgreSQL it did not start is left alone)."""
    stack = devstack.down(home)
    console.print("stopped" if stack else "nothing was running")


def _word(ok: bool) -> str:
    return "[green]running[/]" if ok else "[red]down[/]"


@app.command()
def certs(
    directory: Path = typer.Option(
        Path(".suanli/tls"), "--dir", help="Where to write the CA and certificates."
    ),
    host: list[str] = typer.Option(
        ["localhost", "127.0.0.1", "::1"],
        "--host",
        help="Names the server certificate is valid for (repeat).",
    ),
    days: int = typer.Option(30, min=1, help="Validity in days."),
) -> None:
    """Create a development CA, a server certificate and a client certificate (mTLS) signed by it."""
    from suanli.auth.tls import TLS_CERT_ENV, TLS_KEY_ENV, create_dev_certificates

    made = create_dev_certificates(directory.resolve(), hosts=host, days=days)
    console.print(f"[green]written[/] to {directory.resolve()} (valid {days} days for {', '.join(host)})")
    console.print("servers:  ", end="")
    console.print(f"export {TLS_CERT_ENV}={made.server_cert} {TLS_KEY_ENV}={made.server_key}", soft_wrap=True)
    console.print(f"clients:   export SUANLI_CA={made.ca}   (or `ca:` in the CLI's context)", soft_wrap=True)
    console.print(
        f"mTLS:      servers also SUANLI_TLS_CLIENT_CA={made.ca}; clients present "
        f"{made.client_cert} / {made.client_key}",
        soft_wrap=True,
    )
