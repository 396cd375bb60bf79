"""The cycle's working books: what each node has in use or held, and what each queue uses.

`Ledger` is the cycle's mutable object; it lives for one call of `schedule_cycle`, so the cycle stays a
pure function of its inputs. What the running work holds when a cycle begins is counted by
`RunningBooks`, which a caller may carry from one cycle to the next: between two cycles only the few jobs
that were placed, started or ended differ, so the books are brought up to date by those alone instead of
being summed again over every running job (a cycle's fixed cost grew with the work running, not with the
work waiting). Carried or counted afresh, the books hold the same integers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from suanli.scheduling.domain.model import Job, Node, TaskPlacement
from suanli.scheduling.domain.queueing.placer import NodeAvailability
from suanli.scheduling.domain.queueing.queues import QueueSpec, QueueTree
from suanli.scheduling.domain.queueing.resources import Amounts, add_into, placed_amounts
from suanli.scheduling.domain.queueing.state import RunningWorkload


@dataclass(slots=True)
class _NodeAmounts:
    cpu: int = 0
    memory: int = 0
    gpu: list[int] = field(default_factory=list)

    def copy(self) -> _NodeAmounts:
        return _NodeAmounts(self.cpu, self.memory, list(self.gpu))


def _apply(target: _NodeAmounts, delta: _NodeAmounts, sign: int) -> None:
    target.cpu += sign * delta.cpu
    target.memory += sign * delta.memory
    for pos, amount in enumerate(delta.gpu):
        target.gpu[pos] += sign * amount


def _physical(
    job: Job,
    placements: Iterable[TaskPlacement],
    nodes: Mapping[str, Node],
    device_pos: Mapping[str, Mapping[int, int]],
) -> dict[str, _NodeAmounts]:
    """What the placements hold per node. A node that left the snapshot takes its tasks' usage with it;
    reconciliation deals with them."""
    requests = {task.id: task.request for task in job.tasks}
    out: dict[str, _NodeAmounts] = {}
    for placement in placements:
        if placement.node_id not in nodes:
            continue
        request = requests[placement.task_id]
        amounts = out.setdefault(
            placement.node_id, _NodeAmounts(gpu=[0] * len(nodes[placement.node_id].gpus))
        )
        amounts.cpu += request.cpu_milli
        amounts.memory += request.memory_mib
        milli = placement.gpu_milli or (request.gpu_milli,) * len(placement.gpu_indices)
        for index, amount in zip(placement.gpu_indices, milli, strict=True):
            amounts.gpu[device_pos[placement.node_id][index]] += amount
    return out


def _charge(
    table: dict[str, Amounts],
    tree: QueueTree,
    job: Job,
    placements: Iterable[TaskPlacement],
    nodes: Mapping[str, Node],
    sign: int,
) -> None:
    known = [p for p in placements if p.node_id in nodes]
    amounts = placed_amounts(job, known, nodes)
    for level in tree.chain(job.queue):
        add_into(table.setdefault(level.name, {}), amounts, sign)


def _availability(
    node: Node,
    gpu_capacity: int,
    used: _NodeAmounts,
    freed: _NodeAmounts | None,
    held: _NodeAmounts | None,
    future: bool,
) -> NodeAvailability:
    """Free room on the node: its totals less what is in use (`future`: nothing is), plus what `freed`
    gives back, less what `held` reserves."""
    nothing = _NodeAmounts(gpu=[0] * len(node.gpus))
    freed = freed or nothing
    held = held or nothing

    def room(total: int, in_use: int, returned: int, reserved: int) -> int:
        taken = (0 if future else in_use - returned) + reserved
        return max(0, total - taken)

    return NodeAvailability(
        node=node,
        cpu_milli=room(node.cpu_milli, used.cpu, freed.cpu, held.cpu),
        memory_mib=room(node.memory_mib, used.memory, freed.memory, held.memory),
        gpu_milli=tuple(
            room(gpu_capacity, used.gpu[i], freed.gpu[i], held.gpu[i]) for i in range(len(node.gpus))
        ),
    )


@dataclass(frozen=True, slots=True)
class _Counted:
    """A running workload as the books counted it, so that it can be taken out again exactly."""

    workload: RunningWorkload
    room: dict[str, _NodeAmounts]  # node id -> what it holds there
    charged: bool  # charged to its queue's chain (not stopping, queue known)


class RunningBooks:
    """What the running workloads hold, per node and per queue (guaranteed and best-effort apart), for one
    fleet (a tuple of nodes) and one set of queues. `count` brings the books to a new set of running
    workloads, counting only those that are not the very objects counted last time; another tuple of
    nodes or other queues start the books again."""

    def __init__(self) -> None:
        self._nodes: tuple[Node, ...] | None = None
        self._queues: tuple[QueueSpec, ...] | None = None
        self._counted: dict[str, _Counted] = {}  # job id -> how it was counted
        self.nodes: dict[str, Node] = {}
        self.device_pos: dict[str, dict[int, int]] = {}
        self.used: dict[str, _NodeAmounts] = {}
        self.usage: dict[str, Amounts] = {}  # guaranteed work, per queue, subtree totals
        self.best_effort_usage: dict[str, Amounts] = {}
        self.running: dict[str, RunningWorkload] = {}  # not stopping: what a cycle may preempt
        self.position: dict[str, int] = {}  # node id -> its place in the fleet's tuple
        # Free room per node as the running work leaves it, per (GPU capacity, future), and the nodes whose
        # room changed since: unchanged nodes keep the very same entries from cycle to cycle, which a
        # placer carrying its snapshot tells apart by identity.
        self._views: dict[tuple[int, bool], list[NodeAvailability]] = {}
        self._changed: dict[tuple[int, bool], set[str]] = {}

    def view(self, gpu_capacity: int, future: bool) -> list[NodeAvailability]:
        """Free room per node (in the fleet's order) with nothing reserved; read-only."""
        key = (gpu_capacity, future)
        entries = self._views.get(key)
        if entries is None:
            entries = self._views[key] = [
                _availability(node, gpu_capacity, self.used[node.id], None, None, future)
                for node in self._nodes or ()
            ]
            self._changed[key] = set()
        else:
            changed = self._changed[key]
            for node_id in changed:
                pos = self.position[node_id]
                entries[pos] = _availability(
                    entries[pos].node, gpu_capacity, self.used[node_id], None, None, future
                )
            changed.clear()
        return entries

    def count(self, tree: QueueTree, nodes: tuple[Node, ...], running: tuple[RunningWorkload, ...]) -> None:
        if nodes is not self._nodes or tree.specs != self._queues:
            self._start(tree, nodes)
        previous, counted = self._counted, {}
        for workload in running:
            job_id = workload.job.id
            before = previous.pop(job_id, None)
            if before is not None and before.workload is workload:
                counted[job_id] = before
                continue
            if before is not None:
                self._take_out(tree, before)
            counted[job_id] = self._add(tree, workload)
        for gone in previous.values():
            self._take_out(tree, gone)
        self._counted = counted
        self.running = {job_id: c.workload for job_id, c in counted.items() if not c.workload.stopping}

    def _start(self, tree: QueueTree, nodes: tuple[Node, ...]) -> None:
        self._nodes, self._queues = nodes, tree.specs
        self._counted = {}
        self.nodes = {node.id: node for node in nodes}
        self.device_pos = {node.id: {d.index: pos for pos, d in enumerate(node.gpus)} for node in nodes}
        self.used = {node.id: _NodeAmounts(gpu=[0] * len(node.gpus)) for node in nodes}
        self.usage, self.best_effort_usage = {}, {}
        self.position = {node.id: pos for pos, node in enumerate(nodes)}
        self._views, self._changed = {}, {}

    def _room_changed(self, node_id: str) -> None:
        for changed in self._changed.values():
            changed.add(node_id)

    def _add(self, tree: QueueTree, workload: RunningWorkload) -> _Counted:
        job = workload.job
        room = _physical(job, workload.placements, self.nodes, self.device_pos)
        for node_id, amounts in room.items():
            _apply(self.used[node_id], amounts, 1)
            self._room_changed(node_id)
        charged = not workload.stopping and job.queue in tree
        if charged:
            _charge(self._table(job), tree, job, workload.placements, self.nodes, 1)
        return _Counted(workload, room, charged)

    def _take_out(self, tree: QueueTree, counted: _Counted) -> None:
        for node_id, amounts in counted.room.items():
            _apply(self.used[node_id], amounts, -1)
            self._room_changed(node_id)
        if counted.charged:
            job = counted.workload.job
            _charge(self._table(job), tree, job, counted.workload.placements, self.nodes, -1)

    def _table(self, job: Job) -> dict[str, Amounts]:
        return self.best_effort_usage if job.best_effort else self.usage


class Ledger:
    def __init__(
        self,
        tree: QueueTree,
        nodes: tuple[Node, ...],
        running: tuple[RunningWorkload, ...],
        books: RunningBooks | None = None,
    ) -> None:
        """`books`: the previous cycle's (brought up to date here with `running`); None counts anew."""
        books = books if books is not None else RunningBooks()
        books.count(tree, nodes, running)
        self._tree = tree
        self._order = nodes
        self.nodes = books.nodes
        self._device_pos = books.device_pos
        # The books' room in use is read, never written: a node this cycle takes room on gets a copy.
        self._books = books
        self._base = books.used
        self._used: dict[str, _NodeAmounts] = {}
        self._reserved: dict[str, _NodeAmounts] = {}  # only nodes with a reservation
        self._holders: dict[str, list[str]] = {}
        self.usage = {queue: dict(amounts) for queue, amounts in books.usage.items()}
        self.best_effort_usage = {queue: dict(amounts) for queue, amounts in books.best_effort_usage.items()}
        # Only work that was running when the cycle began can be preempted in it.
        self.running: dict[str, RunningWorkload] = dict(books.running)
        # Plain views are memoised, and after a change only the nodes it touched are recomputed: a cycle
        # asks for the same room once per pending job, and a placer reuses what it built from an identical
        # (same object) view, or updates just the entries that are new objects.
        self._views: dict[tuple[int, bool, bool], tuple[NodeAvailability, ...]] = {}
        self._stale: dict[tuple[int, bool, bool], set[str]] = {}
        self._position = books.position

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
            held = self._reserved.get(node_id)
            if held is None:
                held = self._reserved[node_id] = _NodeAmounts(gpu=[0] * len(amounts.gpu))
            _apply(held, amounts, 1)
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
                cached = self._views[key] = self._plain_view(gpu_capacity, reservations, future)
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

    def _plain_view(
        self, gpu_capacity: int, reservations: bool, future: bool
    ) -> tuple[NodeAvailability, ...]:
        """The books' view, with this cycle's own changes (room taken, reservations) on top."""
        entries = self._books.view(gpu_capacity, future)
        changed = self._used.keys() | (self._reserved.keys() if reservations else set())
        if not changed:
            return tuple(entries)
        mine = list(entries)
        for node_id in changed:
            pos = self._position[node_id]
            mine[pos] = self._availability(self._order[pos], gpu_capacity, None, reservations, future)
        return tuple(mine)

    def _view(
        self, gpu_capacity: int, released: tuple[RunningWorkload, ...], reservations: bool, future: bool
    ) -> tuple[NodeAvailability, ...]:
        back: dict[str, _NodeAmounts] = {}
        for workload in released:
            for node_id, amounts in self._physical(workload.job, workload.placements).items():
                _apply(back.setdefault(node_id, _NodeAmounts(gpu=[0] * len(amounts.gpu))), amounts, 1)
        return tuple(
            self._availability(node, gpu_capacity, back.get(node.id), reservations, future)
            for node in self._order
        )

    def _availability(
        self, node: Node, gpu_capacity: int, freed: _NodeAmounts | None, reservations: bool, future: bool
    ) -> NodeAvailability:
        used = self._used.get(node.id) or self._base[node.id]
        held = self._reserved.get(node.id) if reservations else None
        return _availability(node, gpu_capacity, used, freed, held, future)

    def _take_room(self, job: Job, placements: tuple[TaskPlacement, ...]) -> None:
        for node_id, amounts in self._physical(job, placements).items():
            used = self._used.get(node_id)
            if used is None:
                used = self._used[node_id] = self._base[node_id].copy()
            _apply(used, amounts, 1)
            self._touched(node_id)

    def _physical(self, job: Job, placements: Iterable[TaskPlacement]) -> dict[str, _NodeAmounts]:
        return _physical(job, placements, self.nodes, self._device_pos)

    def _charge_queue(self, job: Job, placements: tuple[TaskPlacement, ...], sign: int) -> None:
        if job.queue in self._tree:
            self._charge(self.best_effort_usage if job.best_effort else self.usage, job, placements, sign)

    def _charge(
        self, table: dict[str, Amounts], job: Job, placements: Iterable[TaskPlacement], sign: int
    ) -> None:
        _charge(table, self._tree, job, placements, self.nodes, sign)
