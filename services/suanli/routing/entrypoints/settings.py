"""Routing's settings: each default defined here once, read from SUANLI_ROUTING_* and shared variables."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import BeforeValidator, Field, StringConstraints, field_validator

from suanli.auth.server import AuthSettings
from suanli.data import data_path
from suanli.routing.domain.links import ViewPolicy
from suanli.routing.domain.scoring import ScoringPolicy, Weights
from suanli.settings import (
    KAFKA_BOOTSTRAP_ENV,
    METRICS_PORT_ENV,
    PG_DSN_ENV,
    TOPIC_PREFIX_ENV,
    SettingsConfigDict,
    shared,
)
from suanli.telemetry import METRICS_PORTS

_VIEW = ViewPolicy()
_SCORING = ScoringPolicy()


class Role(StrEnum):
    """What one `suanli serve routing` process runs: both parts, or one of them (to scale them apart)."""

    ALL = "all"
    API = "api"
    VIEW = "view"


def _triple(value: object) -> object:
    # "compute,network,price" in the environment; a tuple when given as a flag or in code.
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(","))
    return value


WeightTriple = Annotated[tuple[float, float, float], BeforeValidator(_triple)]


class RoutingSettings(AuthSettings):
    """What `suanli serve routing` runs with (docs/routing.md, "Settings")."""

    model_config = SettingsConfigDict(env_prefix="SUANLI_ROUTING_")
    LEDGER_DSN_FALLBACK = "pg_dsn"

    bootstrap: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = shared(
        KAFKA_BOOTSTRAP_ENV, description="Kafka broker list."
    )
    topic_prefix: str = shared(TOPIC_PREFIX_ENV, "", description="Namespace for every topic.")
    # Routing keeps no tables; with authentication on it reads the token ledger's revocations there.
    pg_dsn: str = shared(
        PG_DSN_ENV,
        "",
        own="SUANLI_ROUTING_PG_DSN",
        description="PostgreSQL of the token ledger (auth on only), as routing's own role "
        "(else SUANLI_PG_DSN).",
    )
    metrics_port: int | None = shared(
        METRICS_PORT_ENV, METRICS_PORTS["routing"], description="Port of /metrics (0 picks a free one)."
    )
    role: Role = Field(Role.ALL, description="all (view processor and API), api or view.")
    listen: str = Field("127.0.0.1:50053", description="gRPC address of the Routing API (port 0 picks one).")
    pricebook: Path = Field(data_path("deploy/billing/pricebook.yaml"), description="Price book YAML.")
    app_id: str = Field("", description="faust app id = consumer group (default: <prefix>.suanli-routing).")
    fetch_wait_ms: int = Field(100, gt=0, description="Broker fetch wait of the view processor, ms.")
    # -- the network view (domain/links.py) -------------------------------------------------------------
    probe_interval_s: float = Field(
        _VIEW.probe_interval_ms / 1000,
        gt=0,
        description="Probe interval assumed until a path's own is learned, s.",
    )
    down_after: int = Field(_VIEW.down_after, gt=0, description="Probe intervals without a round: DOWN.")
    check_s: float = Field(1.0, gt=0, description="How often stale links are looked for, s.")
    rtt_alpha: float = Field(_VIEW.rtt_alpha, gt=0, le=1, description="EWMA weight of a new RTT.")
    loss_alpha: float = Field(_VIEW.loss_alpha, gt=0, le=1, description="EWMA weight of a new loss.")
    jitter_window: int = Field(_VIEW.jitter_window, gt=0, description="Rounds behind the p95 jitter.")
    loss_degraded: float = Field(_VIEW.loss_degraded, ge=0, le=1, description="EWMA loss above: DEGRADED.")
    rtt_degraded_ratio: float = Field(
        _VIEW.rtt_degraded_ratio, gt=1, description="EWMA RTT above this x baseline: DEGRADED."
    )
    rtt_degraded_min_ms: float = Field(
        _VIEW.rtt_degraded_min_ms, ge=0, description="...and at least this many ms above the baseline."
    )
    republish_s: float = Field(
        _VIEW.republish_ms / 1000, gt=0, description="Republish an unchanged link state this often, s."
    )
    # -- Resolve (domain/scoring.py) ----------------------------------------------------------------------
    training_weights: WeightTriple = Field(
        (_SCORING.training.compute, _SCORING.training.network, _SCORING.training.price),
        description="Weights compute,network,price for training.",
    )
    inference_weights: WeightTriple = Field(
        (_SCORING.inference.compute, _SCORING.inference.network, _SCORING.inference.price),
        description="Weights compute,network,price for inference.",
    )
    rtt_ref_ms: float = Field(_SCORING.rtt_ref_ms, gt=0, description="RTT at which the network score is 0.5.")
    intra_region_rtt_ms: float = Field(
        _SCORING.intra_region_rtt_ms, ge=0, description="RTT inside the origin region when not measured."
    )
    spill_margin_s: float = Field(
        0.05,
        ge=0,
        description="network-aware: a replica out of the client's region must be this much faster.",
    )

    @property
    def group_id(self) -> str:
        # Two deployments sharing a cluster under different prefixes must not share a consumer group.
        return self.app_id or (
            f"{self.topic_prefix}.suanli-routing" if self.topic_prefix else "suanli-routing"
        )

    @property
    def view_policy(self) -> ViewPolicy:
        return ViewPolicy(
            rtt_alpha=self.rtt_alpha,
            loss_alpha=self.loss_alpha,
            jitter_window=self.jitter_window,
            loss_degraded=self.loss_degraded,
            rtt_degraded_ratio=self.rtt_degraded_ratio,
            rtt_degraded_min_ms=self.rtt_degraded_min_ms,
            probe_interval_ms=round(self.probe_interval_s * 1000),
            down_after=self.down_after,
            republish_ms=round(self.republish_s * 1000),
        )

    @property
    def scoring_policy(self) -> ScoringPolicy:
        return ScoringPolicy(
            training=Weights(*self.training_weights),
            inference=Weights(*self.inference_weights),
            rtt_ref_ms=self.rtt_ref_ms,
            intra_region_rtt_ms=self.intra_region_rtt_ms,
        )

    @field_validator("training_weights", "inference_weights")
    @classmethod
    def _weights(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        Weights(*value)  # raises ValueError, which load() reports with the variable's name
        return value
