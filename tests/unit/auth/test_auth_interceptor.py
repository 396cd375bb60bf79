"""The interceptor on an in-process grpc.aio server: health and reflection closed by the setting, every
handler kind wrapped, and a method missing from the policy table refused."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from suanli.auth.interceptor import Authenticator, AuthInterceptor
from suanli.auth.principal import Role
from suanli.auth.tokens import Grant, TokenVerifier, sign

KEY = Ed25519PrivateKey.generate()


def _token() -> str:
    now = int(time.time())
    return sign(Grant("u", "acme", frozenset({Role.VIEWER}), "tok-u", now, now + 600), KEY)


@pytest.fixture
async def address() -> AsyncIterator[str]:
    interceptor = AuthInterceptor(Authenticator(TokenVerifier(KEY.public_key())), open_health=False)
    server = grpc.aio.server(interceptors=(interceptor,))
    checker = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    reflection.enable_server_reflection((health.SERVICE_NAME, reflection.SERVICE_NAME), server)

    async def ping(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"pong"

    extra = {"Ping": grpc.unary_unary_rpc_method_handler(ping)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("suanli.test.v1.Extra", extra),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    await checker.set("", health_pb2.HealthCheckResponse.SERVING)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def test_closed_health_and_reflection_want_a_valid_token(address: str) -> None:
    token = (("authorization", f"Bearer {_token()}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        checks = health_pb2_grpc.HealthStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await checks.Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        answer = await checks.Check(health_pb2.HealthCheckRequest(), metadata=token, timeout=5)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING

        # Reflection is a bidirectional stream: the token is checked before the first answer.
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        ask = [reflection_pb2.ServerReflectionRequest(list_services="")]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in stub.ServerReflectionInfo(iter(ask), timeout=5):
                pass
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED
        names = [
            s.name
            async for r in stub.ServerReflectionInfo(iter(ask), metadata=token, timeout=5)
            for s in r.list_services_response.service
        ]
        assert health.SERVICE_NAME in names


async def test_a_method_missing_from_the_policy_table_is_denied(address: str) -> None:
    token = (("authorization", f"Bearer {_token()}"),)
    async with grpc.aio.insecure_channel(address) as channel:
        # Health's Watch exists on the server but is a method of an open service: a valid token passes.
        call = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(), metadata=token)
        first = await call.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        call.cancel()
        # A method the server does not have: UNIMPLEMENTED (the interceptor has nothing to wrap).
        unknown = channel.unary_unary("/suanli.scheduler.v1.Scheduler/Nope")
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await unknown(b"", metadata=token, timeout=5)
        assert missing.value.code() is grpc.StatusCode.UNIMPLEMENTED
        # A method the server has but the policy table does not name: refused, whoever asks.
        ping = channel.unary_unary("/suanli.test.v1.Extra/Ping")
        with pytest.raises(grpc.aio.AioRpcError) as denied:
            await ping(b"", metadata=token, timeout=5)
        assert denied.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert denied.value.details() == "/suanli.test.v1.Extra/Ping is not in the policy table"
        with pytest.raises(grpc.aio.AioRpcError) as anonymous:
            await ping(b"", timeout=5)
        assert anonymous.value.code() is grpc.StatusCode.UNAUTHENTICATED
