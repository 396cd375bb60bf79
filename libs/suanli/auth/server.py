"""Authentication for a service's gRPC server, from its settings: the interceptor and its ledger view.

A service's settings inherit `AuthSettings`; with ``SUANLI_AUTH_PUBLIC_KEY`` unset the server runs
without authentication (and logs that loudly), which is what unit and integration fixtures that predate
tokens get. `suanli up` always sets it (docs/security.md). The server trusts that key and the signing
keys the ledger holds (not retired), and, when it requires client certificates (``SUANLI_TLS_CLIENT_CA``),
takes a call without a token as the certificate's identity.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from suanli.auth.interceptor import Authenticator, AuthInterceptor
from suanli.auth.ledger import DEFAULT_SCHEMA, LedgerView
from suanli.auth.tls import TlsSettings
from suanli.auth.tokens import KeyRing, TokenVerifier, load_public_key
from suanli.eventstore import PostgresEventStore
from suanli.settings import shared

log = logging.getLogger(__name__)

PUBLIC_KEY_ENV = "SUANLI_AUTH_PUBLIC_KEY"
AUTH_DSN_ENV = "SUANLI_AUTH_DSN"


class AuthSettings(TlsSettings):
    """The platform-wide authentication settings every gRPC service reads (same names in each)."""

    auth_public_key: Path | None = shared(
        PUBLIC_KEY_ENV,
        None,
        description="Ed25519 public key (PEM) that verifies tokens; unset: auth off.",
    )
    # The service's own PostgreSQL field, used for the ledger when SUANLI_AUTH_DSN is not set.
    LEDGER_DSN_FALLBACK: ClassVar[str] = ""

    auth_dsn: str = shared(
        AUTH_DSN_ENV,
        "",
        description="PostgreSQL of the token ledger (revocations); default: the service's SUANLI_PG_DSN.",
    )
    auth_schema: str = shared("SUANLI_AUTH_SCHEMA", DEFAULT_SCHEMA, description="Schema of the token ledger.")
    auth_refresh_s: float = shared(
        "SUANLI_AUTH_REFRESH_S", 2.0, gt=0, description="Seconds between reads of new revocations."
    )
    auth_open_health: bool = shared(
        "SUANLI_AUTH_OPEN_HEALTH", True, description="Serve health and reflection without a token."
    )

    @property
    def ledger_dsn(self) -> str:
        """Where the token ledger is: ``SUANLI_AUTH_DSN``, else the service's own database."""
        fallback = getattr(self, self.LEDGER_DSN_FALLBACK, "") if self.LEDGER_DSN_FALLBACK else ""
        return self.auth_dsn or str(fallback or "")


@dataclass
class ServerAuth:
    """The interceptor to install and the ledger view behind it (refreshed while the server runs)."""

    interceptor: AuthInterceptor
    ledger: LedgerView


@contextlib.asynccontextmanager
async def server_auth(
    settings: AuthSettings, now: Callable[[], float] | None = None
) -> AsyncIterator[ServerAuth | None]:
    """Authentication for a server as configured, or None when it is off; the refresh stops on exit.

    Start-up fails when the key cannot be read or the ledger cannot be reached: a server that was told
    to authenticate never serves without it.
    """
    if settings.auth_public_key is None:
        log.warning("authentication is OFF (%s unset): every caller may call every RPC", PUBLIC_KEY_ENV)
        yield None
        return
    dsn = settings.ledger_dsn
    if not dsn:
        raise ValueError(f"{PUBLIC_KEY_ENV} is set but neither {AUTH_DSN_ENV} nor SUANLI_PG_DSN is")
    keys = KeyRing(load_public_key(settings.auth_public_key))
    async with await PostgresEventStore.connect(dsn, schema=settings.auth_schema, max_size=2) as store:
        view = LedgerView(store, settings.auth_refresh_s, keys)
        await view.refresh()
        certificates = settings.tls_client_ca is not None
        authenticator = Authenticator(
            TokenVerifier(keys), view, *(() if now is None else (now,)), certificates=certificates
        )
        interceptor = AuthInterceptor(authenticator, open_health=settings.auth_open_health)
        task = asyncio.create_task(view.run(), name="auth-ledger")
        try:
            log.info(
                "authentication on (key %s, %d keys trusted with the ledger's, %d revoked tokens%s)",
                settings.auth_public_key,
                len(keys),
                len(view.revoked),
                ", client certificates as identities" if certificates else "",
            )
            yield ServerAuth(interceptor, view)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
