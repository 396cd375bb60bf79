"""Wiring: the only place that picks adapters for the agent's ports (cosmicpython's bootstrap)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suanli.resources import DeviceCatalogue, default_catalogue
from suanli.sensing.adapters.host import HostCollector, NodeCollector
from suanli.sensing.adapters.nvml import NvmlCollector, NvmlUnavailable
from suanli.sensing.adapters.probes import Peer, TcpLinkProber
from suanli.sensing.adapters.processes import ProcessLauncher, ProcessUsageProbe
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
from suanli.sensing.service_layer.ports import Clock, EventSink, IdFactory

# Labels every agent publishes, so operators and the scheduler can tell how a node is observed.
MODE_LABEL = "suanli.io/agent-mode"
GPU_COLLECTOR_LABEL = "suanli.io/gpu-collector"
GPU_UNAVAILABLE_LABEL = "suanli.io/gpu-unavailable"
DRIVER_LABEL = "suanli.io/nvidia-driver"


def system_clock() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def new_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class RealAgentConfig:
    identity: NodeIdentity
    interval_s: float = 5.0
    stop_grace_s: float = 10.0
    peers: Sequence[Peer] = ()
    probes_per_round: int = 5
    log_dir: Path | None = None
    task_env: Mapping[str, str] | None = None  # None: the agent's own environment


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
    clock: Clock = system_clock,
    ids: IdFactory = new_id,
) -> RealAgent:
    """One agent for this machine: NVML when it works, host-only (and labelled so) when it does not."""
    gpu = NvmlCollector.open(nvml)
    labels = {MODE_LABEL: "real"}
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
    agent = NodeAgent(
        identity,
        collector,
        ProcessLauncher(identity.node_id, base_env=config.task_env, log_dir=config.log_dir),
        ProcessUsageProbe(),
        sink,
        clock=clock,
        ids=ids,
        settings=AgentSettings(config.interval_s, config.stop_grace_s, labels),
    )
    prober = None
    if config.peers:
        prober = TcpLinkProber(
            SiteRef(identity.region, identity.site), config.peers, probes_per_round=config.probes_per_round
        )
    host = AgentHost([agent], sink, clock=clock, ids=ids, prober=prober, producer=identity.producer)
    return RealAgent(host, gpu)


def build_fleet_host(
    fleet: FleetSpec,
    sink: EventSink,
    *,
    catalogue: DeviceCatalogue | None = None,
    interval_s: float = 5.0,
    default_duration_s: float = 300.0,
    clock: Clock = system_clock,
    ids: IdFactory = new_id,
) -> AgentHost:
    """One simulated agent per node of ``fleet``, all in one host."""
    catalogue = catalogue or default_catalogue()
    launcher = SimulatedLauncher(default_duration_s)
    agents = []
    for spec in fleet.nodes:
        model = SimulatedNodeModel(spec, catalogue, fleet.seed)
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
    prober = SimulatedLinkProber(fleet)
    return AgentHost(agents, sink, clock=clock, ids=ids, prober=prober, producer=f"sensing/{fleet.name}")
