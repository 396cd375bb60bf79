"""`suanli auth init | token create | token list | token revoke`: the signing key and the token ledger.

The key pair lives in ``<home>/auth/`` (``--home``, ``SUANLI_HOME``, default ``~/.suanli``): the
private key ``signing-key.pem`` (mode 0600, directory 0700) signs tokens, the public key
``signing-key.pub.pem`` is what services are given (``SUANLI_AUTH_PUBLIC_KEY``). Issued and revoked
tokens are recorded as events in the platform's PostgreSQL (``SUANLI_PG_DSN``, schema ``auth``), where
every service reads revocations (docs/security.md).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from suanli.auth.ledger import DEFAULT_SCHEMA, TokenLedger, TokenRecord
from suanli.auth.principal import Role
from suanli.auth.tokens import KeyPaths, create_keys, load_private_key
from suanli.cli import paging
from suanli.cli.client import EXIT_USAGE, Failure, fail
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, SortByOption, emit_rows
from suanli.clock import SystemClock
from suanli.errors import RequestError
from suanli.eventstore import PostgresEventStore

HOME_ENV = "SUANLI_HOME"
DEFAULT_HOME = Path("~/.suanli")
DEFAULT_TTL = "30d"
_DURATION = re.compile(r"^(\d+)([smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}

T = TypeVar("T")

app = typer.Typer(help="Signing key and access tokens (docs/security.md).", no_args_is_help=True)
token_app = typer.Typer(help="Issue, list and revoke access tokens.", no_args_is_help=True)
app.add_typer(token_app, name="token")

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)

Home = Annotated[
    Path,
    typer.Option(
        "--home", envvar=HOME_ENV, help="Platform home; the key pair is in <home>/auth/.", show_default=False
    ),
]
Dsn = Annotated[
    str, typer.Option("--dsn", envvar="SUANLI_PG_DSN", help="PostgreSQL holding the token ledger.")
]
Schema = Annotated[str, typer.Option("--schema", envvar="SUANLI_AUTH_SCHEMA", help="Schema of the ledger.")]


def key_paths(home: Path) -> KeyPaths:
    """The key pair of a platform home."""
    return KeyPaths(home.expanduser() / "auth")


def parse_ttl(text: str) -> int:
    """``90s``, ``15m``, ``12h``, ``30d`` -> seconds."""
    match = _DURATION.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise typer.BadParameter(f"{text!r}: a duration like 90s, 15m, 12h or 30d")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def operator() -> str:
    """Who runs this command, as the ledger records it."""
    try:
        return f"os:{getpass.getuser()}"
    except (KeyError, OSError):
        return f"os:uid-{os.getuid()}"


def _with_ledger(dsn: str, schema: str, work: Callable[[TokenLedger], Awaitable[T]]) -> T:
    async def run() -> T:
        async with await PostgresEventStore.connect(dsn, schema=schema, max_size=2) as store:
            return await work(TokenLedger(store, SystemClock()))

    try:
        return asyncio.run(run())
    except RequestError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    except OSError as exc:
        raise fail(Failure(f"cannot reach the token ledger's PostgreSQL: {exc}", 4)) from None


@app.command()
def init(
    home: Home = DEFAULT_HOME,
    rotate: Annotated[
        bool, typer.Option("--rotate", help="Replace an existing key (docs/security.md).")
    ] = False,
) -> None:
    """Create the Ed25519 signing key pair in <home>/auth/ (private key mode 0600)."""
    paths = key_paths(home)
    try:
        create_keys(paths, replace=rotate)
    except FileExistsError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    stdout.print(f"signing key:  {paths.private} (0600, keep it secret)")
    stdout.print(f"public key:   {paths.public}")
    stdout.print(f"services use: export SUANLI_AUTH_PUBLIC_KEY={paths.public}")


@token_app.command("create")
def create(
    subject: Annotated[str, typer.Option("--subject", "-s", help="Who the token is for.")],
    role: Annotated[list[Role], typer.Option("--role", "-r", help="A role to grant (repeatable).")],
    tenant: Annotated[str, typer.Option("--tenant", "-t", help="Tenant (needed by tenant roles).")] = "",
    ttl: Annotated[str, typer.Option("--ttl", help="Lifetime: 90s, 15m, 12h, 30d.")] = DEFAULT_TTL,
    home: Home = DEFAULT_HOME,
    dsn: Dsn = "",
    schema: Schema = DEFAULT_SCHEMA,
) -> None:
    """Sign a token, record it in the ledger and print it (only the token goes to stdout)."""
    seconds = parse_ttl(ttl)
    if not dsn:
        raise fail(Failure("no ledger: pass --dsn or set SUANLI_PG_DSN", EXIT_USAGE))
    try:
        key = load_private_key(key_paths(home).private)
    except (OSError, ValueError) as exc:
        raise fail(Failure(f"{exc} (run `suanli auth init` first?)", EXIT_USAGE)) from None
    try:
        grant, token = _with_ledger(
            dsn,
            schema,
            lambda ledger: ledger.issue(key, subject, tenant, frozenset(role), seconds, operator()),
        )
    except ValueError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    stderr.print(f"token {grant.token_id} for {subject} ({', '.join(sorted(role))}) expires in {ttl}")
    print(token)


TOKEN_COLUMNS = ("id", "subject", "tenant", "roles", "issued", "expires", "revoked", "revoked_by", "reason")


def _token_item(r: TokenRecord) -> dict[str, str]:
    def at(value: object) -> str:
        return f"{value:%Y-%m-%d %H:%M}" if value else ""

    return {
        "id": r.token_id,
        "subject": r.subject,
        "tenant": r.tenant,
        "roles": ",".join(r.roles),
        "issued": at(r.issued_at),
        "expires": at(r.expires_at),
        "revoked": at(r.revoked_at),
        "revoked_by": r.revoked_by,
        "reason": r.reason,
    }


def token_rows(records: list[TokenRecord]) -> Rows:
    """The ledger as a list answer (never the tokens themselves: only their ids)."""
    items = [_token_item(r) for r in records]
    return Rows(
        TOKEN_COLUMNS,
        [[item[c] or "-" for c in TOKEN_COLUMNS] for item in items],
        title=f"tokens: {len(items)} (times UTC)",
        wide=frozenset({"reason"}),
        kind="token",
        items=items,
        key="tokens",
    )


@token_app.command("list")
def list_tokens(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="At most this many tokens (0: all).")
    ] = 100,
    continue_token: paging.ContinueOption = "",
    dsn: Dsn = "",
    schema: Schema = DEFAULT_SCHEMA,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
) -> None:
    """The tokens in the ledger, newest first, with their subject, tenant, roles, expiry and revocation.

    When more are left, stderr says how to go on: --continue TOKEN lists the next ones.
    """
    if not dsn:
        raise fail(Failure("no ledger: pass --dsn or set SUANLI_PG_DSN", EXIT_USAGE))
    records = _with_ledger(dsn, schema, lambda ledger: ledger.tokens())
    shown, token = paging.newest_first(records, _issued, limit=limit, token=continue_token)
    rows = token_rows(shown)
    emit_rows(output, {"tokens": list(rows.items)}, rows, no_headers=no_headers, sort_by=sort_by)
    paging.more(len(shown), token)


def _issued(record: TokenRecord) -> paging.Key:
    return paging.micros(record.issued_at), record.token_id


@token_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="TOKEN_ID", help="The id `token list` shows.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded).")] = "",
    dsn: Dsn = "",
    schema: Schema = DEFAULT_SCHEMA,
) -> None:
    """Revoke a token: every service refuses it from its next refresh (SUANLI_AUTH_REFRESH_S) on."""
    if not dsn:
        raise fail(Failure("no ledger: pass --dsn or set SUANLI_PG_DSN", EXIT_USAGE))
    _with_ledger(dsn, schema, lambda ledger: ledger.revoke(token_id, operator(), reason))
    stdout.print(f"token {token_id} revoked")
