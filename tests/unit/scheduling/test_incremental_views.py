"""Incremental room: the ledger recomputes only the nodes a change touched, the placer updates only those
rows of its snapshot, and the decisions are exactly those of building everything again."""

from __future__ import annotations

import random

import numpy as np
import pytest

from suanli.scheduling.adapters.framework_placer import FrameworkPlacer, workload_typical
from suanli.scheduling.domain.model import GpuDevice, Job, Node, Task, TaskPlacement, TaskRequest
from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    QueueSpec,
    QueueTree,
    ResourceQuota,
    RunningBooks,
    RunningWorkload,
    Workload,
    schedule_cycle,
)
from suanli.scheduling.domain.snapshot import ClusterSnapshot

POOLS = (("A100", 8, 12), ("L40S", 4, 12), ("T4", 2, 10))


def _fleet() -> tuple[Node, ...]:
    return tuple(
        Node(f"{model}-{i}", 64_000, 512_000, tuple(GpuDevice(g, model, 80_000) for g in range(gpus)))
        for model, gpus, count in POOLS
        for i in range(count)
    )


def _job(i: int, model: str, tasks: int = 1) -> Job:
    milli = 500 if i % 3 == 0 else 1000
    request = TaskRequest(cpu_milli=2000, memory_mib=4096, gpu_count=1, gpu_milli=milli, gpu_models=(model,))
    return Job(f"job-{i}", "q", tuple(Task(f"job-{i}-{t}", request) for t in range(tasks)))


def _state(seed: int) -> ClusterState:
    rng = random.Random(seed)
    nodes = _fleet()
    used: dict[tuple[str, int], int] = {}
    running = []
    for i in range(60):
        model = POOLS[i % 3][0]
        job = _job(i, model)
        milli = job.tasks[0].request.gpu_milli
        candidates = [(n, g) for n in nodes if n.gpus[0].model == model for g in range(len(n.gpus))]
        node, gpu = rng.choice([(n, g) for n, g in candidates if used.get((n.id, g), 0) + milli <= 1000])
        used[(node.id, gpu)] = used.get((node.id, gpu), 0) + milli
        placement = TaskPlacement(job.tasks[0].id, node.id, (gpu,), (milli,))
        running.append(RunningWorkload(Workload(job, i), (placement,)))
    pending = tuple(Workload(_job(100 + k, POOLS[k % 3][0], tasks=1 + k % 3), 100 + k) for k in range(40))
    queue = QueueSpec("q", tuple(ResourceQuota(f"gpu:{m}", 1_000_000) for m, _, _ in POOLS))
    return ClusterState(nodes, (queue,), tuple(running), pending)


class _RebuildingPlacer(FrameworkPlacer):
    """The placer as it was: a whole snapshot for every new view."""

    def _derived(self, nodes):  # type: ignore[no-untyped-def]
        return None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_incremental_cycle_decides_exactly_what_a_full_rebuild_decides(seed: int) -> None:
    state = _state(seed)
    typical = workload_typical([t.request for w in state.pending for t in w.job.tasks])
    incremental = schedule_cycle(state, FrameworkPlacer.for_policy("fgdb", typical, 7, 1), CycleConfig())
    rebuilt = schedule_cycle(
        state,
        _RebuildingPlacer(FrameworkPlacer.for_policy("fgdb", typical).profile, typical, 7, 1),
        CycleConfig(),
    )
    assert len(incremental.admissions) >= 20  # the comparison covers many admissions
    assert incremental.admissions == rebuilt.admissions
    assert [(p.job_id, p.reason) for p in incremental.pending] == [
        (p.job_id, p.reason) for p in rebuilt.pending
    ]


def test_with_free_is_from_nodes_of_the_updated_nodes_short_of_the_stamps() -> None:
    nodes = _fleet()[:5]
    base = ClusterSnapshot.from_nodes(nodes)
    updated = list(nodes)
    updated[1] = Node(
        nodes[1].id,
        64_000,
        512_000,
        tuple(
            GpuDevice(g.index, g.model, g.memory_mib, free)
            for g, free in zip(nodes[1].gpus, (0, 500, 250, 0, 0, 0, 0, 250), strict=True)
        ),
        free_cpu_milli=10_000,
        free_memory_mib=1024,
    )
    derived = base.with_free({1: (10_000, 1024, (0, 500, 250, 0, 0, 0, 0, 250))})
    fresh = ClusterSnapshot.from_nodes(updated)
    for column in ("cpu_free", "mem_free", "gpu_free", "gpu_full", "gpu_max", "class_counts"):
        assert np.array_equal(getattr(derived, column), getattr(fresh, column)), column
    assert derived.stamps is base.stamps  # same family: caches keyed on stamps stay valid
    assert [int(s) for s in np.flatnonzero(derived.node_stamp != base.node_stamp)] == [1]
    with pytest.raises(ValueError, match="do not fit"):
        base.with_free({1: (0, 0, (1001,) * 8)})


