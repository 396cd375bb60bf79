"""How every Kafka client of the platform authenticates and encrypts: one setting for the process.

A deployment on a real Kafka cluster runs SASL (SCRAM) over TLS (``SASL_SSL``) with per-service users and
ACLs (docs/security.md, "Kafka"); the embedded broker (Tansu) speaks plaintext only, which stays the
default. The same settings reach every client the platform creates: the bus's producer and consumers,
the admin client that ensures topics, the DLQ tooling, the faust stream processors (as
``broker_credentials``) and the services' own readers.

Environment (prefix ``SUANLI_KAFKA_``): ``SECURITY_PROTOCOL`` (PLAINTEXT | SSL | SASL_PLAINTEXT |
SASL_SSL), ``SASL_MECHANISM`` (PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512), ``SASL_USERNAME``,
``SASL_PASSWORD`` or ``SASL_PASSWORD_FILE``, ``SSL_CAFILE`` (default: the system's trust store),
``SSL_CERTFILE`` / ``SSL_KEYFILE`` (a client certificate for mutual TLS).
"""

from __future__ import annotations

import ssl
from functools import cache
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import SecretStr, model_validator

from suanli.settings import ServiceSettings, SettingsConfigDict

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class KafkaSecurity(ServiceSettings):
    """The security of every Kafka connection this process opens."""

    model_config = SettingsConfigDict(env_prefix="SUANLI_KAFKA_")

    security_protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism = "SCRAM-SHA-512"
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    sasl_password_file: Path | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.sasl:
            if not self.sasl_username:
                raise ValueError(f"SUANLI_KAFKA_SASL_USERNAME is required with {self.security_protocol}")
            if self.sasl_password is None and self.sasl_password_file is None:
                raise ValueError(
                    "SUANLI_KAFKA_SASL_PASSWORD or SUANLI_KAFKA_SASL_PASSWORD_FILE is required with "
                    f"{self.security_protocol}"
                )
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ValueError("SUANLI_KAFKA_SSL_CERTFILE and SUANLI_KAFKA_SSL_KEYFILE go together")
        if (self.ssl_cafile or self.ssl_certfile) and not self.tls:
            raise ValueError(
                f"SSL files are set but SUANLI_KAFKA_SECURITY_PROTOCOL is {self.security_protocol}"
            )
        return self

    @property
    def sasl(self) -> bool:
        """Whether clients authenticate with SASL."""
        return self.security_protocol.startswith("SASL")

    @property
    def tls(self) -> bool:
        """Whether connections are encrypted (SSL, SASL_SSL)."""
        return self.security_protocol.endswith("SSL")

    @property
    def plaintext(self) -> bool:
        """Whether records cross the network unencrypted (PLAINTEXT or SASL_PLAINTEXT)."""
        return not self.tls

    def password(self) -> str:
        """The SASL password, from the variable or read from its file."""
        if self.sasl_password is not None:
            return self.sasl_password.get_secret_value()
        assert self.sasl_password_file is not None  # checked at load
        return self.sasl_password_file.read_text().strip()

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of SSL / SASL_SSL connections (None for plaintext ones)."""
        if not self.tls:
            return None
        context = ssl.create_default_context(
            cafile=str(self.ssl_cafile) if self.ssl_cafile is not None else None
        )
        if self.ssl_certfile is not None and self.ssl_keyfile is not None:
            context.load_cert_chain(str(self.ssl_certfile), str(self.ssl_keyfile))
        return context

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka's producer, consumer and admin client."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        context = self.ssl_context()
        if context is not None:
            options["ssl_context"] = context
        if self.sasl:
            options |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.sasl_username,
                "sasl_plain_password": self.password(),
            }
        return options

    def faust_credentials(self) -> Any:
        """Faust's ``broker_credentials`` for the same connection (None for PLAINTEXT)."""
        import faust  # on use: only the stream processors load faust

        if self.security_protocol == "PLAINTEXT":
            return None
        if self.sasl:
            return faust.SASLCredentials(
                username=self.sasl_username,
                password=self.password(),
                ssl_context=self.ssl_context(),
                mechanism=self.sasl_mechanism,
            )
        return faust.SSLCredentials(self.ssl_context())


@cache
def kafka_security() -> KafkaSecurity:
    """This process's Kafka security, read from the environment once (a bad value: `SettingsError`)."""
    return KafkaSecurity.load()


def client_options() -> dict[str, Any]:
    """`KafkaSecurity.client_options` of this process: spread into every aiokafka client."""
    return kafka_security().client_options()
