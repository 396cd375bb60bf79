"""Settings of `suanli serve scheduling`: each default and description written once, here.

The command line (`entrypoints/cli.py`) takes its options' help from these descriptions and passes
only the flags it was given; the environment (``SUANLI_SCHEDULING_<FIELD>``, or the platform-wide
variable of a shared field) fills in the rest. docs/scheduler-service.md lists every field (a test
keeps the table in step).
"""

from __future__ import annotations

import uuid

from pydantic import Field, FilePath

from suanli.auth.server import AuthSettings
from suanli.scheduling.domain.jobs.waves import DEFAULT_WAVE_SIZE
from suanli.scheduling.service_layer.admission import AdmissionLimits
from suanli.scheduling.service_layer.projection import Retention
from suanli.settings import (
    KAFKA_BOOTSTRAP_ENV,
    METRICS_PORT_ENV,
    PG_DSN_ENV,
    TOPIC_PREFIX_ENV,
    SettingsConfigDict,
    shared,
)


def _instance_name() -> str:
    return uuid.uuid4().hex[:8]


class SchedulingSettings(AuthSettings):
    model_config = SettingsConfigDict(env_prefix="SUANLI_SCHEDULING_")
    LEDGER_DSN_FALLBACK = "dsn"

    dsn: str = shared(
        PG_DSN_ENV,
        own="SUANLI_SCHEDULING_PG_DSN",
        description="PostgreSQL DSN of the event store, as scheduling's own role (else SUANLI_PG_DSN).",
    )
    bootstrap: str = shared(KAFKA_BOOTSTRAP_ENV, description="Kafka bootstrap servers HOST:PORT[,...].")
    queues_path: FilePath | None = Field(
        None,
        description="Queue configuration YAML (example: deploy/scheduler/queues.yaml) that seeds a store "
        "holding no queue state yet (the leader records it when elected); once queue events exist it is "
        "not read.",
    )
    # Not `schema`: that name would shadow pydantic's BaseModel.schema.
    store_schema: str = Field("scheduling", description="Event store schema in PostgreSQL.")
    topic_prefix: str | None = shared(
        TOPIC_PREFIX_ENV, None, description="Prefix of every topic name (none: the catalogue's names)."
    )
    listen: str = Field("127.0.0.1:50051", description="gRPC listen address HOST:PORT (port 0 picks one).")
    policy: str = Field(
        "fgdb",
        description="Placement policy (fgdb, fgd, bestfit, packing, spread, ...); an unknown one refuses "
        "to start.",
    )
    seed: int = Field(0, description="Seed of the placement framework's random choices (with the cycle).")
    interval_s: float = Field(
        0.5, gt=0, description="Seconds between scheduling cycles (events also trigger one)."
    )
    min_cycle_gap_s: float = Field(
        0.1,
        ge=0,
        description="Least seconds between the starts of two cycles that place jobs: under load a cycle "
        "places what arrived meanwhile in one commit instead of one cycle per batch (0: a cycle after "
        "every batch).",
    )
    reconcile_grace_s: float = Field(
        15.0, ge=0, description="Seconds before a node report that disagrees with the store is acted on."
    )
    disruption_threshold: float = Field(
        0.75,
        ge=0.01,
        le=1.0,
        description="Hold evictions while this fraction of the fleet is Lost at once (a broker or "
        "network outage).",
    )
    lost_confirm_s: float = Field(
        60.0,
        ge=0,
        description="Seconds a node must stay Lost before its non-preemptible jobs are requeued "
        "(preemptible ones once the loss settled, lost_settle_s).",
    )
    lost_settle_s: float = Field(
        2.0,
        ge=0,
        description="Seconds a node must be Lost in the scheduler's view before its jobs are touched, so a "
        "burst of Lost statuses held up by an outage is judged whole by the disruption threshold.",
    )
    lost_fence_s: float = Field(
        30.0,
        ge=0,
        description="Seconds a job requeued from a lost node waits for its lost attempts to report their "
        "end before its next attempt starts anyway; at least the agents' SUANLI_AGENT_SELF_FENCE_S.",
    )
    wave_size: int = Field(
        DEFAULT_WAVE_SIZE,
        ge=0,
        description="Most tasks of one job placed at once; a larger job is placed in waves, the next once "
        "the previous one started (0: no waves).",
    )
    standby_poll_s: float = Field(
        0.5, gt=0, description="Seconds between a standby's lease attempts and store catch-ups."
    )
    leader_lease_s: float = Field(
        10.0,
        ge=3.0,
        description="Seconds a leader's lease lasts without renewal (renewed every second): a paused or "
        "partitioned leader is replaced after this long, and can write nothing once it is over.",
    )
    finished_job_retention_s: float = Field(
        3600.0,
        ge=0,
        description="Seconds a finished job stays in memory after its end (on the store's clock); older "
        "ones are read from the store on request and no longer listed by ListJobs.",
    )
    max_finished_jobs: int = Field(
        10_000,
        ge=0,
        description="Most finished jobs kept in memory, however recent; the oldest finished go first "
        "(0: no cap). Each costs memory and snapshot load time at a takeover.",
    )
    snapshot_interval_s: float = Field(
        60.0,
        gt=0,
        description="Seconds between the leader's snapshots of its state, from which a new leader starts "
        "instead of folding the store from position 0.",
    )
    snapshots_kept: int = Field(3, ge=1, description="Latest projection snapshots kept in the store.")
    topic_check_s: float = Field(
        5.0, gt=0, description="Seconds between checks that the topics exist (a broker that lost them)."
    )
    overcommit_ratio: float = Field(1.0, ge=1.0, description="Best-effort overcommit ratio of shared GPUs.")
    max_pending_jobs: int = Field(
        1000,
        ge=0,
        description="Most PENDING jobs per tenant; a submit past it is RESOURCE_EXHAUSTED (0: none).",
    )
    submit_rate: float = Field(
        50.0, ge=0, description="Submits per second per tenant, sustained (0: no limit)."
    )
    submit_burst: int = Field(100, ge=1, description="Submits per tenant at once after a quiet spell.")
    max_watch_streams: int = Field(
        1000, ge=0, description="Most WatchJob streams open at once on one instance (0: no limit)."
    )
    metrics_port: int | None = shared(
        METRICS_PORT_ENV, None, ge=0, description="Port of /metrics (0 picks one; none: no endpoint)."
    )
    agent_ca: FilePath | None = Field(
        None,
        description="CA (PEM) of the agents' logs-endpoint certificates: StreamJobLogs dials agents over "
        "TLS (unset: plaintext).",
    )

    def retention(self) -> Retention:
        """How many finished jobs the projection keeps in memory."""
        return Retention(self.finished_job_retention_s, self.max_finished_jobs)

    def admission_limits(self) -> AdmissionLimits:
        """The API's per-tenant and per-instance limits."""
        return AdmissionLimits(
            max_pending_jobs=self.max_pending_jobs,
            submit_rate=self.submit_rate,
            submit_burst=self.submit_burst,
            max_watch_streams=self.max_watch_streams,
        )

    instance: str = Field(
        default_factory=_instance_name,
        description="Name of this instance in its view consumer group and event producer.",
        json_schema_extra={"shown_default": "random"},
    )
