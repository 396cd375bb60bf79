"""The agent's settings: each default defined here once, read from ``SUANLI_SENSING_*`` and the flags.

The broker and the topic namespace keep their platform-wide names (``SUANLI_KAFKA_BOOTSTRAP``,
``SUANLI_TOPIC_PREFIX``), which `suanli up` sets for every service. Repeatable flags (``--label``,
``--peer``) are a comma-separated list in the environment: ``SUANLI_SENSING_LABELS=pool=a,rack=3``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from suanli.auth.server import AuthSettings
from suanli.sensing.adapters.confinement import DEFAULT_TASK_PATH, Confinement
from suanli.sensing.adapters.probes import Peer
from suanli.sensing.adapters.replicas import DEFAULT_REPLICA_INTERVAL_S
from suanli.sensing.domain.identity import NodeIdentity
from suanli.settings import (
    KAFKA_BOOTSTRAP_ENV,
    TOPIC_PREFIX_ENV,
    SettingsConfigDict,
    shared,
)
from suanli.telemetry import METRICS_PORT_ENV, METRICS_PORTS

# Every agent's placements consumer group starts with it (sensing-agent-<node>, sensing-fleet-<fleet>),
# so one prefixed Kafka ACL covers them (`suanli dev kafka-acls`).
GROUP_PREFIX = "sensing-"


class SensingSettings(AuthSettings):
    """`suanli agent`: where the node is, how often it reports, the broker it reports to.

    The authentication and TLS settings (platform-wide names) are those of its logs endpoint.
    """

    model_config = SettingsConfigDict(env_prefix="SUANLI_SENSING_")

    bootstrap: str = shared(KAFKA_BOOTSTRAP_ENV, "127.0.0.1:9092", description="Kafka bootstrap servers.")
    topic_prefix: str = shared(TOPIC_PREFIX_ENV, "", description="Topic namespace.")
    node_id: str | None = Field(None, description="Node id (default: the host name).")
    region: str = Field("local", min_length=1, description="Region of this node.")
    zone: str | None = Field(None, description="Zone (default: <region>-a).")
    site: str | None = Field(None, description="Site / data centre (default: <region>-1).")
    labels: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, description="Node labels KEY=VALUE."
    )
    interval_s: float = Field(5.0, ge=0.1, description="Seconds between snapshots.")
    peers: Annotated[tuple[Peer, ...], NoDecode] = Field(
        (), description="Peer agents to probe, HOST:PORT[=REGION/SITE]."
    )
    probe_port: int = Field(0, ge=0, le=65535, description="Accept peers' TCP probes on this port (0: off).")
    probe_interval_s: float = Field(30.0, ge=1.0, description="Seconds between probe rounds.")
    bandwidth_every: int = Field(
        10, ge=0, description="Measure bandwidth to each peer every Nth probe round (0: never)."
    )
    bandwidth_mib: float = Field(4.0, gt=0.0, le=64.0, description="MiB per bandwidth transfer.")
    faults_path: Path | None = Field(
        None, description="Simulated fleets: faults file re-read each probe round (docs/sensing.md)."
    )
    grace_s: float = Field(10.0, ge=0.0, description="SIGTERM-to-SIGKILL grace when stopping tasks.")
    self_fence_s: float = Field(
        0.0,
        ge=0.0,
        description="Stop every task once no snapshot was acknowledged for this long (the platform may have "
        "requeued them elsewhere); at most the scheduler's SUANLI_SCHEDULING_LOST_FENCE_S. 0: never (a "
        "broker outage longer than it would stop every task).",
    )
    topic_check_s: float = Field(
        5.0,
        gt=0.0,
        description="Seconds between looks at the broker; one that started over (lost its topics) gets "
        "its topics back and a new order consumer.",
    )
    sim_duration_s: float = Field(
        300.0,
        ge=0.0,
        description="Simulated task length when the placement has no duration_s nor SUANLI_SIM_DURATION_S.",
    )
    replica_interval_s: float = Field(
        DEFAULT_REPLICA_INTERVAL_S,
        gt=0.0,
        description="Seconds between a hosted inference replica's load reports (a real replica's are "
        "scrapes of its /metrics).",
    )
    replica_host: str | None = Field(
        None,
        description="Host (name or address) routing reaches this node's inference replicas at, in their "
        "load reports (default: the host name).",
    )
    task_log_dir: Path | None = Field(None, description="Write each task's output to a file here.")
    logs_listen: str | None = Field(
        None,
        description="Serve the task logs (AgentLogs gRPC) on HOST:PORT (port 0 picks one); needs "
        "--task-log-dir. Unset: not served.",
    )
    logs_advertise: str | None = Field(
        None,
        description="HOST:PORT the scheduler dials for the logs, published as the node's "
        "suanli.io/logs-endpoint label (default: the listen host, or the host name, and the bound port).",
    )
    task_path: str = Field(DEFAULT_TASK_PATH, min_length=1, description="PATH a task starts with.")
    task_passthrough: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Agent environment variables handed to tasks by name (e.g. LD_LIBRARY_PATH)."
    )
    task_limits: bool = Field(True, description="Enforce tasks' memory and CPU (cgroup v2, else rlimits).")
    task_address_space_factor: float = Field(
        4.0, ge=0.0, description="Without cgroup v2: RLIMIT_AS = memory request x this (0: none)."
    )
    task_cpu_seconds: int = Field(0, ge=0, description="RLIMIT_CPU per task, CPU seconds (0: none).")
    cgroup_parent: Path | None = Field(
        None, description="Delegated cgroup v2 directory for task cgroups (default: detect)."
    )
    metrics_port: int | None = shared(
        METRICS_PORT_ENV, METRICS_PORTS["sensing"], description="Port of /metrics (0 picks a free one)."
    )
    run_as: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict, description="Run a tenant's tasks as a local user TENANT=USER (agent as root)."
    )

    @field_validator("labels", mode="before")
    @classmethod
    def _parse_labels(cls, value: Any) -> Any:
        if isinstance(value, str | list | tuple):
            return dict(_pair(text) for text in _items(value))
        return value

    @field_validator("run_as", mode="before")
    @classmethod
    def _parse_run_as(cls, value: Any) -> Any:
        if isinstance(value, str | list | tuple):
            return dict(_pair(text, "run-as") for text in _items(value))
        return value

    @field_validator("task_passthrough", mode="before")
    @classmethod
    def _parse_passthrough(cls, value: Any) -> Any:
        return tuple(_items(value)) if isinstance(value, str | list | tuple) else value

    def confinement(self) -> Confinement:
        """How this agent confines the tasks it runs."""
        return Confinement(
            path=self.task_path,
            passthrough=self.task_passthrough,
            limits=self.task_limits,
            address_space_factor=self.task_address_space_factor,
            cpu_seconds=self.task_cpu_seconds,
            cgroup_parent=self.cgroup_parent,
            run_as=self.run_as,
        )

    @field_validator("peers", mode="before")
    @classmethod
    def _parse_peers(cls, value: Any) -> Any:
        if isinstance(value, str | list | tuple):
            return tuple(item if isinstance(item, Peer) else Peer.parse(item) for item in _items(value))
        return value

    def identity(self, hostname: str) -> NodeIdentity:
        """This node's identity; ``hostname`` names it when no node id was given."""
        return NodeIdentity(
            self.node_id or hostname,
            self.region,
            self.zone or f"{self.region}-a",
            self.site or f"{self.region}-1",
            self.labels,
        )


def _items(value: str | Iterable[Any]) -> list[Any]:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return list(value)


def _pair(text: str, what: str = "label") -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"{what} {text!r}: expected KEY=VALUE")
    return key, value
