"""Identity and access: signed tokens, the roles, the one policy table and the gRPC server interceptor.

- `principal`: `Role`, `Principal` (who is calling, what tenant it sees); pure.
- `policy`: `POLICY`, every RPC -> roles and tenant rule; pure, the source of docs/security.md's table.
- `tokens`: Ed25519 keys (`create_keys`, `key_id`), `sign`, `KeyRing` (the keys a service trusts),
  `TokenVerifier`.
- `ledger`: `TokenLedger` (tokens issued / revoked, signing keys added / retired, as events in
  PostgreSQL) and `LedgerView` (a service's revocations and keys, kept current).
- `peer`: the principal of a verified client certificate (mTLS), for calls without a token.
- `interceptor`: `AuthInterceptor` and `Authenticator`; `context`: the principal of the current call.
- `server`: `AuthSettings` (what every service reads) and `server_auth(settings)`.
"""

from suanli.auth.principal import PLATFORM_WIDE, TENANT_BOUND, Principal, Role, tenant_of_queue

__all__ = ["PLATFORM_WIDE", "TENANT_BOUND", "Principal", "Role", "tenant_of_queue"]
