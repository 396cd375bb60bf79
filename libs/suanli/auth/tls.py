"""Transport security for the platform's gRPC servers and clients: TLS, optional mutual TLS, dev certificates.

A server with ``SUANLI_TLS_CERT`` and ``SUANLI_TLS_KEY`` serves TLS only (a plaintext client cannot even
finish its handshake); with ``SUANLI_TLS_CLIENT_CA`` as well it requires a client certificate signed by that
CA (mTLS, for services and agents). Without them it serves plaintext and logs that it does. Tokens
(`suanli.auth.interceptor`) are checked the same either way: TLS protects them on the wire, it does not
replace them.

`create_dev_certificates` makes a local CA, a server certificate for the loopback names, a client
certificate, and client certificates that are identities of their own: one for services and one for
agents, each naming its role (`suanli.auth.peer`; `suanli dev certs`; `suanli up` uses it for every run).
Production deployments bring certificates from their own CA.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from pydantic import model_validator

from suanli.auth.peer import role_uri
from suanli.auth.principal import Role
from suanli.settings import ServiceSettings, shared

log = logging.getLogger(__name__)

TLS_CERT_ENV = "SUANLI_TLS_CERT"
TLS_KEY_ENV = "SUANLI_TLS_KEY"
TLS_CLIENT_CA_ENV = "SUANLI_TLS_CLIENT_CA"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


class TlsSettings(ServiceSettings):
    """The TLS settings every gRPC service reads (same names in each)."""

    tls_cert: Path | None = shared(
        TLS_CERT_ENV, None, description="Server certificate chain (PEM); with tls_key: serve TLS only."
    )
    tls_key: Path | None = shared(TLS_KEY_ENV, None, description="Private key of tls_cert (PEM).")
    tls_client_ca: Path | None = shared(
        TLS_CLIENT_CA_ENV,
        None,
        description="CA (PEM) whose client certificates are required (mutual TLS); unset: none asked.",
    )

    @model_validator(mode="after")
    def _cert_with_key(self) -> TlsSettings:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError(f"{TLS_CERT_ENV} and {TLS_KEY_ENV} go together: set both or neither")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError(
                f"{TLS_CLIENT_CA_ENV} needs {TLS_CERT_ENV} and {TLS_KEY_ENV} (mTLS is TLS first)"
            )
        return self


def server_credentials(settings: TlsSettings) -> grpc.ServerCredentials | None:
    """The server's TLS credentials as configured; None for plaintext."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    client_ca = settings.tls_client_ca.read_bytes() if settings.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


def add_port(server: grpc.aio.Server, address: str, settings: TlsSettings | None) -> int:
    """Bind ``address`` with TLS when configured, else in plaintext (logged); the port bound."""
    credentials = None if settings is None else server_credentials(settings)
    if credentials is None:
        log.warning(
            "gRPC on %s is PLAINTEXT (%s unset): tokens cross the wire in the clear", address, TLS_CERT_ENV
        )
        return server.add_insecure_port(address)
    mutual = " with client certificates required" if settings and settings.tls_client_ca else ""
    log.info("gRPC on %s serves TLS%s", address, mutual)
    return server.add_secure_port(address, credentials)


def channel_credentials(
    ca: bytes, *, cert: bytes | None = None, key: bytes | None = None
) -> grpc.ChannelCredentials:
    """A client's TLS credentials: trust ``ca``; present ``cert``/``key`` when the server asks (mTLS)."""
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


@dataclass(frozen=True)
class DevCertificates:
    """Where `create_dev_certificates` put its files (PEM): the CA, the server's and the clients' pairs.

    ``client`` names no role (it still needs a token); ``service`` and ``agent`` are identities with the
    role of their name when a call carries no token (docs/security.md, "Certificates as identities").
    """

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    service_cert: Path
    service_key: Path
    agent_cert: Path
    agent_key: Path

    @classmethod
    def under(cls, directory: Path) -> DevCertificates:
        """The file names in ``directory``."""
        return cls(
            directory / "ca.pem",
            directory / "server.pem",
            directory / "server-key.pem",
            directory / "client.pem",
            directory / "client-key.pem",
            directory / "service.pem",
            directory / "service-key.pem",
            directory / "agent.pem",
            directory / "agent-key.pem",
        )


def create_dev_certificates(
    directory: Path,
    *,
    hosts: Sequence[str] = LOOPBACK_NAMES,
    days: int = 30,
    now: dt.datetime | None = None,
) -> DevCertificates:
    """A local CA, a server certificate for ``hosts`` and the client certificates, all signed by the CA.

    Keys are P-256 and written 0600; the CA key is not kept (nothing else is ever signed with it), so a
    new set means new files everywhere — which is what a development CA should cost.
    """
    at = now or dt.datetime.now(dt.UTC)
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    out = DevCertificates.under(directory)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "suanli development CA")])
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), at, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write(out.ca, ca.public_bytes(serialization.Encoding.PEM), mode=0o644)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    client = ExtendedKeyUsageOID.CLIENT_AUTH
    for cert_path, key_path, common_name, usage, extra in (
        (out.server_cert, out.server_key, "suanli server", ExtendedKeyUsageOID.SERVER_AUTH, names),
        (out.client_cert, out.client_key, "suanli client", client, []),
        (out.service_cert, out.service_key, "suanli service", client, [_role(Role.SERVICE)]),
        (out.agent_cert, out.agent_key, "suanli agent", client, [_role(Role.AGENT)]),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        builder = _builder(subject, ca_name, key.public_key(), at, days).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if extra:
            builder = builder.add_extension(x509.SubjectAlternativeName(extra), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        _write(key_path, pem, mode=0o600)
    return out


def _role(role: Role) -> x509.GeneralName:
    return x509.UniformResourceIdentifier(role_uri(role))


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePublicKey, at: dt.datetime, days: int
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(at - dt.timedelta(minutes=5))  # a little clock skew between processes
        .not_valid_after(at + dt.timedelta(days=days))
    )


def _write(path: Path, data: bytes, *, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    path.chmod(mode)
