"""The queueing core's `Placer`, on top of the placement framework's `Scheduler` (profiles: fgd, fgdx, ...).

The core hands in the free room per node; this builds a framework snapshot from it, places the gang all or
nothing (`Scheduler.place_gang`), then places tasks past the gang size one by one where they fit. The
framework addresses devices by slot (position in index order); decisions are translated back to device
indices. Free room above 1000 milli (a best-effort overcommit view) is clamped to one device: the framework
never books a device past 1000.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from suanli.scheduling.domain.fragmentation import TypicalTask, typical_tasks
from suanli.scheduling.domain.framework import PluginContext, Profile, Scheduler
from suanli.scheduling.domain.framework.plugin import Diagnosis, GangContext
from suanli.scheduling.domain.model import GPU_MILLI, GpuDevice, Job, Node, Task, TaskPlacement, TaskRequest
from suanli.scheduling.domain.network import EMPTY_NETWORK, NetworkSnapshot
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.pricing import NO_PRICES, PriceTable
from suanli.scheduling.domain.queueing import GangPlacement, NodeAvailability, NoFit
from suanli.scheduling.domain.snapshot import Assignment, ClusterSnapshot

DEFAULT_POLICY = "fgdb"
_Slots = dict[str, tuple[int, ...]]  # node id -> device index per framework slot
# Until jobs have been seen, fragmentation is measured against a generic mix of GPU shapes.
DEFAULT_TYPICAL: tuple[TypicalTask, ...] = (
    TypicalTask(cpu_milli=4000, gpu_milli=GPU_MILLI, gpu_count=1, gpu_models=(), weight=0.4),
    TypicalTask(cpu_milli=2000, gpu_milli=500, gpu_count=1, gpu_models=(), weight=0.3),
    TypicalTask(cpu_milli=8000, gpu_milli=GPU_MILLI, gpu_count=2, gpu_models=(), weight=0.2),
    TypicalTask(cpu_milli=2000, gpu_milli=250, gpu_count=1, gpu_models=(), weight=0.1),
)


@dataclass(frozen=True, slots=True)
class NodeScore:
    node_id: str
    score: float
    plugin_scores: tuple[tuple[str, float], ...]


def workload_typical(requests: Sequence[TaskRequest]) -> tuple[TypicalTask, ...]:
    gpu = [r for r in requests if r.gpu_count]
    return typical_tasks(gpu, 0.95) if gpu else DEFAULT_TYPICAL


class FrameworkPlacer:
    """A `Placer` for one cycle: a fresh framework `Scheduler` seeded by (seed, cycle), so decisions
    replay. The ordered tie-break ranks nodes by a hash of (seed, node id), the same in every cycle, so
    `explain` in a later cycle breaks ties as the decision did."""

    def __init__(
        self,
        profile: Profile,
        typical: tuple[TypicalTask, ...],
        seed: int = 0,
        cycle: int = 0,
        previous: FrameworkPlacer | None = None,
        network: NetworkSnapshot = EMPTY_NETWORK,
        prices: PriceTable = NO_PRICES,
    ) -> None:
        self.profile = profile
        self._context = PluginContext(typical_tasks=typical, network=network, prices=prices)
        self._seed = (seed, cycle)
        self._scheduler = self._new_scheduler()
        # The last views asked about and what was built from them: the core hands in the very same tuple
        # until its ledger changes, so a run of jobs that do not fit costs one snapshot, not one each
        # (snapshots are immutable; reusing one also keeps the plugins' per-node caches warm).
        self._built: list[tuple[tuple[NodeAvailability, ...], ClusterSnapshot, _Slots]] = []
        # The previous cycle's last snapshot: the next cycle's first view usually differs from it on the
        # few nodes where tasks were placed or ended since, so it is updated rather than built again.
        if previous is not None and previous._built:
            self._built = [previous._built[-1]]

    def _new_scheduler(self) -> Scheduler:
        seed, cycle = self._seed
        return Scheduler(self.profile, np.random.default_rng([seed, cycle]), self._context, tie_seed=seed)

    def _snapshot_of(self, nodes: tuple[NodeAvailability, ...]) -> tuple[ClusterSnapshot, _Slots]:
        for seen, snapshot, slots in self._built:
            if seen is nodes:
                return snapshot, slots
        derived = self._derived(nodes)
        snapshot, slots = derived if derived is not None else _snapshot(nodes)
        self._built = [*self._built[-3:], (nodes, snapshot, slots)]
        return snapshot, slots

    def _derived(self, nodes: tuple[NodeAvailability, ...]) -> tuple[ClusterSnapshot, _Slots] | None:
        """After an admission the core's next view differs from the last one on a node or two, and keeps
        the other entries as the same objects: update those rows of the last snapshot rather than build
        200 nodes again (and start the plugins' caches cold)."""
        if not self._built:
            return None
        seen, snapshot, slots = self._built[-1]
        if len(seen) != len(nodes) or any(a.node is not b.node for a, b in zip(seen, nodes, strict=True)):
            return None
        changed = {
            row: _free_row(a)[:3]
            for row, (a, b) in enumerate(zip(nodes, seen, strict=True))
            if a is not b
            and (a.cpu_milli, a.memory_mib, a.gpu_milli) != (b.cpu_milli, b.memory_mib, b.gpu_milli)
        }
        return snapshot.with_free(changed), slots

    @classmethod
    def for_policy(
        cls, policy: str, typical: tuple[TypicalTask, ...], seed: int = 0, cycle: int = 0
    ) -> FrameworkPlacer:
        return cls(policy_profile(policy), typical, seed, cycle)

    def place_gang(self, nodes: tuple[NodeAvailability, ...], job: Job) -> GangPlacement | NoFit:
        gang = job.gang_size
        if not nodes:
            return NoFit(0, gang, ())
        snapshot, slots = self._snapshot_of(nodes)
        requests = [t.request for t in job.tasks]
        result = self._scheduler.place_gang(
            snapshot, requests[:gang], job.placement_locality, job.min_bandwidth_gbps
        )
        if not result.placed:
            return NoFit(
                result.failed_task or 0,
                gang,
                _rejections(result.diagnosis),
                tuple((o.region, o.verdict) for o in result.regions),
                result.network_excluded,
            )
        placements = [
            self._placement(job.tasks[i], a, snapshot, slots) for i, a in enumerate(result.assignments)
        ]
        current = result.snapshot
        used = tuple(a.node for a in result.assignments)
        for task in job.tasks[gang:]:  # elastic tasks: placed when they fit (where the gang is), else skipped
            one = self._scheduler.place_task(current, task.request, result.within, GangContext(used, 1))
            if one.assignment is not None:
                placements.append(self._placement(task, one.assignment, current, slots))
                current = one.snapshot
                used = (*used, one.assignment.node)
        return GangPlacement(tuple(placements))

    def _placement(
        self, task: Task, a: Assignment, snapshot: ClusterSnapshot, slots: _Slots
    ) -> TaskPlacement:
        """The decision with what placement knew: the region, the RTT to the data region, the price."""
        node_id = snapshot.node_ids[a.node]
        region = snapshot.regions[int(snapshot.region_code[a.node])]
        request = task.request
        rtt = None
        if request.data_region:
            rtt = self._context.network.path(region, request.data_region)[0]
        code = int(snapshot.model_code[a.node])
        model = snapshot.models[code] if code >= 0 else ""
        price = self._context.prices.expected_per_hour(
            region, request.cpu_milli, [(model, m) for m in a.gpu_milli]
        )
        return TaskPlacement(
            task.id,
            node_id,
            tuple(slots[node_id][s] for s in a.gpu_indices),
            tuple(a.gpu_milli),
            region=region,
            rtt_ms=rtt,
            price_per_hour=None if price is None else round(price, 6),
        )

    def explain(
        self, nodes: tuple[NodeAvailability, ...], job: Job | TaskRequest, top: int = 5
    ) -> tuple[tuple[NodeScore, ...], tuple[tuple[str, int], ...]]:
        """The best `top` feasible nodes for the job's first task, as the decision ranks them, with each
        score plugin's part, and how many nodes each filter rejected.

        The ranking is the decision's own (`Scheduler.rank`: the same scores, gang context and tie-break),
        on the nodes the decision keeps the gang to: a dry run of the gang's placement says which region,
        zone, fabric domain or node that is. So on the view the decision saw, the first node listed is
        the node the decision takes."""
        if not nodes:
            return (), ()
        if isinstance(job, TaskRequest):
            job = Job("explain", "", (Task("explain-0", job),))
        snapshot, _ = self._snapshot_of(nodes)
        requests = [t.request for t in job.tasks][: job.gang_size]
        if not requests:
            return (), ()
        gang = GangContext((), len(requests)) if len(requests) > 1 else None
        dry = self._new_scheduler().place_gang(
            snapshot, requests, job.placement_locality, job.min_bandwidth_gbps
        )
        within = dry.within if dry.placed else None
        ranking = self._new_scheduler().rank(snapshot, requests[0], within, gang)
        if ranking.rows.size == 0:
            return (), _rejections(ranking.diagnosis)
        return tuple(
            NodeScore(
                snapshot.node_ids[int(ranking.rows[i])],
                float(ranking.total[i]),
                tuple((name, float(part[i])) for name, part in ranking.parts),
            )
            for i in range(min(top, ranking.rows.size))
        ), _rejections(ranking.diagnosis)


def _free_row(a: NodeAvailability) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """Free CPU, free memory and free milli per framework slot (clamped to what the framework holds),
    and the device positions in slot (index) order."""
    order = tuple(sorted(range(len(a.node.gpus)), key=lambda pos: a.node.gpus[pos].index))
    return (
        max(0, min(a.cpu_milli, a.node.cpu_milli)),
        max(0, min(a.memory_mib, a.node.memory_mib)),
        tuple(max(0, min(GPU_MILLI, a.gpu_milli[pos])) for pos in order),
        order,
    )


def _snapshot(nodes: tuple[NodeAvailability, ...]) -> tuple[ClusterSnapshot, dict[str, tuple[int, ...]]]:
    framework_nodes: list[Node] = []
    slots: dict[str, tuple[int, ...]] = {}
    for a in nodes:
        cpu, memory, free, order = _free_row(a)
        devices = tuple(
            GpuDevice(slot, a.node.gpus[pos].model, a.node.gpus[pos].memory_mib, free[slot])
            for slot, pos in enumerate(order)
        )
        slots[a.node.id] = tuple(a.node.gpus[pos].index for pos in order)
        framework_nodes.append(
            Node(
                a.node.id,
                a.node.cpu_milli,
                a.node.memory_mib,
                devices,
                a.node.region,
                a.node.zone,
                a.node.labels,
                free_cpu_milli=cpu,
                free_memory_mib=memory,
            )
        )
    return ClusterSnapshot.from_nodes(framework_nodes), slots


def _rejections(diagnosis: Diagnosis | None) -> tuple[tuple[str, int], ...]:
    if diagnosis is None:
        return ()
    if diagnosis.admission is not None:
        return ((diagnosis.admission.split(":", 1)[0], diagnosis.nodes),)
    return tuple(sorted((name, count) for name, count in diagnosis.rejected_by if count))
