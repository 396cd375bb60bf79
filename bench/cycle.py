"""One scheduling cycle at the platform bench's scale, in one process: how long `schedule_cycle` takes with
the service's placer for a given number of waiting jobs.

    .venv/bin/python bench/cycle.py [--pending 1,10,50] [--running 150] [--cycles 20]

The fleet has the pools of deploy/fleets/bench-200.yaml (560 A100, 280 L40S, 120 T4 GPUs on 200 nodes);
`--running` 1-GPU jobs (every third half a GPU, models round-robin, seeded) already hold room. Each cycle
gets a fresh placer seeded by its number, as the service makes one per cycle: "fresh" builds its
framework snapshot from scratch, "carried" starts from the previous cycle's last snapshot (what the
service does since bf6da0a). The figure is the median cycle.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from suanli.scheduling.adapters.framework_placer import FrameworkPlacer, workload_typical
from suanli.scheduling.domain.model import GpuDevice, Job, Node, Task, TaskPlacement, TaskRequest
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.queueing import (
    ClusterState,
    CycleConfig,
    QueueSpec,
    ResourceQuota,
    RunningWorkload,
    Workload,
    schedule_cycle,
)

POOLS = (("A100 80GB SXM", 8, 70), ("L40S", 4, 70), ("T4", 2, 60))  # model, GPUs per node, nodes


def fleet() -> tuple[Node, ...]:
    return tuple(
        Node(
            f"{model.split()[0]}-{i}",
            64_000,
            512_000,
            tuple(GpuDevice(g, model, 80_000) for g in range(gpus)),
        )
        for model, gpus, count in POOLS
        for i in range(count)
    )


def job(i: int) -> Job:
    model = POOLS[i % 3][0]
    request = TaskRequest(
        cpu_milli=1000,
        memory_mib=1024,
        gpu_count=1,
        gpu_milli=500 if i % 3 == 0 else 1000,
        gpu_models=(model,),
    )
    return Job(f"job-{i}", "bench", (Task(f"job-{i}-w", request),))


def cluster(running: int, pending: int, seed: int = 1) -> ClusterState:
    rng = random.Random(seed)
    nodes = fleet()
    used: dict[tuple[str, int], int] = {}
    held = []
    for i in range(running):
        j = job(i)
        milli = j.tasks[0].request.gpu_milli
        free = [
            (n, g)
            for n in nodes
            if n.gpus[0].model == j.tasks[0].request.gpu_models[0]
            for g in range(len(n.gpus))
            if used.get((n.id, g), 0) + milli <= 1000
        ]
        node, gpu = rng.choice(free)
        used[(node.id, gpu)] = used.get((node.id, gpu), 0) + milli
        held.append(
            RunningWorkload(Workload(j, i), (TaskPlacement(j.tasks[0].id, node.id, (gpu,), (milli,)),))
        )
    waiting = tuple(Workload(job(running + k), running + k) for k in range(pending))
    queue = QueueSpec("bench", tuple(ResourceQuota(f"gpu:{m}", 10_000_000) for m, _, _ in POOLS))
    return ClusterState(nodes, (queue,), tuple(held), waiting)


def median_cycle_ms(state: ClusterState, cycles: int, carried: bool) -> tuple[float, int]:
    typical = workload_typical([t.request for w in (*state.running, *state.pending) for t in w.job.tasks])
    profile = policy_profile("fgdb")
    previous: FrameworkPlacer | None = None
    times, admitted = [], 0
    for cycle in range(cycles):
        placer = (
            FrameworkPlacer(profile, typical, 0, cycle, previous)
            if carried
            else FrameworkPlacer(profile, typical, 0, cycle)
        )
        started = time.perf_counter()
        result = schedule_cycle(state, placer, CycleConfig())
        times.append(time.perf_counter() - started)
        previous, admitted = placer, len(result.admissions)
    return statistics.median(times) * 1000, admitted


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pending", default="1,10,50", help="waiting jobs per cycle, comma-separated")
    parser.add_argument("--running", type=int, default=150)
    parser.add_argument("--cycles", type=int, default=20)
    args = parser.parse_args()
    print(f"{'pending':>8} {'admitted':>9} {'fresh (ms)':>11} {'carried (ms)':>13}")
    for pending in (int(p) for p in args.pending.split(",")):
        state = cluster(args.running, pending)
        fresh, admitted = median_cycle_ms(state, args.cycles, carried=False)
        carried, _ = median_cycle_ms(state, args.cycles, carried=True)
        print(f"{pending:>8} {admitted:>9} {fresh:>11.1f} {carried:>13.1f}")


if __name__ == "__main__":
    main()
