"""TLS on a real gRPC server: trusted clients get through, plaintext and untrusted ones do not; mTLS."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from pydantic import ValidationError

from suanli.auth.tls import TlsSettings, add_port, channel_credentials, create_dev_certificates
from suanli.cli.config import aio_bearer_channel


async def _serve(settings: TlsSettings) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    port = add_port(server, "127.0.0.1:0", settings)
    await server.start()
    return server, f"localhost:{port}"


async def _check(channel: grpc.aio.Channel) -> int:
    async with channel:
        answer = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return int(answer.status)


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    certs = create_dev_certificates(tmp_path / "tls")
    server, address = await _serve(TlsSettings(tls_cert=certs.server_cert, tls_key=certs.server_key))
    try:
        yield address, tmp_path / "tls"
    finally:
        await server.stop(None)


async def test_a_client_trusting_the_ca_is_served_over_tls(tls_server: tuple[str, Path]) -> None:
    address, directory = tls_server
    ca = (directory / "ca.pem").read_bytes()
    assert await _check(aio_bearer_channel(address, "", ca)) == health_pb2.HealthCheckResponse.SERVING


async def test_a_plaintext_client_is_refused_by_a_tls_server(tls_server: tuple[str, Path]) -> None:
    address, _ = tls_server
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _check(aio_bearer_channel(address, ""))
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


async def test_a_client_trusting_another_ca_is_refused(tls_server: tuple[str, Path], tmp_path: Path) -> None:
    address, _ = tls_server
    other = create_dev_certificates(tmp_path / "other").ca.read_bytes()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await _check(aio_bearer_channel(address, "", other))
    assert refused.value.code() is grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls_requires_a_client_certificate_from_the_ca(tmp_path: Path) -> None:
    certs = create_dev_certificates(tmp_path / "tls")
    settings = TlsSettings(tls_cert=certs.server_cert, tls_key=certs.server_key, tls_client_ca=certs.ca)
    server, address = await _serve(settings)
    ca = certs.ca.read_bytes()
    try:
        with pytest.raises(grpc.aio.AioRpcError):
            await _check(aio_bearer_channel(address, "", ca))  # no client certificate
        with_cert = channel_credentials(
            ca, cert=certs.client_cert.read_bytes(), key=certs.client_key.read_bytes()
        )
        answer = await _check(grpc.aio.secure_channel(address, with_cert))
        assert answer == health_pb2.HealthCheckResponse.SERVING
    finally:
        await server.stop(None)


def test_dev_certificates_keep_their_keys_private(tmp_path: Path) -> None:
    certs = create_dev_certificates(tmp_path / "tls")
    for key in (certs.server_key, certs.client_key):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "tls").stat().st_mode) == 0o700
    assert certs.ca.read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")


def test_half_a_tls_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="go together"):
        TlsSettings(tls_cert=tmp_path / "server.pem")
    with pytest.raises(ValidationError, match="mTLS is TLS first"):
        TlsSettings(tls_client_ca=tmp_path / "ca.pem")
