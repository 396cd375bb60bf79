"""Serving's settings: each default once, read from SUANLI_SERVING_* (and the platform-wide variables)."""

from __future__ import annotations

from pydantic import AliasChoices, Field, model_validator

from suanli.auth.server import AuthSettings
from suanli.bus import ConsumerSettings
from suanli.serving.domain.service import ReplicaPolicy
from suanli.settings import (
    KAFKA_BOOTSTRAP_ENV,
    METRICS_PORT_ENV,
    PG_DSN_ENV,
    TOPIC_PREFIX_ENV,
    SettingsConfigDict,
    shared,
)


class ServingSettings(AuthSettings):
    """What `suanli serve serving` runs with (docs/serving.md, "Settings")."""

    model_config = SettingsConfigDict(env_prefix="SUANLI_SERVING_")
    LEDGER_DSN_FALLBACK = "pg_dsn"

    kafka_bootstrap: str = shared(KAFKA_BOOTSTRAP_ENV, description="broker list")
    pg_dsn: str = shared(
        PG_DSN_ENV,
        own="SUANLI_SERVING_PG_DSN",
        description="PostgreSQL, as serving's own role (else SUANLI_PG_DSN)",
    )
    topic_prefix: str = shared(TOPIC_PREFIX_ENV, "", description="topic namespace")
    metrics_port: int | None = shared(
        METRICS_PORT_ENV, None, description="`/metrics` port, 0 picks one; unset: no endpoint"
    )
    # `schema` would shadow a pydantic attribute; the variable keeps its name.
    db_schema: str = Field(
        "serving",
        validation_alias=AliasChoices("SUANLI_SERVING_SCHEMA", "db_schema"),
        description="PostgreSQL schema (service state and event store)",
    )
    group: str = Field("serving", description="consumer group (and tracking key)")
    listen: str = Field(
        "127.0.0.1:50056",
        description="gRPC address (port 0 picks one); loopback unless told, like the other services.",
    )
    guaranteed_priority_class: str = Field(
        "serving",
        description="priority class of the first min_replicas replicas' jobs (submitted not preemptible)",
    )
    surge_priority_class: str = Field(
        "serving", description="priority class of replicas above min_replicas (preemptible)"
    )
    watch_poll_s: float = Field(0.5, gt=0, description="how often WatchService looks for a change")
    session_timeout_ms: int = Field(
        ConsumerSettings().session_timeout_ms,
        gt=0,
        description="how soon a crashed instance's partitions move to the others",
    )
    fetch_wait_ms: int = Field(
        1000,
        gt=0,
        description="broker fetch wait, ms: replicas start and report load over seconds, and a parked "
        "fetch costs the embedded broker CPU",
    )

    autoscaler: bool = Field(
        True,
        description="run the autoscaler in this process (false: `suanli serve serving autoscaler` apart, "
        "or none: every count then stays as set)",
    )
    autoscaler_tick_s: float = Field(2.0, gt=0, description="how often the autoscaler decides")
    autoscaler_lease_s: float = Field(
        10.0, gt=0, description="how long an autoscaler that stopped renewing keeps the others standing by"
    )
    autoscaler_decisions_kept: int = Field(
        100, ge=1, description="decisions that changed a count kept per service (ExplainService)"
    )

    @model_validator(mode="after")
    def _lease_outlives_ticks(self) -> ServingSettings:
        if self.autoscaler_lease_s < 2 * self.autoscaler_tick_s:
            raise ValueError(
                f"autoscaler_lease_s ({self.autoscaler_lease_s}) must be at least 2 x autoscaler_tick_s "
                f"({self.autoscaler_tick_s}): the lease is renewed once per tick"
            )
        return self

    @property
    def policy(self) -> ReplicaPolicy:
        return ReplicaPolicy(self.guaranteed_priority_class, self.surge_priority_class)

    @property
    def consumer(self) -> ConsumerSettings:
        # Heartbeats at a tenth of the session, as the broker client advises.
        timeout = self.session_timeout_ms
        return ConsumerSettings(
            session_timeout_ms=timeout,
            heartbeat_interval_ms=max(100, timeout // 10),
            fetch_max_wait_ms=self.fetch_wait_ms,
        )
