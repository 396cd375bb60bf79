"""The cycle's working books: what each node has in use or held, and what each queue uses.

The only mutable object in the package; it lives for one call of `schedule_cycle`, so the cycle stays a
pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from suanli.scheduling.domain.model import Job, Node, TaskPlacement
from suanli.scheduling.domain.queueing.placer import NodeAvailability
from suanli.scheduling.domain.queueing.queues import QueueTree
from suanli.scheduling.domain.queueing.resources import Amounts, add_into, placed_amounts
from suanli.scheduling.domain.queueing.state import RunningWorkload


@dataclass(slots=True)
class _NodeAmounts:
    cpu: int = 0
    memory: int = 0
    gpu: list[int] = field(default_factory=list)


class Ledger:
    def __init__(
        self, tree: QueueTree, nodes: tuple[Node, ...], running: tuple[RunningWorkload, ...]
    ) -> None:
        self._tree = tree
        self._order = nodes
        self.nodes = {node.id: node for node in nodes}
        self._device_pos = {node.id: {d.index: pos for pos, d in enumerate(node.gpus)} for node in nodes}
        self._used = {node.id: _NodeAmounts(gpu=[0] * len(node.gpus)) for node in nodes}
        self._reserved = {node.id: _NodeAmounts(gpu=[0] * len(node.gpus)) for node in nodes}
        self._holders: dict[str, list[str]] = {}
        self.usage: dict[str, Amounts] = {}  # guaranteed work, per queue, subtree totals
        self.best_effort_usage: dict[str, Amounts] = {}
        # Only work that was running when the cycle began can be preempted in it.
        self.running: dict[str, RunningWorkload] = {}
        # Plain views are memoised, and after a change only the nodes it touched are recomputed: a cycle
        # asks for the same room once per pending job, and a placer reuses what it built from an identical
        # (same object) view, or updates just the entries that are new objects.
        self._views: dict[tuple[int, bool, bool], tuple[NodeAvailability, ...]] = {}
        self._stale: dict[tuple[int, bool, bool], set[str]] = {}
        self._position = {node.id: pos for pos, node in enumerate(nodes)}
        for workload in running:
            self._take_room(workload.job, workload.placements)
            if not workload.stopping:
                self._charge_queue(workload.job, workload.placements, 1)
                self.running[workload.job.id] = workload

    def occupy(self, job: Job, placements: tuple[TaskPlacement, ...]) -> None:
        self._take_room(job, placements)
        self._charge_queue(job, placements, 1)

    def evict(self, workload: RunningWorkload) -> None:
        """Its quota is free at once, but its room stays in use: a victim is still stopping, and nothing
        may be placed on a device before it is really free."""
        self._charge_queue(workload.job, workload.placements, -1)
        del self.running[workload.job.id]

    def hold(self, job: Job, placements: tuple[TaskPlacement, ...]) -> None:
        """A preemptor: charged to its queue now and its room reserved, admitted once the victims stop."""
        self._charge_queue(job, placements, 1)
        self.reserve(job, placements)

    def reserve(self, job: Job, placements: tuple[TaskPlacement, ...]) -> None:
        for node_id, amounts in self._physical(job, placements).items():
            self._apply(self._reserved[node_id], amounts, 1)
            self._holders.setdefault(node_id, []).append(job.id)
            self._touched(node_id)

    def _touched(self, node_id: str) -> None:
        for stale in self._stale.values():
            stale.add(node_id)

    @property
    def has_reservations(self) -> bool:
        return bool(self._holders)

    def holders(self, node_ids: Iterable[str]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h for node_id in node_ids for h in self._holders.get(node_id, ())))

    def usage_without(self, victims: Iterable[RunningWorkload]) -> dict[str, Amounts]:
        usage = {queue: dict(amounts) for queue, amounts in self.usage.items()}
        for victim in victims:
            if not victim.job.best_effort and victim.job.queue in self._tree:
                self._charge(usage, victim.job, victim.placements, -1)
        return usage

    def view(
        self,
        gpu_capacity: int,
        *,
        released: Iterable[RunningWorkload] = (),
        reservations: bool = True,
        future: bool = False,
    ) -> tuple[NodeAvailability, ...]:
        """Free room per node. `released`: pretend these stopped. `future`: pretend everything running
        stopped (where a reservation can go). `reservations=False`: what the held room would allow."""
        released = tuple(released)
        if not released:
            key = (gpu_capacity, reservations, future)
            cached = self._views.get(key)
            stale = self._stale.get(key)
            if cached is None:
                cached = self._views[key] = self._view(gpu_capacity, (), reservations, future)
                self._stale[key] = set()
            elif stale:
                entries = list(cached)
                for node_id in stale:
                    pos = self._position[node_id]
                    entries[pos] = self._availability(
                        self._order[pos], gpu_capacity, None, reservations, future
                    )
                cached = self._views[key] = tuple(entries)
                stale.clear()
            return cached
        return self._view(gpu_capacity, released, reservations, future)

    def _view(
        self, gpu_capacity: int, released: tuple[RunningWorkload, ...], reservations: bool, future: bool
    ) -> tuple[NodeAvailability, ...]:
        back: dict[str, _NodeAmounts] = {}
        for workload in released:
            for node_id, amounts in self._physical(workload.job, workload.placements).items():
                self._apply(back.setdefault(node_id, _NodeAmounts(gpu=[0] * len(amounts.gpu))), amounts, 1)
        return tuple(
            self._availability(node, gpu_capacity, back.get(node.id), reservations, future)
            for node in self._order
        )

    def _availability(
        self, node: Node, gpu_capacity: int, freed: _NodeAmounts | None, reservations: bool, future: bool
    ) -> NodeAvailability:
        used, held = self._used[node.id], self._reserved[node.id]
        freed = freed or _NodeAmounts(gpu=[0] * len(node.gpus))

        def room(total: int, in_use: int, returned: int, reserved: int) -> int:
            taken = (0 if future else in_use - returned) + (reserved if reservations else 0)
            return max(0, total - taken)

        return NodeAvailability(
            node=node,
            cpu_milli=room(node.cpu_milli, used.cpu, freed.cpu, held.cpu),
            memory_mib=room(node.memory_mib, used.memory, freed.memory, held.memory),
            gpu_milli=tuple(
                room(gpu_capacity, used.gpu[i], freed.gpu[i], held.gpu[i]) for i in range(len(node.gpus))
            ),
        )

    def _take_room(self, job: Job, placements: tuple[TaskPlacement, ...]) -> None:
        for node_id, amounts in self._physical(job, placements).items():
            self._apply(self._used[node_id], amounts, 1)
            self._touched(node_id)

    def _physical(self, job: Job, placements: Iterable[TaskPlacement]) -> dict[str, _NodeAmounts]:
        # A node that left the snapshot takes its tasks' usage with it; reconciliation deals with them.
        requests = {task.id: task.request for task in job.tasks}
        out: dict[str, _NodeAmounts] = {}
        for placement in placements:
            if placement.node_id not in self.nodes:
                continue
            request = requests[placement.task_id]
            amounts = out.setdefault(
                placement.node_id, _NodeAmounts(gpu=[0] * len(self.nodes[placement.node_id].gpus))
            )
            amounts.cpu += request.cpu_milli
            amounts.memory += request.memory_mib
            milli = placement.gpu_milli or (request.gpu_milli,) * len(placement.gpu_indices)
            for index, amount in zip(placement.gpu_indices, milli, strict=True):
                amounts.gpu[self._device_pos[placement.node_id][index]] += amount
        return out

    @staticmethod
    def _apply(target: _NodeAmounts, delta: _NodeAmounts, sign: int) -> None:
        target.cpu += sign * delta.cpu
        target.memory += sign * delta.memory
        for pos, amount in enumerate(delta.gpu):
            target.gpu[pos] += sign * amount

    def _charge_queue(self, job: Job, placements: tuple[TaskPlacement, ...], sign: int) -> None:
        if job.queue in self._tree:
            self._charge(self.best_effort_usage if job.best_effort else self.usage, job, placements, sign)

    def _charge(
        self, table: dict[str, Amounts], job: Job, placements: Iterable[TaskPlacement], sign: int
    ) -> None:
        known = [p for p in placements if p.node_id in self.nodes]
        amounts = placed_amounts(job, known, self.nodes)
        for level in self._tree.chain(job.queue):
            add_into(table.setdefault(level.name, {}), amounts, sign)
