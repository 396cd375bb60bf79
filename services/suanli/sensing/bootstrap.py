"""Wiring: the only place that picks adapters for the agent's ports (cosmicpython's bootstrap)."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suanli.bus import ConsumerSettings, EventConsumer, EventPublisher, Handler, ProducerSettings
from suanli.clock import Clock, IdFactory, SystemClock, uuid4_factory
from suanli.contracts import labels as labels_catalogue
from suanli.resources import DeviceCatalogue, default_catalogue
from suanli.sensing.adapters.bus import BusSink, agent_broker_watch, order_consumer
from suanli.sensing.adapters.confinement import Confinement, detect_cgroup
from suanli.sensing.adapters.faults_file import FaultsFile
from suanli.sensing.adapters.host import HostCollector, NodeCollector
from suanli.sensing.adapters.nvml import NvmlCollector, NvmlUnavailable
from suanli.sensing.adapters.probes import DEFAULT_BANDWIDTH_BYTES, Peer, TcpLinkProber
from suanli.sensing.adapters.processes import ProcessLauncher, ProcessUsageProbe
from suanli.sensing.adapters.randomness import SeededRandom
from suanli.sensing.adapters.replica_scrape import RealReplicaHosting
from suanli.sensing.adapters.replicas import DEFAULT_REPLICA_INTERVAL_S, ReplicaHosting
from suanli.sensing.adapters.simulated import (
    SimulatedCollector,
    SimulatedLauncher,
    SimulatedLinkProber,
    SimulatedUsage,
)
from suanli.sensing.domain.fleet import FleetSpec
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.links import SiteRef
from suanli.sensing.domain.simulation import SimulatedNodeModel
from suanli.sensing.domain.tasks import TaskTable
from suanli.sensing.service_layer.agent import AgentSettings, NodeAgent
from suanli.sensing.service_layer.host import AgentHost
from suanli.sensing.service_layer.ports import EventSink

# Labels every agent publishes, so operators and the scheduler can tell how a node is observed.
MODE_LABEL = labels_catalogue.AGENT_MODE
LOGS_ENDPOINT_LABEL = labels_catalogue.LOGS_ENDPOINT
GPU_COLLECTOR_LABEL = "suanli.io/gpu-collector"
GPU_UNAVAILABLE_LABEL = "suanli.io/gpu-unavailable"
DRIVER_LABEL = "suanli.io/nvidia-driver"
LIMITS_LABEL = "suanli.io/task-limits"  # how tasks' memory and CPU are enforced: cgroup-v2, rlimit, none

log = logging.getLogger(__name__)


# Stateless: one instance serves every agent of the process.
SYSTEM_CLOCK = SystemClock()


@dataclass(frozen=True, slots=True)
class RealAgentConfig:
    """What the command line decided for this machine's agent (defaults: entrypoints.settings)."""

    identity: NodeIdentity
    interval_s: float
    stop_grace_s: float
    peers: Sequence[Peer] = ()
    probes_per_round: int = 5
    bandwidth_every: int = 0  # measure bandwidth to each peer every Nth probe round; 0: never
    bandwidth_bytes: int = DEFAULT_BANDWIDTH_BYTES
    log_dir: Path | None = None
    # Read only for the confinement's pass-through names (None: the agent's own environment).
    agent_env: Mapping[str, str] | None = None
    confinement: Confinement = field(default_factory=Confinement)
    # Where the scheduler reaches this agent's task logs (published as a label); empty: not served.
    logs_endpoint: str = ""
    # The host a replica task serves at, in its load reports (empty: the host name), and how often its
    # load is scraped.
    replica_host: str = ""
    replica_interval_s: float = DEFAULT_REPLICA_INTERVAL_S


@dataclass(slots=True)
class RealAgent:
    host: AgentHost
    gpu: NvmlCollector | NvmlUnavailable

    def close(self) -> None:
        if isinstance(self.gpu, NvmlCollector):
            self.gpu.close()


