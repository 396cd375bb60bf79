"""Simulated node edges: a collector driven by the load model, tasks that just hold resources, probes.

The model and the noise are pure (domain.simulation, domain.links) and draw from the fleet's seeded
`KeyedRandom`; these adapters only bind them to one agent's task table and to the event loop's timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Sequence

from suanli.replica.server import ReplicaServer
from suanli.sensing.adapters.replicas import (
    ReplicaHosting,
    names_a_replica,
    replica_duration_s,
    start_replica,
)
from suanli.sensing.domain.faults import ActiveFaults, Fault
from suanli.sensing.domain.fleet import FleetSpec
from suanli.sensing.domain.links import LinkSample
from suanli.sensing.domain.observation import NodeObservation
from suanli.sensing.domain.placement import Placement
from suanli.sensing.domain.randomness import KeyedRandom
from suanli.sensing.domain.records import TaskUsage
from suanli.sensing.domain.simulation import SimulatedNodeModel
from suanli.sensing.domain.tasks import TaskRun, TaskTable

# A simulated task stopped early ends as a process killed by SIGTERM would: a negative signal number.
STOPPED_EXIT_CODE = -signal.SIGTERM


class SimulatedCollector:
    def __init__(self, model: SimulatedNodeModel, table: TaskTable) -> None:
        self._model = model
        self._table = table
        self._sequence = 0

    def collect(self) -> NodeObservation:
        self._sequence += 1
        return self._model.observe((run.placement for run in self._table.runs()), self._sequence)


class SimulatedUsage:
    def __init__(self, model: SimulatedNodeModel) -> None:
        self._model = model

    def usage(self, run: TaskRun, observation: NodeObservation) -> TaskUsage:
        return self._model.usage(run.placement, observation)


class SimulatedTask:
    """Holds its placement's resources for ``duration_s`` (None: until stopped), then exits 0; stopped
    earlier, it exits -15. A replica's task closes its replica server as it ends."""

    pid: int | None = None

    def __init__(self, duration_s: float | None, replica: ReplicaServer | None = None) -> None:
        self.duration_s = duration_s
        self.replica = replica
        self._stopped = asyncio.Event()

    async def wait(self) -> int:
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self.duration_s)
        finally:
            if self.replica is not None:
                await self.replica.stop()
        return STOPPED_EXIT_CODE if self._stopped.is_set() else 0

    def terminate(self, grace_s: float) -> None:
        self._stopped.set()


class SimulatedLauncher:
    """Simulated tasks; with ``replicas``, a replica's task serves as a live replica (adapters.replicas)."""

    def __init__(self, default_duration_s: float, replicas: ReplicaHosting | None = None) -> None:
        self.default_duration_s = default_duration_s
        self.replicas = replicas

    async def launch(self, placement: Placement) -> SimulatedTask:
        if self.replicas is not None and names_a_replica(placement):
            server = await start_replica(self.replicas, placement)
            return SimulatedTask(replica_duration_s(placement), server)
        return SimulatedTask(placement.sim_duration_s(self.default_duration_s))


class SimulatedLinkProber:
    """Every ordered pair of the fleet's sites, from the fleet's network model, with the faults in force:
    the fleet file's and the run-time file's (read again each round), timed from the prober's creation."""

    def __init__(
        self,
        fleet: FleetSpec,
        rng: KeyedRandom,
        *,
        monotonic: Callable[[], float],
        runtime_faults: Callable[[], Sequence[Fault]] | None = None,
    ) -> None:
        self._fleet = fleet
        self._rng = rng
        self._monotonic = monotonic
        self._started = monotonic()
        self._runtime_faults = runtime_faults

    def elapsed_s(self) -> float:
        return self._monotonic() - self._started

    async def probe_round(self, round_no: int) -> list[LinkSample]:
        faults = self._fleet.faults
        if self._runtime_faults is not None:
            faults = (*faults, *self._runtime_faults())
        adjust = None
        if faults:
            adjust = ActiveFaults(tuple(faults), self.elapsed_s(), self._fleet.links.jitter.ratio)
        return self._fleet.links.sample_all(self._fleet.sites, round_no, self._rng, adjust)
