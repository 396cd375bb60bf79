"""Identity from a verified client certificate (mTLS), for calls that carry no token.

A server that requires client certificates (``SUANLI_TLS_CLIENT_CA``) has already verified the peer's chain
against that CA when a call reaches the interceptor; gRPC then puts the certificate's names in the call's
auth context. The subject is the certificate's common name; the role is named by a URI in its subject
alternative names, ``suanli://role/<role>`` (`suanli dev certs` writes them). Only the tenantless,
non-administrative roles can come from a certificate (`CERTIFICATE_ROLES`): a CA that signs transport
certificates must not thereby be able to mint platform administrators.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from suanli.auth.principal import Principal, Role
from suanli.errors import Unauthenticated

ROLE_URI_PREFIX = "suanli://role/"
CERTIFICATE_ROLES: frozenset[Role] = frozenset({Role.SERVICE, Role.AGENT})
# What the principal's token id reads for a certificate identity (logs, audit: ``cn#x509``); it can never
# be a ledger token id (those are ``tok-...``), so no revocation can name it by accident.
CERTIFICATE_TOKEN_ID = "x509"

AuthContext = Mapping[str, Iterable[bytes]]


def role_uri(role: Role) -> str:
    """The SAN URI that gives a client certificate ``role``."""
    return f"{ROLE_URI_PREFIX}{role.value}"


def peer_principal(auth_context: AuthContext) -> Principal | None:
    """The principal the call's verified client certificate names; None when there is no certificate.

    ``Unauthenticated`` when the certificate names no role a certificate may carry.
    """
    names = [v.decode() for v in auth_context.get("x509_common_name", ())]
    if not names:
        return None
    by_uri = {role_uri(r): r for r in CERTIFICATE_ROLES}
    sans = (v.decode() for v in auth_context.get("x509_subject_alternative_name", ()))
    roles = frozenset(by_uri[name] for name in sans if name in by_uri)
    if not roles:
        allowed = ", ".join(role_uri(r) for r in sorted(CERTIFICATE_ROLES))
        raise Unauthenticated(
            f"no token, and the client certificate {names[0]!r} names no role ({allowed}; docs/security.md)"
        )
    # The certificate's expiry was checked by the handshake; a principal from it lives for this call only.
    return Principal(names[0], "", roles, CERTIFICATE_TOKEN_ID, 0)