def test_a_cycle_carrying_the_last_snapshot_decides_what_a_fresh_one_decides() -> None:
    first = _state(4)
    typical = workload_typical([t.request for w in first.pending for t in w.job.tasks])
    profile = FrameworkPlacer.for_policy("fgdb", typical).profile
    earlier = FrameworkPlacer(profile, typical, 7, 1)
    result = schedule_cycle(first, earlier, CycleConfig())
    # The next cycle: what was admitted now runs, the same nodes (objects), fresh pending jobs.
    admitted = {a.job_id: a.placements for a in result.admissions}
    pending = {w.job.id: w for w in first.pending}
    running = (*first.running, *(RunningWorkload(pending[j], p) for j, p in admitted.items()))
    waiting = tuple(Workload(_job(500 + k, POOLS[k % 3][0]), 500 + k) for k in range(30))
    second = ClusterState(first.nodes, first.queues, running, waiting)
    carried = FrameworkPlacer(profile, typical, 7, 2, previous=earlier)
    fresh = FrameworkPlacer(profile, typical, 7, 2)
    carried_result = schedule_cycle(second, carried, CycleConfig())
    assert carried._built[0][1].stamps is earlier._built[-1][1].stamps  # it did start from the last one
    assert carried_result.admissions == schedule_cycle(second, fresh, CycleConfig()).admissions
    assert len(carried_result.admissions) >= 10


def _books_state(books: RunningBooks) -> tuple[object, ...]:
    used = {n: (a.cpu, a.memory, tuple(a.gpu)) for n, a in books.used.items()}
    usage = {q: a for q, a in books.usage.items() if a}
    best_effort = {q: a for q, a in books.best_effort_usage.items() if a}
    return used, usage, best_effort, books.running


def _running_step(
    rng: random.Random, nodes: tuple[Node, ...], running: dict[str, RunningWorkload], serial: list[int]
) -> None:
    """One cycle's worth of change to the running work: some end, some start, some are told to stop, some
    move (a new attempt elsewhere); placements may name nodes the fleet does not have."""
    for job_id in rng.sample(sorted(running), k=min(len(running), rng.randint(0, 4))):
        del running[job_id]
    for job_id in rng.sample(sorted(running), k=min(len(running), rng.randint(0, 2))):
        before = running[job_id]
        running[job_id] = RunningWorkload(before.workload, before.placements, stopping=not before.stopping)
    for _ in range(rng.randint(0, 5)):
        serial[0] += 1
        i = serial[0]
        model, _, _ = POOLS[i % 3]
        job = _job(i, model, tasks=1 + i % 2)
        if i % 5 == 0:
            job = Job(job.id, "other" if i % 10 == 0 else "root/q", job.tasks, best_effort=i % 10 != 0)
        elif i % 2:
            job = Job(job.id, "root/q", job.tasks)
        fitting = [n for n in nodes if n.gpus[0].model == model] or list(nodes)
        placements = tuple(
            TaskPlacement(
                t.id,
                "gone-node" if i % 11 == 0 else rng.choice(fitting).id,
                (rng.randrange(2),),
                (t.request.gpu_milli,),
            )
            for t in job.tasks
        )
        running[job.id] = RunningWorkload(Workload(job, i), placements)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_books_carried_from_cycle_to_cycle_hold_what_books_counted_afresh_hold(seed: int) -> None:
    rng = random.Random(seed)
    fleet = _fleet()
    nodes = fleet
    queues = (QueueSpec("root"), QueueSpec("root/q"), QueueSpec("other"))
    running: dict[str, RunningWorkload] = {}
    carried, serial = RunningBooks(), [0]
    for step in range(60):
        _running_step(rng, nodes, running, serial)
        if step % 17 == 16:  # a node leaves or comes back: another tuple of nodes
            nodes = fleet if len(nodes) < len(fleet) else fleet[1:]
        if step % 23 == 22:  # the queues were reconfigured
            queues = (QueueSpec("root"), QueueSpec("root/q"))
        tree = QueueTree(queues)
        work = tuple(running.values())
        carried.count(tree, nodes, work)
        fresh = RunningBooks()
        fresh.count(tree, nodes, work)
        assert _books_state(carried) == _books_state(fresh), f"step {step}"
        assert carried.view(1000, False) == fresh.view(1000, False), f"step {step}"
        assert carried.view(2000, True) == fresh.view(2000, True), f"step {step}"


@pytest.mark.parametrize("seed", [1, 2])
def test_cycles_carrying_their_books_decide_what_cycles_counting_afresh_decide(seed: int) -> None:
    rng = random.Random(seed)
    state = _state(seed)
    typical = workload_typical([t.request for w in state.pending for t in w.job.tasks])
    profile = FrameworkPlacer.for_policy("fgdb", typical).profile
    running = {w.job.id: w for w in state.running}
    books, serial, admitted = RunningBooks(), [1000], 0
    for cycle in range(12):
        _running_step(rng, state.nodes, running, serial)
        pending = tuple(
            Workload(_job(2000 + 10 * cycle + k, POOLS[k % 3][0]), 2000 + 10 * cycle + k) for k in range(6)
        )
        now = ClusterState(state.nodes, state.queues, tuple(running.values()), pending)
        carried = schedule_cycle(now, FrameworkPlacer(profile, typical, 7, cycle), CycleConfig(), books)
        fresh = schedule_cycle(now, FrameworkPlacer(profile, typical, 7, cycle), CycleConfig())
        assert carried == fresh, f"cycle {cycle}"
        for admission in carried.admissions:
            workload = next(w for w in pending if w.job.id == admission.job_id)
            running[admission.job_id] = RunningWorkload(workload, admission.placements)
        admitted += len(carried.admissions)
    assert admitted >= 30  # the comparison covers many admissions
