"""The simulated node: device and host load follow the tasks placed on it, with seeded noise.

A device's utilisation is the share of it that tasks hold (milli / 10 %) times a per-task busy factor,
plus a little noise; memory is what tasks asked for (or their share of the device); temperature and power
rise with utilisation between idle and board-power figures. Noise is drawn from the injected
`KeyedRandom` (seeded by the fleet) under the key (node, device, report sequence), so a replay with the
same seed and the same placements gives the same snapshots on any machine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from suanli.resources import DeviceCatalogue
from suanli.sensing.domain.fleet import SimNodeSpec
from suanli.sensing.domain.observation import DeviceObservation, HostObservation, NodeObservation
from suanli.sensing.domain.placement import MILLI, Placement
from suanli.sensing.domain.randomness import Draws, KeyedRandom
from suanli.sensing.domain.records import TaskUsage

IDLE_TEMPERATURE_C = 32.0
FULL_LOAD_TEMPERATURE_C = 78.0
IDLE_POWER_RATIO = 0.12  # share of board power an idle data-centre GPU draws
HOST_BASE_MEMORY_MIB = 4096
HOST_BASE_CPU_PCT = 2.0


def device_uuid(rng: KeyedRandom, node_id: str, index: int) -> str:
    """A stable, GPU-like UUID for a simulated device."""
    return f"GPU-{rng.uuid(f'{node_id}/{index}')}"


def busy_factor(rng: KeyedRandom, task_id: str) -> float:
    """How hard a task drives the share it holds (0.55..0.98), fixed per task."""
    return rng.draws(f"busy|{task_id}").uniform(0.55, 0.98)


@dataclass(frozen=True, slots=True)
class SimulatedNodeModel:
    spec: SimNodeSpec
    catalogue: DeviceCatalogue
    rng: KeyedRandom  # seeded by the fleet file's seed

    def observe(self, placements: Iterable[Placement], sequence: int) -> NodeObservation:
        tasks = list(placements)
        devices = tuple(self._device(i, tasks, sequence) for i in range(self.spec.gpus))
        return NodeObservation(host=self._host(tasks, sequence), devices=devices)

    def _draws(self, *parts: object) -> Draws:
        return self.rng.draws("|".join(str(p) for p in (self.spec.identity.node_id, *parts)))

    def _device(self, index: int, tasks: list[Placement], sequence: int) -> DeviceObservation:
        load = 0.0
        memory = 0
        for task in tasks:
            for share in task.devices:
                if share.index == index:
                    load += share.milli / MILLI * busy_factor(self.rng, task.task_id)
                    memory += self._task_gpu_memory(task, share.milli)
        draws = self._draws("gpu", index, sequence)
        utilisation = min(100.0, max(0.0, load * 100 + (draws.uniform(-3, 3) if load else 0.0)))
        tdp = self.catalogue.lookup(self.spec.gpu_model or "").tdp_w
        heat = utilisation / 100
        return DeviceObservation(
            index=index,
            uuid=device_uuid(self.rng, self.spec.identity.node_id, index),
            model=self.spec.gpu_model or "unknown",
            memory_total_mib=self.spec.gpu_memory_mib,
            memory_used_mib=min(self.spec.gpu_memory_mib, memory),
            utilisation_pct=round(utilisation, 2),
            temperature_c=round(
                _between(IDLE_TEMPERATURE_C, FULL_LOAD_TEMPERATURE_C, heat) + draws.uniform(-1, 1), 1
            ),
            power_w=None if tdp is None else round(tdp * _between(IDLE_POWER_RATIO, 1.0, heat), 1),
        )

    def _task_gpu_memory(self, task: Placement, milli: int) -> int:
        if task.gpu_memory_mib:
            return task.gpu_memory_mib
        return self.spec.gpu_memory_mib * milli // MILLI

    def _host(self, tasks: list[Placement], sequence: int) -> HostObservation:
        capacity = self.spec.cpu_cores * MILLI
        cpu_used = sum(t.cpu_milli * busy_factor(self.rng, t.task_id) for t in tasks)
        noise = self._draws("cpu", sequence).uniform(0, 1.5)
        memory = HOST_BASE_MEMORY_MIB + sum(t.memory_mib for t in tasks)
        return HostObservation(
            cpu_cores=self.spec.cpu_cores,
            cpu_utilisation_pct=round(min(100.0, HOST_BASE_CPU_PCT + noise + 100 * cpu_used / capacity), 2),
            memory_total_mib=self.spec.memory_mib,
            memory_used_mib=min(self.spec.memory_mib, memory),
        )

    def usage(self, task: Placement, observation: NodeObservation) -> TaskUsage:
        """What one task used, consistent with the node observation of the same instant."""
        busy = busy_factor(self.rng, task.task_id)
        shares = [s.milli for s in task.devices]
        return TaskUsage(
            gpu_utilisation_pct=100 * busy * sum(shares) / (MILLI * len(shares)) if shares else 0.0,
            gpu_memory_used_mib=sum(self._task_gpu_memory(task, s) for s in shares),
            cpu_milli=int(task.cpu_milli * busy),
            memory_used_mib=task.memory_mib,
        )


def _between(idle: float, full: float, load: float) -> float:
    return idle + (full - idle) * load
