"""Metering's settings: each default defined here once, read from SUANLI_METERING_* and shared variables."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from suanli.settings import (
    KAFKA_BOOTSTRAP_ENV,
    METRICS_PORT_ENV,
    TOPIC_PREFIX_ENV,
    ServiceSettings,
    SettingsConfigDict,
    shared,
)
from suanli.telemetry import METRICS_PORTS


class MeteringSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="SUANLI_METERING_")

    bootstrap: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = shared(
        KAFKA_BOOTSTRAP_ENV, description="Kafka broker list."
    )
    topic_prefix: str = shared(TOPIC_PREFIX_ENV, "", description="Namespace for every topic.")
    # How often liveness is checked and the gauges refreshed; Lost itself follows each node's own
    # report interval (lost_after of them without a snapshot).
    interval_s: float = Field(1.0, gt=0, description="Seconds between liveness checks and gauge refreshes.")
    lost_after: int = Field(3, gt=0, description="Report intervals without a snapshot before a node is Lost.")
    republish_s: float = Field(60.0, gt=0, description="Republish an unchanged capacity view this often (s).")
    metrics_port: int | None = shared(
        METRICS_PORT_ENV, METRICS_PORTS["metering"], description="Port of /metrics (0 picks a free one)."
    )
    app_id: str = Field("", description="faust app id = consumer group (default: <prefix>.suanli-metering).")
    # At most this many records, of those already fetched, are handled as one batch (one broker round
    # trip for all their outputs); a batch never waits for records still to come.
    batch_max: int = Field(500, gt=0, description="Most already-fetched records handled as one batch.")
    # Tansu answers a parked fetch about a quarter of this wait after a record arrives (faust's own 1,500 ms
    # made the capacity view ~0.3 s late on average), and each parked fetch costs it CPU in proportion to
    # the batches it reads: 250 ms costs 30-60 ms of median freshness (bench/tansu_fetch.py).
    fetch_wait_ms: int = Field(250, gt=0, description="Broker fetch wait in ms.")
    # A finished task's record is dropped this long after its end. It must exceed the longest metering
    # may fall behind its inputs: a TaskStarted read later than this after it happened is refused (a
    # pruned attempt must never be charged again), so its usage would go unmetered.
    task_retention_s: float = Field(
        86_400.0, gt=0, description="Keep a finished task's record this long after its end (s)."
    )
    # A node's or task's state that changed only in what its next input brings again (stamps, evidence,
    # utilisation sums) reaches its table's changelog at most this often; what charges or history depend
    # on is written at once. A restart recovers states up to this much older in those fields only.
    checkpoint_s: float = Field(
        30.0, ge=0, description="Most seconds a state's stamps stay out of its changelog (0: always write)."
    )
    # A broker that started over (Tansu keeps nothing) lost the changelogs: the tables held in memory are
    # then written back to them, so a worker started later rebuilds them (suanli.bus.faust_tables).
    broker_check_s: float = Field(
        5.0, gt=0, description="Seconds between looks at the broker (topics missing, a new cluster)."
    )
    prune_interval_s: float = Field(300.0, gt=0, description="Seconds between task-pruning rounds.")
    prune_batch: int = Field(1000, gt=0, description="Most task records one pruning batch drops.")

    @property
    def group_id(self) -> str:
        # Two deployments sharing a cluster under different prefixes must not share a consumer group.
        return self.app_id or (
            f"{self.topic_prefix}.suanli-metering" if self.topic_prefix else "suanli-metering"
        )
