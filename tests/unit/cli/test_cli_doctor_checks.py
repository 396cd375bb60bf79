"""`suanli doctor`'s judgements: development setups are INFO, WARN in production; broken ones FAIL."""

from __future__ import annotations

import datetime as dt

import pytest

from suanli.cli.doctor_checks import (
    EndpointFacts,
    KafkaFacts,
    Level,
    PostgresFacts,
    certificate_findings,
    endpoint_findings,
    kafka_findings,
    postgres_findings,
    sslmode,
    token_findings,
    worst,
)

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def levels(findings: list) -> dict[str, Level]:  # type: ignore[type-arg]
    return {f.check: f.level for f in findings}


@pytest.mark.parametrize(("production", "expected"), [(False, Level.INFO), (True, Level.WARN)])
def test_plaintext_kafka_is_fine_for_development_and_a_warning_in_production(
    production: bool, expected: Level
) -> None:
    facts = KafkaFacts("k:9092", "PLAINTEXT", topics=frozenset({"a", "b"}))
    found = kafka_findings(facts, ["a", "b"], production)
    assert levels(found) == {"kafka.security": expected, "kafka.broker": Level.OK, "kafka.topics": Level.OK}
    assert "unencrypted" in found[0].message


def test_sasl_ssl_kafka_is_ok_and_missing_topics_or_an_absent_broker_are_named() -> None:
    found = kafka_findings(KafkaFacts("k:9092", "SASL_SSL", topics=frozenset({"a"})), ["a", "b"], True)
    assert levels(found) == {"kafka.security": Level.OK, "kafka.broker": Level.OK, "kafka.topics": Level.WARN}
    assert "1 catalogue topic(s) missing: b" in found[2].message
    away = kafka_findings(
        KafkaFacts("k:9092", "SASL_SSL", reachable_error="KafkaConnectionError"), ["a"], True
    )
    assert levels(away)["kafka.broker"] is Level.FAIL and "k:9092: KafkaConnectionError" in away[1].message
    bad = kafka_findings(
        KafkaFacts("k:9092", settings_error="SUANLI_KAFKA_SASL_USERNAME is required"), [], False
    )
    assert [(f.check, f.level) for f in bad] == [("kafka.security", Level.FAIL)]


@pytest.mark.parametrize(
    ("dsn", "mode"),
    [
        ("postgresql://u@h/db", "prefer"),
        ("postgresql://u@h/db?sslmode=verify-full", "verify-full"),
        ("host=h dbname=d sslmode=require", "require"),
    ],
)
def test_sslmode_is_read_from_both_dsn_forms(dsn: str, mode: str) -> None:
    assert sslmode(dsn) == mode


def test_a_superuser_role_and_weak_sslmode_warn_in_production() -> None:
    facts = PostgresFacts("postgresql://root@h/db?sslmode=require", role="root", superuser=True)
    assert levels(postgres_findings(facts, True)) == {
        "postgres.sslmode": Level.WARN,
        "postgres.server": Level.OK,
        "postgres.role": Level.WARN,
    }
    good = PostgresFacts("postgresql://sched@h/db?sslmode=verify-full", role="sched", ssl_in_use=True)
    found = postgres_findings(good, True)
    assert worst(found) is Level.OK and found[1].message == "connected as sched over TLS"
    assert levels(
        postgres_findings(PostgresFacts("postgresql://h/db?sslmode=bogus", reachable_error="refused"), False)
    ) == {
        "postgres.sslmode": Level.FAIL,
        "postgres.server": Level.FAIL,
    }
    assert levels(postgres_findings(PostgresFacts(""), True)) == {"postgres": Level.INFO}


def test_endpoints_plaintext_warns_in_production_and_silence_fails() -> None:
    found = endpoint_findings(
        [
            EndpointFacts("scheduler", "h:1", tls=True, serving=True),
            EndpointFacts("billing", "h:2", tls=False, serving=True),
            EndpointFacts("routing", "h:3", tls=True, serving=False),
        ],
        production=True,
    )
    assert levels(found) == {
        "grpc.scheduler": Level.OK,
        "grpc.billing": Level.WARN,
        "grpc.routing": Level.FAIL,
    }


def test_tokens_that_expire_soon_or_never_warn_and_expired_ones_fail() -> None:
    claims = {"sub": "alice", "roles": ["tenant-member"]}
    in_hours = token_findings({**claims, "exp": (NOW + dt.timedelta(hours=2)).timestamp()}, "", NOW)[0]
    assert (in_hours.level, in_hours.message) == (Level.WARN, "alice (tenant-member): expires in 2.0 h")
    assert (
        token_findings({**claims, "exp": (NOW + dt.timedelta(days=7)).timestamp()}, "", NOW)[0].level
        is Level.OK
    )
    assert (
        token_findings({**claims, "exp": (NOW - dt.timedelta(hours=1)).timestamp()}, "", NOW)[0].level
        is Level.FAIL
    )
    assert token_findings(claims, "", NOW)[0].message == "alice (tenant-member): the token never expires"
    assert token_findings(None, "", NOW)[0].level is Level.INFO


def test_certificates_expiring_within_30_days_warn() -> None:
    assert certificate_findings("ca", NOW + dt.timedelta(days=10), "", NOW).level is Level.WARN
    assert certificate_findings("ca", NOW + dt.timedelta(days=90), "", NOW).level is Level.OK
    assert certificate_findings("ca", NOW - dt.timedelta(days=1), "", NOW).level is Level.FAIL
