"""`suanli doctor`: check this machine's configuration against what production needs (docs/security.md).

It gathers facts (the Kafka security settings and the broker's topics, the database role and its TLS,
the context's gRPC endpoints, the CLI's token, certificates) and `doctor_checks` judges them. Nothing is
changed. Exit 1 when a check fails (with ``--strict``: also when one warns).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from typing import Annotated, Any

import typer

from suanli.cli import config
from suanli.cli.doctor_checks import (
    EndpointFacts,
    Finding,
    KafkaFacts,
    Level,
    PostgresFacts,
    certificate_findings,
    endpoint_findings,
    kafka_findings,
    postgres_findings,
    token_findings,
    worst,
)
from suanli.cli.output import TABLE, NoHeadersOption, OutputOption, Rows, emit_rows

PRODUCTION_ENV = "SUANLI_ENV"
ADDRESS_ENVS = {
    "scheduler": "SUANLI_SCHEDULER_ADDR",
    "billing": "SUANLI_BILLING_ADDR",
    "routing": "SUANLI_ROUTING_ADDR",
}
TIMEOUT_S = 5.0


def doctor(
    production: Annotated[
        bool,
        typer.Option(
            "--production",
            help=f"Judge as production (also {PRODUCTION_ENV}=production): plaintext, "
            "superuser roles and sslmode below verify-full warn.",
        ),
    ] = False,
    dsn: Annotated[str, typer.Option("--dsn", help="PostgreSQL DSN to check (default SUANLI_PG_DSN).")] = "",
    kafka: Annotated[
        str, typer.Option("--kafka", help="Kafka bootstrap to check (default SUANLI_KAFKA_BOOTSTRAP).")
    ] = "",
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 on warnings too.")] = False,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
) -> None:
    """Check the configuration: Kafka security, database role and TLS, endpoints, token, certificates.

    Nothing is changed; see docs/security.md ("suanli doctor") for what each check means.
    """
    production = production or os.environ.get(PRODUCTION_ENV, "").lower() == "production"
    now = dt.datetime.now(dt.UTC)
    findings = asyncio.run(_gather(production, dsn or os.environ.get("SUANLI_PG_DSN", ""), kafka, now))
    rows = Rows(
        ("check", "level", "message"),
        [(f.check, f.level.value, f.message) for f in findings],
        wrap=frozenset({"message"}),
        kind="check",
        items=[{"check": f.check, "level": f.level.value, "message": f.message} for f in findings],
        key="checks",
    )
    verdict = worst(findings)
    emit_rows(
        output,
        {"production": production, "worst": verdict.value, "checks": rows.items},
        rows,
        no_headers=no_headers,
    )
    if verdict is Level.FAIL or (strict and verdict is Level.WARN):
        raise typer.Exit(1)


async def _gather(production: bool, dsn: str, kafka: str, now: dt.datetime) -> list[Finding]:
    from suanli.bus import CATALOGUE, topic_name

    bootstrap = kafka or os.environ.get("SUANLI_KAFKA_BOOTSTRAP", "")
    found: list[Finding] = []
    if bootstrap:
        expected = [topic_name(spec.name) for spec in CATALOGUE]
        found += kafka_findings(await _kafka(bootstrap), expected, production)
    else:
        found.append(
            Finding("kafka", Level.INFO, "SUANLI_KAFKA_BOOTSTRAP is not set (pass --kafka to check one)")
        )
    found += postgres_findings(await _postgres(dsn), production)
    found += _endpoints(production)
    found += _token(now)
    found += _certificates(now)
    return found


async def _kafka(bootstrap: str) -> KafkaFacts:
    from aiokafka.admin import AIOKafkaAdminClient

    from suanli.bus.security import KafkaSecurity
    from suanli.settings import SettingsError

    try:
        security = KafkaSecurity.load()
    except SettingsError as exc:
        return KafkaFacts(bootstrap, settings_error=str(exc))
    try:
        options = security.client_options()
    except OSError as exc:  # a CA, certificate or password file that cannot be read
        return KafkaFacts(bootstrap, security.security_protocol, settings_error=f"{exc}")
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, request_timeout_ms=int(TIMEOUT_S * 1000), **options
    )
    try:
        await asyncio.wait_for(admin.start(), TIMEOUT_S)
        topics = await asyncio.wait_for(admin.list_topics(), TIMEOUT_S)
    except Exception as exc:
        return KafkaFacts(bootstrap, security.security_protocol, reachable_error=_why(exc))
    finally:
        await admin.close()
    return KafkaFacts(bootstrap, security.security_protocol, topics=frozenset(topics))


async def _postgres(dsn: str) -> PostgresFacts:
    if not dsn:
        return PostgresFacts("")
    import asyncpg

    try:
        conn = await asyncpg.connect(dsn, timeout=TIMEOUT_S)
    except Exception as exc:
        return PostgresFacts(dsn, reachable_error=_why(exc))
    try:
        row = await conn.fetchrow(
            "SELECT current_user AS role, "
            "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser, "
            "COALESCE((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false) AS ssl"
        )
    finally:
        await conn.close()
    assert row is not None
    return PostgresFacts(dsn, role=row["role"], superuser=bool(row["superuser"]), ssl_in_use=bool(row["ssl"]))


def _endpoints(production: bool) -> list[Finding]:
    from suanli.platform.health import grpc_serving

    try:
        context = config.active_context()
        ca_pem = config.ca()
    except config.ConfigError as exc:
        return [Finding("config", Level.FAIL, str(exc))]
    named = {
        kind: os.environ.get(env) or (context.servers.get(kind) if context else None)
        for kind, env in ADDRESS_ENVS.items()
    }
    endpoints = [
        EndpointFacts(kind, address, ca_pem is not None, grpc_serving(address, TIMEOUT_S, ca_pem))
        for kind, address in named.items()
        if address
    ]
    if not endpoints:
        return [
            Finding(
                "grpc",
                Level.INFO,
                f"no context and no address variables: endpoints not checked ({config.config_path()})",
            )
        ]
    return endpoint_findings(endpoints, production)


def _token(now: dt.datetime) -> list[Finding]:
    import jwt

    try:
        value = config.token()
    except (config.ConfigError, OSError) as exc:
        return token_findings(None, str(exc), now)
    if not value:
        return token_findings(None, "", now)
    try:
        claims: dict[str, Any] = jwt.decode(value, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        return token_findings(None, f"the token is not a JWT: {exc}", now)
    return token_findings(claims, "", now)


def _certificates(now: dt.datetime) -> list[Finding]:
    from cryptography import x509

    found: list[Finding] = []
    paths = {"ca": _context_ca(), "server": os.environ.get("SUANLI_TLS_CERT", "")}
    for name, path in paths.items():
        if not path:
            continue
        try:
            with open(path, "rb") as pem:
                certificate = x509.load_pem_x509_certificate(pem.read())
        except (OSError, ValueError) as exc:
            found.append(certificate_findings(name, None, f"{path}: {exc}", now))
            continue
        found.append(certificate_findings(name, certificate.not_valid_after_utc, "", now))
    return found


def _context_ca() -> str:
    if config.SELECTED.ca is not None:
        return str(config.SELECTED.ca)
    if os.environ.get(config.CA_ENV):
        return os.environ[config.CA_ENV]
    try:
        context = config.active_context()
    except config.ConfigError:
        return ""
    return os.path.expanduser(context.ca) if context and context.ca else ""


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