def build_real_agent(
    config: RealAgentConfig,
    sink: EventSink,
    *,
    nvml: Any | None = None,
    clock: Clock = SYSTEM_CLOCK,
    ids: IdFactory = uuid4_factory,
) -> RealAgent:
    """One agent for this machine: NVML when it works, host-only (and labelled so) when it does not.

    Inference replicas placed here serve on a port the agent picks, and their load is scraped and
    published every ``config.replica_interval_s`` (adapters.replica_scrape)."""
    gpu = NvmlCollector.open(nvml)
    labels = {MODE_LABEL: "real"}
    if config.logs_endpoint:
        labels[LOGS_ENDPOINT_LABEL] = config.logs_endpoint
    if isinstance(gpu, NvmlUnavailable):
        labels |= {GPU_COLLECTOR_LABEL: "none", GPU_UNAVAILABLE_LABEL: gpu.reason}
        collector = NodeCollector(HostCollector(), None, gpu_missing=gpu.reason)
    else:
        labels[GPU_COLLECTOR_LABEL] = "nvml"
        driver = gpu.driver_version()
        if driver:
            labels[DRIVER_LABEL] = str(driver)
        collector = NodeCollector(HostCollector(), gpu)
    identity = config.identity
    detected = detect_cgroup(config.confinement)
    cgroup = None if isinstance(detected, str) else detected
    if isinstance(detected, str):
        if config.confinement.limits:
            log.info("task limits by rlimits (no cgroup v2: %s)", detected)
        labels[LIMITS_LABEL] = "rlimit" if config.confinement.limits else "none"
    else:
        labels[LIMITS_LABEL] = "cgroup-v2"
    # Read once: the devices do not change while the agent runs, and only their names are needed.
    gpu_models = {} if isinstance(gpu, NvmlUnavailable) else {d.index: d.model for d in gpu.devices()}
    replicas = RealReplicaHosting(
        identity,
        sink,
        clock,
        ids,
        host=config.replica_host or socket.gethostname(),
        interval_s=config.replica_interval_s,
        catalogue=default_catalogue(),
        gpu_models=gpu_models,
    )
    launcher = ProcessLauncher(
        identity.node_id,
        agent_env=config.agent_env,
        log_dir=config.log_dir,
        confinement=config.confinement,
        cgroup=cgroup,
        replicas=replicas,
    )
    agent = NodeAgent(
        identity,
        collector,
        launcher,
        ProcessUsageProbe(),
        sink,
        clock=clock,
        ids=ids,
        settings=AgentSettings(config.interval_s, config.stop_grace_s, labels),
    )
    prober = None
    if config.peers:
        prober = TcpLinkProber(
            SiteRef(identity.region, identity.site, identity.zone),
            config.peers,
            probes_per_round=config.probes_per_round,
            bandwidth_every=config.bandwidth_every,
            bandwidth_bytes=config.bandwidth_bytes,
        )
    host = AgentHost([agent], sink, clock=clock, ids=ids, prober=prober, producer=identity.producer)
    return RealAgent(host, gpu)


def build_fleet_host(
    fleet: FleetSpec,
    sink: EventSink,
    *,
    interval_s: float,
    default_duration_s: float,
    replica_interval_s: float = DEFAULT_REPLICA_INTERVAL_S,
    catalogue: DeviceCatalogue | None = None,
    faults_path: Path | None = None,
    clock: Clock = SYSTEM_CLOCK,
    ids: IdFactory = uuid4_factory,
    monotonic: Callable[[], float] = time.monotonic,
) -> AgentHost:
    """One simulated agent per node of ``fleet``, all in one host, all drawing on the fleet's seed.

    Fault times (the fleet's ``faults`` and those in ``faults_path``, re-read each probe round) count
    from this call, on ``monotonic``. Inference replicas placed on the fleet serve as live simulated
    replicas reporting their load every ``replica_interval_s`` (adapters.replicas).
    """
    catalogue = catalogue or default_catalogue()
    rng = SeededRandom(fleet.seed)
    agents = []
    for spec in fleet.nodes:
        hosting = ReplicaHosting(spec, catalogue, sink, clock, ids, replica_interval_s)
        launcher = SimulatedLauncher(default_duration_s, hosting)
        model = SimulatedNodeModel(spec, catalogue, rng)
        table = TaskTable()
        labels = {MODE_LABEL: "simulated", GPU_COLLECTOR_LABEL: "simulated"}
        agents.append(
            NodeAgent(
                spec.identity,
                SimulatedCollector(model, table),
                launcher,
                SimulatedUsage(model),
                sink,
                clock=clock,
                ids=ids,
                settings=AgentSettings(interval_s, 0.0, labels),
                table=table,
            )
        )
    runtime = FaultsFile(faults_path, fleet).current if faults_path is not None else None
    prober = SimulatedLinkProber(fleet, rng, monotonic=monotonic, runtime_faults=runtime)
    return AgentHost(agents, sink, clock=clock, ids=ids, prober=prober, producer=f"sensing/{fleet.name}")


class AgentBus:
    """The agent's side of the bus, wired: its topics, one publisher for every event, consumers of
    ``placements``."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str | None,
        *,
        client_id: str,
        consumer: ConsumerSettings | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._prefix = prefix
        self._consumer = consumer
        # Looked at by `start` (the topics created, the cluster id taken) and then every few seconds by
        # the order intake, which rebuilds its consumer when the broker started over.
        self.watch = agent_broker_watch(bootstrap, prefix)
        # A short linger lets a fleet's concurrent reports leave in a few batches.
        self._publisher = EventPublisher(
            bootstrap, settings=ProducerSettings(client_id=client_id, linger_ms=20)
        )

    async def start(self) -> EventSink:
        """Create the topics the agent uses (if missing), start the publisher; the sink publishes on it."""
        await self.watch.look()
        await self._publisher.start()
        return BusSink(self._publisher, prefix=self._prefix)

    def order_consumer(self, group_id: str, handler: Handler, *, from_start: bool = False) -> EventConsumer:
        """A new, unstarted consumer of ``placements`` in ``group_id`` (``from_start``: `EventConsumer`)."""
        return order_consumer(
            self._bootstrap,
            group_id,
            handler,
            prefix=self._prefix,
            settings=self._consumer,
            from_start=from_start,
        )

    async def stop(self) -> None:
        await self._publisher.stop()
