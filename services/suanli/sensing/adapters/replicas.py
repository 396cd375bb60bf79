"""Simulated replicas: a simulated agent serves an inference replica's task as a live replica server.

A placement whose environment names a replica (`suanli.contracts.replica_env`, set by serving) becomes a
`suanli.replica.server.ReplicaServer` on 127.0.0.1, port picked by the system, timed by the service-time
model for the node's GPU model (device catalogue) and the task's GPU share, and publishing
ReplicaLoadReported on ``services.load`` every report interval through the agent's sink. The task holds
its resources until it is stopped (a placement's explicit duration still ends it); stopping it closes the
server and its reports at once: it sends no last report, so a balancer learns of the end from the closed
port (the gateway's exclusion) or from the reports ceasing (docs/inference.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.clock import Clock, IdFactory
from suanli.contracts.load import ReplicaLoad
from suanli.contracts.replica_env import MAX_BATCH_ENV, MODEL_ENV, REPLICA_ENV, SERVICE_ID_ENV
from suanli.errors import InvalidArgument
from suanli.replica.live import ReplicaIdentity
from suanli.replica.models import MODELS
from suanli.replica.server import ReplicaServer
from suanli.replica.service_time import replica_speed
from suanli.resources import DeviceCatalogue
from suanli.sensing.domain import records
from suanli.sensing.domain.fleet import SimNodeSpec
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.placement import MILLI, SIM_DURATION_ENV, Placement
from suanli.sensing.service_layer.ports import EventSink, LaunchError

DEFAULT_MAX_BATCH = 16  # a replica's spec default, for a placement that does not say
DEFAULT_REPLICA_INTERVAL_S = 1.0


def names_a_replica(placement: Placement) -> bool:
    """Whether the placement is an inference replica's task (serving's environment names it)."""
    return REPLICA_ENV in placement.env


def replica_identity(placement: Placement, region: str, address: str = "") -> ReplicaIdentity:
    """Which replica the placement's task is, as its load reports name it."""
    replica_id = placement.env[REPLICA_ENV]
    service_id = placement.env.get(SERVICE_ID_ENV) or replica_id.rpartition("-r")[0]
    return ReplicaIdentity(service_id, replica_id, region, address)


def replica_max_batch(placement: Placement) -> int:
    """The placement's max_batch (the spec's default when it does not say); `LaunchError` when not one."""
    raw = placement.env.get(MAX_BATCH_ENV) or str(DEFAULT_MAX_BATCH)
    try:
        max_batch = int(raw)
    except ValueError:
        max_batch = 0
    if max_batch < 1:
        raise LaunchError(f"replica {placement.env[REPLICA_ENV]}: {MAX_BATCH_ENV}={raw!r} is not 1 or more")
    return max_batch


def placement_gpus(placement: Placement) -> float:
    """The GPUs' worth the placement holds (a share of one device is a fraction)."""
    return sum(d.milli for d in placement.devices) / MILLI


@dataclass(frozen=True, slots=True)
class LoadPublisher:
    """Publishes a hosted replica's load reports, simulated or scraped, as the node's agent."""

    node: NodeIdentity
    sink: EventSink
    ids: IdFactory

    async def __call__(self, load: ReplicaLoad) -> None:
        await self.sink.publish("ReplicaLoadReported", records.replica_load(self.node, load, str(self.ids())))


@dataclass(frozen=True, slots=True)
class ReplicaHosting:
    """What a node's simulated agent needs to host replicas: its node, the catalogue, the bus, time."""

    node: SimNodeSpec
    catalogue: DeviceCatalogue
    sink: EventSink
    clock: Clock
    ids: IdFactory
    interval_s: float

    def server(self, placement: Placement) -> ReplicaServer:
        """The replica server of `placement` (not started); `LaunchError` says why it cannot run here."""
        identity = replica_identity(placement, self.node.identity.region)
        replica_id = identity.replica_id
        model = MODELS.get(placement.env.get(MODEL_ENV, ""))
        if model is None:
            known = ", ".join(MODELS)
            raise LaunchError(
                f"replica {replica_id}: model {placement.env.get(MODEL_ENV)!r} is not simulated ({known})"
            )
        if self.node.gpu_model is None or not placement.devices:
            raise LaunchError(f"replica {replica_id}: a simulated replica needs a GPU share on a GPU node")
        max_batch = replica_max_batch(placement)
        try:
            speed = replica_speed(
                model, self.catalogue.lookup(self.node.gpu_model), placement_gpus(placement), max_batch
            )
        except InvalidArgument as exc:
            raise LaunchError(f"replica {replica_id}: {exc}") from None
        publish = LoadPublisher(self.node.identity, self.sink, self.ids)
        return ReplicaServer(identity, speed, interval_s=self.interval_s, on_report=publish, clock=self.clock)


async def start_replica(hosting: ReplicaHosting, placement: Placement) -> ReplicaServer:
    """`placement`'s replica server, listening; `LaunchError` when it cannot serve on this node."""
    server = hosting.server(placement)
    try:
        await server.start()
    except OSError as exc:
        raise LaunchError(f"replica {placement.env[REPLICA_ENV]}: cannot listen: {exc}") from None
    return server


def replica_duration_s(placement: Placement) -> float | None:
    """A replica runs until stopped, unless its placement names a duration (duration_s or the env)."""
    if placement.duration_s is not None or SIM_DURATION_ENV in placement.env:
        return placement.sim_duration_s(0.0)
    return None
