"""Billing's settings: each default once, read from SUANLI_BILLING_* (and the platform-wide variables)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator

from suanli.auth.server import AuthSettings
from suanli.billing.domain.periods import Calendar
from suanli.bus import ConsumerSettings
from suanli.data import data_path
from suanli.settings import (
    KAFKA_BOOTSTRAP_ENV,
    METRICS_PORT_ENV,
    PG_DSN_ENV,
    TOPIC_PREFIX_ENV,
    SettingsConfigDict,
    shared,
)


class BillingSettings(AuthSettings):
    """What `suanli serve billing` runs with (docs/billing.md, "Settings")."""

    model_config = SettingsConfigDict(env_prefix="SUANLI_BILLING_")
    LEDGER_DSN_FALLBACK = "pg_dsn"

    kafka_bootstrap: str = shared(KAFKA_BOOTSTRAP_ENV, description="broker list")
    pg_dsn: str = shared(
        PG_DSN_ENV,
        own="SUANLI_BILLING_PG_DSN",
        description="PostgreSQL, as billing's own role (else SUANLI_PG_DSN)",
    )
    topic_prefix: str = shared(TOPIC_PREFIX_ENV, "", description="topic namespace")
    metrics_port: int | None = shared(
        METRICS_PORT_ENV, None, description="`/metrics` port, 0 picks one (`billing`'s fixed port is 9105)"
    )
    pricebook: Path = Field(data_path("deploy/billing/pricebook.yaml"), description="price book YAML")
    # `schema` would shadow a pydantic attribute; the variable keeps its name.
    db_schema: str = Field(
        "billing",
        validation_alias=AliasChoices("SUANLI_BILLING_SCHEMA", "db_schema"),
        description="PostgreSQL schema (ledger and event store)",
    )
    group: str = Field("billing", description="consumer group (and tracking key)")
    listen: str = Field(
        "127.0.0.1:50055",
        description="gRPC address (port 0 picks one); loopback unless told, like the other services.",
    )
    period: str = Field(
        "monthly",
        description="`monthly`, `weekly`, `daily`, `hourly`, or whole minutes dividing a day (`5m`, `2h`)",
    )
    close_grace_s: float = Field(
        900.0, ge=0, description="wait after a period ends for late usage before invoicing"
    )
    close_check_s: float = Field(60.0, gt=0, description="how often the closer looks")
    session_timeout_ms: int = Field(
        ConsumerSettings().session_timeout_ms,
        gt=0,
        description="how soon a crashed instance's partitions move to the others",
    )
    fetch_wait_ms: int = Field(
        1000,
        gt=0,
        description="broker fetch wait, ms: a charge is on no one's latency path, and a parked fetch costs "
        "the embedded broker CPU",
    )

    @field_validator("period")
    @classmethod
    def _known_period(cls, value: str) -> str:
        # Kept as the calendar names itself ("hourly" -> "1h", " 5M " -> "5m"), checked once here.
        return Calendar.from_setting(value).setting

    @property
    def calendar(self) -> Calendar:
        """The billing periods `period` names."""
        return Calendar.from_setting(self.period)

    @property
    def close_grace(self) -> timedelta:
        return timedelta(seconds=self.close_grace_s)

    @property
    def consumer(self) -> ConsumerSettings:
        # Heartbeats at a tenth of the session, as the broker client advises. A fetch's records are started
        # together, every partition at once, so the handler's group commit gets them as one batch: billing's
        # effects are keyed by usage event, job and node, and never depend on the order of two records.
        timeout = self.session_timeout_ms
        return ConsumerSettings(
            session_timeout_ms=timeout,
            heartbeat_interval_ms=max(100, timeout // 10),
            concurrent_partitions=True,
            pipelined=True,
            fetch_max_wait_ms=self.fetch_wait_ms,
        )
