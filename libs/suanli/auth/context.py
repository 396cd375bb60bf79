"""The principal of the call being served, for the servicers' tenant rules (RESOURCE and LIST).

The interceptor sets it before a servicer runs; with authentication off nothing is set and every
tenant is visible (the platform's behaviour before tokens existed).
"""

from __future__ import annotations

from contextvars import ContextVar

from suanli.auth.principal import Principal

PRINCIPAL: ContextVar[Principal | None] = ContextVar("suanli_principal", default=None)


def current() -> Principal | None:
    """The caller of the RPC being served; None when the server runs without authentication."""
    return PRINCIPAL.get()


def sees(tenant: str) -> bool:
    """Whether the caller may see data of ``tenant`` (always, without authentication)."""
    principal = PRINCIPAL.get()
    return principal is None or principal.sees(tenant)


def label() -> str:
    """The caller as events name it (``subject@tenant#token``); empty without authentication."""
    principal = PRINCIPAL.get()
    return "" if principal is None else principal.label
