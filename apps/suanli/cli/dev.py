"""`suanli dev up|status|down`: the embedded broker and database on a developer's machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from suanli.bus.acls import DEFAULT_USER_PREFIX
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows, note
from suanli.eventstore.roles import DEFAULT_ROLE_PREFIX
from suanli.infra import devstack
from suanli.infra.postgres import PostgresMode

app = typer.Typer(
    help="Start, inspect and stop the local broker and PostgreSQL; create development TLS certificates; "
    "provision database roles and Kafka ACLs.",
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


DEV_COLUMNS = ("component", "where", "state", "pid", "data_dir")


@app.command()
def status(
    home: Path = HomeOption,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
) -> None:
    """Show whether the local broker and PostgreSQL are running. Exit code 1 when something is down."""
    stack = devstack.load(home)
    if stack is None:
        note("nothing started: run `suanli dev up`")
        raise typer.Exit(1)
    state = devstack.status(stack)
    data, rows = status_rows(stack, state)
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by)
    if not (state.broker_serving and state.postgres_running):
        raise typer.Exit(1)


def status_rows(stack: devstack.DevStack, state: devstack.DevStatus) -> tuple[dict[str, Any], Rows]:
    """Each component of the dev stack: its data for scripts and its row (wide: pid and data dir)."""
    components: list[dict[str, Any]] = [
        {
            "name": "broker",
            "source": "tansu",
            "where": stack.kafka_bootstrap,
            "state": _word(state.broker_serving),
            "pid": stack.broker_pid,
            "data_dir": None,
        },
        {
            "name": "postgres",
            "source": stack.pg_source,
            "where": stack.pg_dsn,
            "state": _word(state.postgres_running),
            "pid": None,
            "data_dir": stack.pg_data_dir,
        },
    ]
    rows = Rows(
        DEV_COLUMNS,
        [
            (
                f"{c['name']} ({c['source']})",
                c["where"],
                Text(c["state"], style="green" if c["state"] == "running" else "red"),
                str(c["pid"] or "-"),
                c["data_dir"] or "-",
            )
            for c in components
        ],
        wide=frozenset({"pid", "data_dir"}),
        kind="component",
        names=[c["name"] for c in components],
        items=components,
        key="components",
    )
    return {"components": components}, rows


@app.command()
def down(home: Path = HomeOption) -> None:
    """Stop what `suanli dev up` started (a PostgreSQL it did not start is left alone)."""
    stack = devstack.down(home)
    console.print("stopped" if stack else "nothing was running")


def _word(ok: bool) -> str:
    return "running" if ok else "down"


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
    """Create a development CA and, signed by it, a server certificate and client certificates (mTLS).

    client.pem names no role (its calls still need a token); service.pem and agent.pem are identities:
    on a server that requires client certificates, a call without a token is `suanli service` (role
    service) or `suanli agent` (role agent).
    """
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
    console.print(
        f"identities without a token: {made.service_cert} (role service), {made.agent_cert} (role agent)",
        soft_wrap=True,
    )


@app.command("db-roles")
def db_roles(
    dsn: str = typer.Option(
        ...,
        "--dsn",
        envvar="SUANLI_PG_ADMIN_DSN",
        help="An administrator's DSN (a superuser, or a role with CREATEROLE that owns the database).",
    ),
    role_prefix: str = typer.Option(
        DEFAULT_ROLE_PREFIX,
        "--role-prefix",
        help="Prefix of every role name (suanli_scheduling, ...).",
    ),
    shared_database: bool = typer.Option(
        False,
        "--shared-database",
        help="Keep PUBLIC's CONNECT and TEMPORARY on the database (other applications use it too).",
    ),
) -> None:
    """Create one least-privilege PostgreSQL role per service, owning only its schema (docs/security.md).

    Passwords come from SUANLI_<SERVICE>_PG_PASSWORD (scheduling, billing, routing, auth) and are never
    printed; a role whose variable is unset keeps its password (a new one cannot log in until given one).
    Safe to run again and from several starters at once.
    """
    import os

    from suanli.cli import access
    from suanli.cli.outbox import with_connection
    from suanli.eventstore.roles import provision

    roles = access.service_roles(role_prefix)
    variables = {r.role: access.password_variable(r, role_prefix) for r in roles}
    passwords = {role: os.environ[var] for role, var in variables.items() if os.environ.get(var)}
    with_connection(dsn, lambda conn: provision(conn, roles, passwords, lock_database=not shared_database))
    table = Table("role", "owns schema", "reads", "password")
    for r in roles:
        password = (
            f"set from {variables[r.role]}"
            if r.role in passwords
            else f"unchanged ({variables[r.role]} unset)"
        )
        table.add_row(r.role, r.schema or "—", ", ".join(r.reads) or "—", password)
    console.print(table)
    console.print(
        "services connect as their role: SUANLI_SCHEDULING_PG_DSN, SUANLI_BILLING_PG_DSN, "
        "SUANLI_ROUTING_PG_DSN"
    )


@app.command("kafka-acls")
def kafka_acls(
    bootstrap: str = typer.Option(
        "kafka-1:9092,kafka-2:9092,kafka-3:9092", "--bootstrap", help="Brokers the Kafka tools connect to."
    ),
    command_config: str = typer.Option(
        "/tmp/suanli-kafka/admin.properties",
        "--command-config",
        help="The tools' client properties (a super user's).",
    ),
    tools: str = typer.Option(
        "/opt/kafka/bin", "--tools", help="Directory of kafka-acls.sh and kafka-configs.sh."
    ),
    user_prefix: str = typer.Option(DEFAULT_USER_PREFIX, "--user-prefix", help="Prefix of every SASL user."),
    topic_prefix: str = typer.Option("", "--topic-prefix", help="The deployment's SUANLI_TOPIC_PREFIX."),
    as_json: bool = typer.Option(False, "--json", help="The ACL entries as JSON data instead of a script."),
) -> None:
    """Print the SCRAM users and Kafka ACLs of every service, derived from the topic catalogue.

    The script sets each user's password from SUANLI_KAFKA_<USER>_PASSWORD (skipping unset ones) and adds
    allow-only ACLs: agents write only the sensing topics and read placements, only the scheduler writes
    placements, each service reads and writes only its topics and groups. deploy/kafka/acls.sh is its output.
    """
    import json

    from suanli.bus.acls import acl_bindings, kafka_acls_commands, scram_user_commands
    from suanli.cli import access

    users = access.kafka_users(user_prefix, topic_prefix)
    acls = acl_bindings(users, topic_prefix)
    if as_json:
        rows = [
            {
                "principal": a.principal,
                "resource": a.resource.value,
                "pattern": a.pattern.value,
                "name": a.name,
                "operation": a.operation,
            }
            for a in acls
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    lines = [
        "#!/bin/sh",
        "# Generated by `suanli dev kafka-acls`: do not edit; regenerate when topics or consumers change.",
        "set -eu",
        *scram_user_commands(
            users, bootstrap, command_config, tool=f"{tools}/kafka-configs.sh", prefix=user_prefix
        ),
        *kafka_acls_commands(acls, bootstrap, command_config, tool=f"{tools}/kafka-acls.sh"),
    ]
    typer.echo("\n".join(lines))
