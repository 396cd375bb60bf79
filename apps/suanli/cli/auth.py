"""`suanli auth init | key rotate|list|retire | token create|list|revoke`: signing keys and the token ledger.

The key pair lives in ``<home>/auth/`` (``--home``, ``SUANLI_HOME``, default ``~/.suanli``): the
private key ``signing-key.pem`` (mode 0600, directory 0700) signs tokens, the public key
``signing-key.pub.pem`` is what services may be given (``SUANLI_AUTH_PUBLIC_KEY``). Public keys, issued
and revoked tokens are recorded as events in the platform's PostgreSQL (``SUANLI_PG_DSN``, schema
``auth``), where every service reads the keys it trusts and the revocations (docs/security.md).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console

from suanli.auth.ledger import DEFAULT_SCHEMA, KeyRecord, TokenLedger, TokenRecord
from suanli.auth.principal import Role
from suanli.auth.tokens import KeyPaths, key_id, load_private_key, write_keys
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
R = TypeVar("R")

app = typer.Typer(help="Signing keys and access tokens (docs/security.md).", no_args_is_help=True)
token_app = typer.Typer(help="Issue, list and revoke access tokens.", no_args_is_help=True)
app.add_typer(token_app, name="token")
key_app = typer.Typer(help="Rotate, list and retire signing keys (no downtime).", no_args_is_help=True)
app.add_typer(key_app, name="key")

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
    if not dsn:
        raise fail(Failure("no ledger: pass --dsn or set SUANLI_PG_DSN", EXIT_USAGE))

    async def run() -> T:
        async with await PostgresEventStore.connect(dsn, schema=schema, max_size=2) as store:
            return await work(TokenLedger(store, SystemClock()))

    try:
        return asyncio.run(run())
    except RequestError as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    except OSError as exc:
        raise fail(Failure(f"cannot reach the token ledger's PostgreSQL: {exc}", 4)) from None


def _signing_key(home: Path) -> Ed25519PrivateKey:
    try:
        return load_private_key(key_paths(home).private)
    except (OSError, ValueError) as exc:
        raise fail(Failure(f"{exc} (run `suanli auth init` first?)", EXIT_USAGE)) from None


@app.command()
def init(home: Home = DEFAULT_HOME, dsn: Dsn = "", schema: Schema = DEFAULT_SCHEMA) -> None:
    """Create the Ed25519 signing key pair in <home>/auth/ (private key mode 0600).

    With a ledger (--dsn or SUANLI_PG_DSN) its public key is recorded there too, and every service
    trusts it from its next refresh on; without one, only services given the public key file do.
    """
    paths = key_paths(home)
    if paths.private.exists():
        raise fail(Failure(f"{paths.private} exists: rotate it with `suanli auth key rotate`", EXIT_USAGE))
    key = Ed25519PrivateKey.generate()
    if dsn:
        _with_ledger(dsn, schema, lambda ledger: ledger.add_key(key.public_key(), operator()))
    write_keys(paths, key)
    stdout.print(f"signing key:  {paths.private} (0600, keep it secret)")
    stdout.print(f"public key:   {paths.public} (key id {key_id(key.public_key())})")
    stdout.print(f"services use: export SUANLI_AUTH_PUBLIC_KEY={paths.public}")
    if not dsn:
        stdout.print("not in a ledger (no --dsn / SUANLI_PG_DSN): `suanli auth key rotate` will record it")


@key_app.command("rotate")
def rotate(
    home: Home = DEFAULT_HOME,
    retire_old_after: Annotated[
        str, typer.Option("--retire-old-after", help="Retire the old key after 90s, 15m, 12h, 30d.")
    ] = "",
    dsn: Dsn = "",
    schema: Schema = DEFAULT_SCHEMA,
) -> None:
    """Replace the signing key: new tokens are signed with the new one, the old one's stay valid.

    Both keys are recorded in the ledger before the new one is written, so every service trusts both
    (from its next refresh on) without a restart; the old key is trusted until `suanli auth key retire`
    or --retire-old-after.
    """
    after_s = parse_ttl(retire_old_after) if retire_old_after else 0
    old = _signing_key(home).public_key()
    new = Ed25519PrivateKey.generate()

    async def record(ledger: TokenLedger) -> datetime | None:
        # The old key may be trusted only through a service's key file (from before keys were recorded):
        # recorded now, it stays trusted after that file holds the new key.
        await ledger.add_key(old, operator())
        await ledger.add_key(new.public_key(), operator())
        return await ledger.retire_key(key_id(old), operator(), after_s, "rotated") if after_s else None

    retires = _with_ledger(dsn, schema, record)
    write_keys(key_paths(home), new)
    until = (
        f"until {retires:%Y-%m-%d %H:%M} UTC" if retires else f"until `suanli auth key retire {key_id(old)}`"
    )
    stdout.print(f"new key {key_id(new.public_key())} signs from now on: {key_paths(home).public}")
    stdout.print(f"old key {key_id(old)} still verifies {until}")
    stdout.print("services trust the new key within SUANLI_AUTH_REFRESH_S: issue its tokens after that")


@key_app.command("retire")
def retire(
    kid: Annotated[str, typer.Argument(metavar="KEY_ID", help="The id `key list` shows.")],
    after: Annotated[
        str, typer.Option("--after", help="Retire after 90s, 15m, 12h, 30d (default: now).")
    ] = "",
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded).")] = "",
    dsn: Dsn = "",
    schema: Schema = DEFAULT_SCHEMA,
) -> None:
    """Retire a signing key: every token it signed is refused (within SUANLI_AUTH_REFRESH_S of the time)."""
    after_s = parse_ttl(after) if after else 0
    at = _with_ledger(dsn, schema, lambda ledger: ledger.retire_key(kid, operator(), after_s, reason))
    stdout.print(f"key {kid} retired from {at:%Y-%m-%d %H:%M:%S} UTC")


def _at(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M}" if value else ""


def _key_item(r: KeyRecord, now: datetime) -> dict[str, str]:
    return {
        "id": r.key_id,
        "status": r.status(now),
        "added": _at(r.added_at),
        "added_by": r.added_by,
        "retires": _at(r.retired_at),
        "retired_by": r.retired_by,
        "reason": r.reason,
    }


KEY_COLUMNS = ("id", "status", "added", "added_by", "retires", "retired_by", "reason")


def key_rows(records: list[KeyRecord]) -> Rows:
    """The signing keys as a list answer, each with its status now."""
    now = SystemClock().now()
    return _rows(KEY_COLUMNS, [_key_item(r, now) for r in records], "key", wide="reason")


def _ledger_listing(
    read: Callable[[TokenLedger], Awaitable[list[R]]],
    newest: Callable[[R], paging.Key],
    rows: Callable[[list[R]], Rows],
) -> Callable[..., None]:
    """A list command over the ledger (tokens, keys): newest first, paged; stderr says how to go on."""

    def listing(
        limit: Annotated[int, typer.Option("--limit", "-n", min=0, help="At most this many (0: all).")] = 100,
        continue_token: paging.ContinueOption = "",
        dsn: Dsn = "",
        schema: Schema = DEFAULT_SCHEMA,
        output: OutputOption = TABLE,
        no_headers: NoHeadersOption = False,
        sort_by: SortByOption = "",
    ) -> None:
        records = _with_ledger(dsn, schema, read)
        shown, token = paging.newest_first(records, newest, limit=limit, token=continue_token)
        page = rows(shown)
        emit_rows(output, {page.key: list(page.items)}, page, no_headers=no_headers, sort_by=sort_by)
        paging.more(len(shown), token)

    return listing


key_app.command(
    "list",
    help="The signing keys in the ledger, newest first: id, active / retiring / retired, and since when.",
)(_ledger_listing(lambda ledger: ledger.keys(), lambda r: (paging.micros(r.added_at), r.key_id), key_rows))


def _rows(columns: tuple[str, ...], items: list[dict[str, str]], kind: str, *, wide: str) -> Rows:
    return Rows(
        columns,
        [[item[c] or "-" for c in columns] for item in items],
        title=f"{kind}s: {len(items)} (times UTC)",
        wide=frozenset({wide}),
        kind=kind,
        items=items,
        key=f"{kind}s",
    )


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
    key = _signing_key(home)
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
    return {
        "id": r.token_id,
        "subject": r.subject,
        "tenant": r.tenant,
        "roles": ",".join(r.roles),
        "issued": _at(r.issued_at),
        "expires": _at(r.expires_at),
        "revoked": _at(r.revoked_at),
        "revoked_by": r.revoked_by,
        "reason": r.reason,
    }


def token_rows(records: list[TokenRecord]) -> Rows:
    """The ledger as a list answer (never the tokens themselves: only their ids)."""
    return _rows(TOKEN_COLUMNS, [_token_item(r) for r in records], "token", wide="reason")


def _issued(record: TokenRecord) -> paging.Key:
    return paging.micros(record.issued_at), record.token_id


token_app.command(
    "list",
    help="The tokens in the ledger, newest first, with their subject, tenant, roles, expiry and revocation."
    "\n\nWhen more are left, stderr says how to go on: --continue TOKEN lists the next ones.",
)(_ledger_listing(lambda ledger: ledger.tokens(), _issued, token_rows))


@token_app.command("revoke")
def revoke(
    token_id: Annotated[str, typer.Argument(metavar="TOKEN_ID", help="The id `token list` shows.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded).")] = "",
    dsn: Dsn = "",
    schema: Schema = DEFAULT_SCHEMA,
) -> None:
    """Revoke a token: every service refuses it from its next refresh (SUANLI_AUTH_REFRESH_S) on."""
    _with_ledger(dsn, schema, lambda ledger: ledger.revoke(token_id, operator(), reason))
    stdout.print(f"token {token_id} revoked")
