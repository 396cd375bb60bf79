"""What `suanli doctor` concludes from the facts it gathered: pure, one function per area.

Each check returns findings at a level: OK, INFO (fine on a development machine), WARN (fix before
production; in production mode the security warnings of docs/security.md), FAIL (this will not work).
Production mode (``--production`` or ``SUANLI_ENV=production``) turns the development-only setups
(plaintext listeners, a superuser database role, ``sslmode`` below ``verify-full``) from INFO into WARN.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import parse_qs, urlsplit


class Level(StrEnum):
    OK = "OK"
    INFO = "INFO"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    level: Level
    message: str


def _dev_only(production: bool) -> Level:
    return Level.WARN if production else Level.INFO


# -- Kafka ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KafkaFacts:
    bootstrap: str
    protocol: str = ""  # the configured security protocol ("" when the settings are invalid)
    settings_error: str = ""
    reachable_error: str = ""  # why the broker could not be asked (empty: it answered)
    topics: frozenset[str] = frozenset()  # the topics the broker has (when it answered)


def kafka_findings(facts: KafkaFacts, expected_topics: Iterable[str], production: bool) -> list[Finding]:
    if facts.settings_error:
        return [Finding("kafka.security", Level.FAIL, facts.settings_error)]
    found: list[Finding] = []
    if facts.protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        what = "no authentication, " if facts.protocol == "PLAINTEXT" else ""
        found.append(
            Finding(
                "kafka.security",
                _dev_only(production),
                f"{facts.protocol}: {what}records cross the network unencrypted "
                "(SUANLI_KAFKA_SECURITY_PROTOCOL=SASL_SSL in production; docs/security.md)",
            )
        )
    else:
        found.append(Finding("kafka.security", Level.OK, f"{facts.protocol}"))
    if facts.reachable_error:
        found.append(Finding("kafka.broker", Level.FAIL, f"{facts.bootstrap}: {facts.reachable_error}"))
        return found
    found.append(Finding("kafka.broker", Level.OK, f"{facts.bootstrap} answers"))
    missing = sorted(set(expected_topics) - facts.topics)
    if missing:
        found.append(
            Finding(
                "kafka.topics",
                Level.WARN,
                f"{len(missing)} catalogue topic(s) missing: {', '.join(missing[:5])}"
                f"{' ...' if len(missing) > 5 else ''} (the services create them when they start)",
            )
        )
    else:
        found.append(Finding("kafka.topics", Level.OK, "every catalogue topic exists"))
    return found


# -- PostgreSQL -----------------------------------------------------------------------------------------

SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def sslmode(dsn: str) -> str:
    """The DSN's sslmode (libpq's default, ``prefer``, when it names none)."""
    if "://" in dsn:
        values = parse_qs(urlsplit(dsn).query).get("sslmode")
        return values[-1] if values else "prefer"
    for part in dsn.split():
        key, _, value = part.partition("=")
        if key == "sslmode":
            return value
    return "prefer"


@dataclass(frozen=True, slots=True)
class PostgresFacts:
    dsn: str  # "" when none is configured
    reachable_error: str = ""
    role: str = ""
    superuser: bool = False
    ssl_in_use: bool = False


def postgres_findings(facts: PostgresFacts, production: bool) -> list[Finding]:
    if not facts.dsn:
        return [Finding("postgres", Level.INFO, "SUANLI_PG_DSN is not set (pass --dsn to check a database)")]
    found: list[Finding] = []
    mode = sslmode(facts.dsn)
    if mode not in SSLMODES:
        found.append(Finding("postgres.sslmode", Level.FAIL, f"sslmode={mode!r} is not a libpq sslmode"))
    elif mode != "verify-full":
        found.append(
            Finding(
                "postgres.sslmode",
                _dev_only(production),
                f"sslmode={mode}: the server's identity is not verified (verify-full in production)",
            )
        )
    else:
        found.append(Finding("postgres.sslmode", Level.OK, "verify-full"))
    if facts.reachable_error:
        found.append(Finding("postgres.server", Level.FAIL, facts.reachable_error))
        return found
    found.append(
        Finding(
            "postgres.server", Level.OK, f"connected as {facts.role}{' over TLS' if facts.ssl_in_use else ''}"
        )
    )
    if facts.superuser:
        found.append(
            Finding(
                "postgres.role",
                _dev_only(production),
                f"role {facts.role} is a superuser: services should each have a least-privilege role",
            )
        )
    else:
        found.append(Finding("postgres.role", Level.OK, f"role {facts.role} is not a superuser"))
    return found


# -- gRPC endpoints, token, certificates ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndpointFacts:
    name: str  # scheduler, billing, routing
    address: str
    tls: bool
    serving: bool


def endpoint_findings(endpoints: Sequence[EndpointFacts], production: bool) -> list[Finding]:
    found: list[Finding] = []
    for e in endpoints:
        check = f"grpc.{e.name}"
        if not e.serving:
            how = "over TLS" if e.tls else "in plaintext"
            found.append(Finding(check, Level.FAIL, f"{e.address}: no SERVING answer {how}"))
        elif not e.tls:
            found.append(
                Finding(
                    check, _dev_only(production), f"{e.address} serving in plaintext (tokens unencrypted)"
                )
            )
        else:
            found.append(Finding(check, Level.OK, f"{e.address} serving over TLS"))
    return found


def token_findings(claims: dict[str, object] | None, error: str, now: dt.datetime) -> list[Finding]:
    """``claims``: the CLI token's claims, read without verifying the signature (the servers verify)."""
    if error:
        return [Finding("token", Level.FAIL, error)]
    if claims is None:
        return [Finding("token", Level.INFO, "no token (--token, SUANLI_TOKEN or the context's)")]
    roles = claims.get("roles")
    named = ", ".join(str(r) for r in roles) if isinstance(roles, list) else ""
    who = f"{claims.get('sub', '?')} ({named or 'no roles'})"
    expires = claims.get("exp")
    if not isinstance(expires, int | float):
        return [Finding("token", Level.WARN, f"{who}: the token never expires")]
    left = dt.datetime.fromtimestamp(expires, dt.UTC) - now
    if left <= dt.timedelta(0):
        return [Finding("token", Level.FAIL, f"{who}: expired {-left.total_seconds() / 3600:.1f} h ago")]
    level = Level.WARN if left < dt.timedelta(days=1) else Level.OK
    return [Finding("token", level, f"{who}: expires in {left.total_seconds() / 3600:.1f} h")]


def certificate_findings(name: str, not_after: dt.datetime | None, error: str, now: dt.datetime) -> Finding:
    check = f"tls.{name}"
    if error:
        return Finding(check, Level.FAIL, error)
    assert not_after is not None
    left = not_after - now
    if left <= dt.timedelta(0):
        return Finding(check, Level.FAIL, f"expired on {not_after:%Y-%m-%d}")
    level = Level.WARN if left < dt.timedelta(days=30) else Level.OK
    return Finding(check, level, f"valid until {not_after:%Y-%m-%d} ({left.days} days)")


def worst(findings: Iterable[Finding]) -> Level:
    order = [Level.OK, Level.INFO, Level.WARN, Level.FAIL]
    return max((f.level for f in findings), key=order.index, default=Level.OK)
