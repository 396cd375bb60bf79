"""Client certificates as identities, on a real grpc.aio server that requires them (mTLS): a call without
a token is its certificate's subject and role, a token still wins, and no certificate means no handshake."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suanli.auth.context import current
from suanli.auth.interceptor import Authenticator, AuthInterceptor
from suanli.auth.peer import peer_principal
from suanli.auth.policy import POLICY, Rule, TenantRule
from suanli.auth.principal import Principal, Role
from suanli.auth.tls import (
    DevCertificates,
    TlsSettings,
    add_port,
    channel_credentials,
    create_dev_certificates,
)
from suanli.auth.tokens import Grant, TokenVerifier, sign
from suanli.cli.config import aio_bearer_channel
from suanli.errors import Unauthenticated

KEY = Ed25519PrivateKey.generate()
# An RPC for agents: none of the platform's gRPC APIs admits them, so the test server adds one.
AGENT_RPC = "/suanli.test.v1.Agents/Report"
LIST_NODES = "/suanli.scheduler.v1.Scheduler/ListNodes"  # readers, services among them
ADMIN_RPC = "/suanli.scheduler.v1.Scheduler/DefinePriorityClass"  # platform-admin only
POLICY_WITH_AGENTS = {**POLICY, AGENT_RPC: Rule(frozenset({Role.AGENT}), TenantRule.NONE)}


async def _whoami(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    principal = current()
    assert principal is not None
    return f"{principal.label} {','.join(sorted(principal.roles))}".encode()


def _handlers(methods: list[str]) -> list[grpc.GenericRpcHandler]:
    by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = {}
    for method in methods:
        service, name = method.strip("/").split("/")
        by_service.setdefault(service, {})[name] = grpc.unary_unary_rpc_method_handler(_whoami)
    return [grpc.method_handlers_generic_handler(s, h) for s, h in by_service.items()]


@pytest.fixture
async def mtls(tmp_path: Path) -> AsyncIterator[tuple[str, DevCertificates]]:
    certs = create_dev_certificates(tmp_path / "tls")
    authenticator = Authenticator(TokenVerifier(KEY.public_key()), certificates=True)
    interceptor = AuthInterceptor(authenticator, policy=POLICY_WITH_AGENTS)
    server = grpc.aio.server(interceptors=(interceptor,))
    server.add_generic_rpc_handlers(_handlers([AGENT_RPC, LIST_NODES, ADMIN_RPC]))
    settings = TlsSettings(tls_cert=certs.server_cert, tls_key=certs.server_key, tls_client_ca=certs.ca)
    port = add_port(server, "127.0.0.1:0", settings)
    await server.start()
    try:
        yield f"localhost:{port}", certs
    finally:
        await server.stop(None)


def _channel(address: str, certs: DevCertificates, cert: Path, key: Path) -> grpc.aio.Channel:
    ca = certs.ca.read_bytes()
    return grpc.aio.secure_channel(
        address, channel_credentials(ca, cert=cert.read_bytes(), key=key.read_bytes())
    )


async def _call(channel: grpc.aio.Channel, method: str, token: str = "") -> str:
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    answer: bytes = await channel.unary_unary(method)(b"", metadata=metadata, timeout=5)
    return answer.decode()


async def _refused(channel: grpc.aio.Channel, method: str, token: str = "") -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _call(channel, method, token)
    return refused.value.code(), refused.value.details() or ""


async def test_an_agent_certificate_without_token_is_an_agent(mtls: tuple[str, DevCertificates]) -> None:
    address, certs = mtls
    async with _channel(address, certs, certs.agent_cert, certs.agent_key) as channel:
        assert await _call(channel, AGENT_RPC) == "suanli agent#x509 agent"
        code, why = await _refused(channel, ADMIN_RPC)
        assert (
            code is grpc.StatusCode.PERMISSION_DENIED and why == "role agent may not call DefinePriorityClass"
        )
        code, _ = await _refused(channel, LIST_NODES)
        assert code is grpc.StatusCode.PERMISSION_DENIED  # agents read nothing on the platform's APIs


async def test_a_service_certificate_reads_but_does_not_administer(mtls: tuple[str, DevCertificates]) -> None:
    address, certs = mtls
    async with _channel(address, certs, certs.service_cert, certs.service_key) as channel:
        assert await _call(channel, LIST_NODES) == "suanli service#x509 service"
        code, _ = await _refused(channel, ADMIN_RPC)
        assert code is grpc.StatusCode.PERMISSION_DENIED


async def test_a_token_wins_over_the_certificate(mtls: tuple[str, DevCertificates]) -> None:
    address, certs = mtls
    now = int(time.time())
    admin = sign(Grant("ops", "", frozenset({Role.PLATFORM_ADMIN}), "tok-ops", now, now + 600), KEY)
    async with _channel(address, certs, certs.agent_cert, certs.agent_key) as channel:
        assert await _call(channel, ADMIN_RPC, admin) == "ops#tok-ops platform-admin"
        # A bad token is refused even though the certificate alone would have been an identity.
        code, why = await _refused(channel, AGENT_RPC, "not.a.jwt")
        assert code is grpc.StatusCode.UNAUTHENTICATED and why.startswith("token is not valid")


async def test_a_certificate_without_a_role_still_needs_a_token(mtls: tuple[str, DevCertificates]) -> None:
    address, certs = mtls
    async with _channel(address, certs, certs.client_cert, certs.client_key) as channel:
        code, why = await _refused(channel, LIST_NODES)
        assert code is grpc.StatusCode.UNAUTHENTICATED and "'suanli client' names no role" in why


async def test_a_client_without_a_certificate_is_refused_at_the_handshake(
    mtls: tuple[str, DevCertificates],
) -> None:
    address, certs = mtls
    async with aio_bearer_channel(address, "", certs.ca.read_bytes()) as channel:
        code, _ = await _refused(channel, AGENT_RPC)
    assert code is grpc.StatusCode.UNAVAILABLE


def test_only_service_and_agent_roles_come_from_a_certificate() -> None:
    def peer(*sans: str) -> dict[str, list[bytes]]:
        return {"x509_common_name": [b"node-7"], "x509_subject_alternative_name": [s.encode() for s in sans]}

    agent = Principal("node-7", "", frozenset({Role.AGENT}), "x509", 0)
    assert peer_principal(peer("node-7.example.net", "suanli://role/agent")) == agent
    assert peer_principal({"transport_security_type": [b"ssl"]}) is None  # no client certificate
    with pytest.raises(Unauthenticated, match="names no role"):
        peer_principal(peer("suanli://role/platform-admin"))  # a transport CA must not mint administrators
    # Without `certificates` (a server that does not require them) the certificate is never looked at.
    with pytest.raises(Unauthenticated, match="no token"):
        Authenticator(TokenVerifier(KEY.public_key())).authenticate((), peer("suanli://role/agent"))
