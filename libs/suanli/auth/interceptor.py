"""The one gRPC server interceptor: authenticate the caller, apply the policy table, expose the principal.

The caller is proven by the call's bearer token (``authorization: Bearer <jwt>``), over plaintext, TLS or
mTLS alike; on a server that requires client certificates, a call without a token is the verified
certificate's identity instead (`suanli.auth.peer`). For each call it (1) lets health and reflection
through when they are open, (2) verifies the token (signature, key, expiry, revocation) or the
certificate's role -> UNAUTHENTICATED, (3) checks
the caller's roles against the method's rule -> PERMISSION_DENIED (a method missing from the table is
denied too), (4) for REQUEST rules compares the tenant the request names with the caller's, and then runs
the servicer with the principal in `suanli.auth.context` for the RESOURCE and LIST rules.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import grpc

from suanli.auth.context import PRINCIPAL
from suanli.auth.ledger import LedgerView
from suanli.auth.peer import AuthContext, peer_principal
from suanli.auth.policy import POLICY, Rule, TenantRule, is_open
from suanli.auth.principal import Principal, tenant_of_queue
from suanli.auth.tokens import TokenVerifier
from suanli.errors import PermissionDenied, RequestError, Unauthenticated
from suanli.rpc import status_of

AUTHORIZATION = "authorization"
BEARER = "bearer "

Admit = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Principal | None]]


class Authenticator:
    """Turns a call into a principal: a valid, unexpired, unrevoked token.

    With ``certificates`` (a server that requires client certificates), a call without a token is the
    identity of its verified client certificate instead.
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        revocations: LedgerView | None = None,
        now: Callable[[], float] = time.time,
        *,
        certificates: bool = False,
    ) -> None:
        self._verifier = verifier
        self._revocations = revocations
        self._now = now
        self._certificates = certificates

    def authenticate(
        self, metadata: Sequence[tuple[str, str | bytes]] | None, peer: AuthContext | None = None
    ) -> Principal:
        """The principal the call's bearer token (or certificate) proves; ``Unauthenticated`` says why not.

        A token, when sent, always decides: a certificate never rescues a bad token.
        """
        values = [v for k, v in metadata or () if k.lower() == AUTHORIZATION]
        if not values:
            by_certificate = peer_principal(peer or {}) if self._certificates else None
            if by_certificate is not None:
                return by_certificate
            raise Unauthenticated("no token: send 'authorization: Bearer <token>' (docs/security.md)")
        value = values[0].decode() if isinstance(values[0], bytes) else values[0]
        if not value.lower().startswith(BEARER):
            raise Unauthenticated("the authorization header must be 'Bearer <token>'")
        principal = self._verifier.verify(value[len(BEARER) :].strip(), self._now())
        if self._revocations is not None and principal.token_id in self._revocations:
            raise Unauthenticated(f"token {principal.token_id} has been revoked")
        return principal


def check_request_tenant(principal: Principal, rule: Rule, request: Any) -> None:
    """REQUEST rule: the tenant the request names must be the caller's; an empty tenant field becomes it."""
    *path, name = rule.tenant_field.split(".")
    holder = request
    for part in path:
        holder = getattr(holder, part)
    value = str(getattr(holder, name))
    if not value.strip():
        # A queue is required: validation answers for it. A bare tenant field means "my tenant".
        if not rule.queue and principal.tenant and not principal.platform_wide:
            setattr(holder, name, principal.tenant)
        return
    tenant = tenant_of_queue(value.strip()) if rule.queue else value.strip()
    if not principal.sees(tenant):
        mine = principal.tenant or "(none)"
        named = (
            f"queue {value.strip()!r} belongs to tenant {tenant!r}" if rule.queue else f"tenant {tenant!r}"
        )
        raise PermissionDenied(f"{named}: this token is for tenant {mine!r}")


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Enforces the policy table (`suanli.auth.policy.POLICY`) on every call of its server."""

    def __init__(
        self, authenticator: Authenticator, *, open_health: bool = True, policy: Mapping[str, Rule] = POLICY
    ) -> None:
        self._auth = authenticator
        self._open_health = open_health
        self._policy = policy

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        """The method's handler, wrapped so the checks run before the servicer does."""
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or (self._open_health and is_open(method)):
            return handler
        rule = None if is_open(method) else self._policy.get(method)

        async def admit(request: Any, context: grpc.aio.ServicerContext) -> Principal | None:
            try:
                return self._admit(method, rule, request, context)
            except RequestError as exc:
                await context.abort(status_of(exc), str(exc))
                raise  # abort raises; this keeps type checkers and readers sure of it

        return _wrapped(handler, admit)

    def _admit(
        self, method: str, rule: Rule | None, request: Any, context: grpc.aio.ServicerContext
    ) -> Principal:
        principal = self._auth.authenticate(context.invocation_metadata(), context.auth_context())
        if is_open(method):
            return principal  # health / reflection with open_health off: any valid token
        if rule is None:
            raise PermissionDenied(f"{method} is not in the policy table")
        if not principal.has_any(rule.roles):
            held = ", ".join(sorted(r.value for r in principal.roles))
            raise PermissionDenied(f"role {held} may not call {method.rsplit('/', 1)[-1]}")
        if rule.tenant is TenantRule.REQUEST and request is not None:
            check_request_tenant(principal, rule, request)
        return principal


def _wrapped(handler: grpc.RpcMethodHandler, admit: Admit) -> grpc.RpcMethodHandler:
    """``handler`` with ``admit`` run first and the principal set for the servicer."""
    codec = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary is not None:
        inner_uu = handler.unary_unary

        async def unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            token = PRINCIPAL.set(await admit(request, context))
            try:
                return await inner_uu(request, context)
            finally:
                PRINCIPAL.reset(token)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **codec)
    if handler.stream_unary is not None:
        inner_su = handler.stream_unary

        async def stream_unary(requests: Any, context: grpc.aio.ServicerContext) -> Any:
            PRINCIPAL.set(await admit(None, context))
            return await inner_su(requests, context)

        return grpc.stream_unary_rpc_method_handler(stream_unary, **codec)
    # Server-streaming answers; a streamed request (reflection) is not looked at, only the token is.
    unary = handler.unary_stream is not None
    inner_s = handler.unary_stream if unary else handler.stream_stream

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> Any:
        # Each call runs in its own task, so setting (not resetting) confines it to this call.
        PRINCIPAL.set(await admit(request if unary else None, context))
        answer = inner_s(request, context)
        if inspect.isasyncgen(answer):
            async for item in answer:
                yield item
        else:
            await answer  # a handler that writes through context.write

    make = grpc.unary_stream_rpc_method_handler if unary else grpc.stream_stream_rpc_method_handler
    return make(streaming, **codec)
