"""Kafka security settings: what every aiokafka client and faust app of the process is given."""

from __future__ import annotations

import ssl
from pathlib import Path

import faust
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from suanli.auth.tls import create_dev_certificates
from suanli.bus.security import KafkaSecurity
from suanli.settings import SettingsError


def test_plaintext_is_the_default_and_adds_nothing() -> None:
    security = KafkaSecurity.load({})
    assert security.plaintext and not security.sasl
    assert security.client_options() == {}
    assert security.faust_credentials() is None


async def test_sasl_ssl_with_scram_reaches_every_client(tmp_path: Path) -> None:
    certs = create_dev_certificates(tmp_path)
    (tmp_path / "password").write_text("s3cret\n")
    security = KafkaSecurity.load(
        {
            "SUANLI_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "SUANLI_KAFKA_SASL_USERNAME": "scheduling",
            "SUANLI_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "password"),
            "SUANLI_KAFKA_SSL_CAFILE": str(certs.ca),
        }
    )
    options = security.client_options()
    assert options["security_protocol"] == "SASL_SSL"
    assert (options["sasl_mechanism"], options["sasl_plain_username"], options["sasl_plain_password"]) == (
        "SCRAM-SHA-512",
        "scheduling",
        "s3cret",
    )
    context = options["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.verify_mode is ssl.CERT_REQUIRED
    assert context.check_hostname
    # aiokafka takes them as they are (constructing connects nothing).
    AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", **options)
    AIOKafkaConsumer(bootstrap_servers="127.0.0.1:1", **options)
    AIOKafkaAdminClient(bootstrap_servers="127.0.0.1:1", **options)
    credentials = security.faust_credentials()
    assert isinstance(credentials, faust.SASLCredentials)
    assert (credentials.username, credentials.password, credentials.mechanism.value) == (
        "scheduling",
        "s3cret",
        "SCRAM-SHA-512",
    )
    assert credentials.ssl_context is not None and not security.plaintext


def test_ssl_with_a_client_certificate(tmp_path: Path) -> None:
    certs = create_dev_certificates(tmp_path)
    security = KafkaSecurity.load(
        {
            "SUANLI_KAFKA_SECURITY_PROTOCOL": "SSL",
            "SUANLI_KAFKA_SSL_CAFILE": str(certs.ca),
            "SUANLI_KAFKA_SSL_CERTFILE": str(certs.client_cert),
            "SUANLI_KAFKA_SSL_KEYFILE": str(certs.client_key),
        }
    )
    assert set(security.client_options()) == {"security_protocol", "ssl_context"}
    assert isinstance(security.faust_credentials(), faust.SSLCredentials)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SUANLI_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "SUANLI_KAFKA_SASL_USERNAME is required"),
        (
            {"SUANLI_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SUANLI_KAFKA_SASL_USERNAME": "u"},
            "SUANLI_KAFKA_SASL_PASSWORD or SUANLI_KAFKA_SASL_PASSWORD_FILE is required",
        ),
        (
            {"SUANLI_KAFKA_SECURITY_PROTOCOL": "SSL", "SUANLI_KAFKA_SSL_CERTFILE": "/c.pem"},
            "SUANLI_KAFKA_SSL_CERTFILE and SUANLI_KAFKA_SSL_KEYFILE go together",
        ),
        ({"SUANLI_KAFKA_SSL_CAFILE": "/ca.pem"}, "SSL files are set but SUANLI_KAFKA_SECURITY_PROTOCOL"),
        ({"SUANLI_KAFKA_SECURITY_PROTOCOL": "TLS"}, "SUANLI_KAFKA_SECURITY_PROTOCOL"),
    ],
)
def test_incomplete_settings_are_refused_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        KafkaSecurity.load(env)
