"""Who is calling: the roles of the platform and the principal a verified token names.

Pure (no I/O, no clock): the verifier builds a `Principal` from a token's claims, the policy and the
servicers ask it what it may see.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """A role a token grants; what each may call is the policy table (`suanli.auth.policy`)."""

    PLATFORM_ADMIN = "platform-admin"
    TENANT_ADMIN = "tenant-admin"
    TENANT_MEMBER = "tenant-member"
    VIEWER = "viewer"
    AGENT = "agent"
    SERVICE = "service"


# Roles not bound to one tenant: they see every tenant's data (the platform's operators and services).
PLATFORM_WIDE: frozenset[Role] = frozenset({Role.PLATFORM_ADMIN, Role.SERVICE})
# Roles that make no sense without a tenant: a token granting one must name it.
TENANT_BOUND: frozenset[Role] = frozenset({Role.TENANT_ADMIN, Role.TENANT_MEMBER, Role.VIEWER})


def tenant_of_queue(queue: str) -> str:
    """The tenant a queue belongs to: the first segment of its path (``acme/research`` -> ``acme``)."""
    return queue.split("/", 1)[0]


def check_grant(tenant: str, roles: frozenset[Role]) -> None:
    """Refuse a grant that cannot be honoured: no role, or a tenant-bound role without a tenant."""
    if not roles:
        raise ValueError("a token needs at least one role")
    if roles & TENANT_BOUND and not tenant:
        names = ", ".join(sorted(r.value for r in roles & TENANT_BOUND))
        raise ValueError(f"role {names} needs a tenant")
    if tenant and "/" in tenant:
        raise ValueError(f"tenant {tenant!r} must be one queue segment (no '/')")


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller proven by a valid token: who, for which tenant, with which roles, by which token."""

    subject: str
    tenant: str
    roles: frozenset[Role]
    token_id: str
    expires_at_s: int

    @property
    def platform_wide(self) -> bool:
        """Whether the caller sees every tenant (platform-admin, service)."""
        return bool(self.roles & PLATFORM_WIDE)

    def sees(self, tenant: str) -> bool:
        """Whether the caller may see (and act on) data of ``tenant``."""
        return self.platform_wide or (bool(self.tenant) and tenant == self.tenant)

    def has_any(self, roles: frozenset[Role]) -> bool:
        """Whether the caller holds one of ``roles``."""
        return bool(self.roles & roles)

    @property
    def label(self) -> str:
        """How events and logs name the caller: ``subject@tenant#token`` (tenant omitted when none)."""
        at = f"@{self.tenant}" if self.tenant else ""
        return f"{self.subject}{at}#{self.token_id}"
