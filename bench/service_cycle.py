"""The scheduling service's whole cycle at the platform bench's scale, in one process: what one
`CycleRunner` turn costs with R jobs running and N just submitted.

    .venv/bin/python bench/service_cycle.py [--running 150] [--pending 1,5] [--cycles 200] [--profile]

`bench/cycle.py` times `schedule_cycle` alone; the running service does more around it every cycle:
the cluster state from the projection, the placer (`fgdb`, its typical tasks learnt from the live
requests, as `scheduling.bootstrap` makes it), the capacity view's node list, and the commit of the
placements (here to the in-memory event store, so PostgreSQL's round trip is not in the figure). The
fleet is deploy/fleets/bench-200.yaml's (560 A100, 280 L40S, 120 T4 on 200 nodes); the jobs are
`bench/latency.py`'s (one task, models round-robin, every third half a GPU). Each measured turn first
ends the N oldest running jobs and submits N new ones (untimed), so R stays constant; the figure is the
median turn. ``--profile`` prints cProfile's top functions of the measured turns instead of timing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
import uuid
from collections import deque
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from suanli.clock import ManualClock
from suanli.eventstore import InMemoryEventStore
from suanli.scheduling.adapters.framework_placer import FrameworkPlacer, workload_typical
from suanli.scheduling.adapters.pending import InMemoryPendingReasons
from suanli.scheduling.adapters.store import StoreWriter, Unfenced
from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec, ResourceQuota
from suanli.scheduling.service_layer.assembly import Scheduling, assemble
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import RecordTaskReport, SeedQueues, SubmitJob
from suanli.scheduling.service_layer.projection import Projection
from suanli.scheduling.service_layer.queues_config import QueueConfig
from suanli.scheduling.testing import task_report

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# (region, model, GPUs per node, nodes, cores, GiB): deploy/fleets/bench-200.yaml
POOLS = (
    ("washington-dc", "A100 80GB SXM", 8, 70, 128, 1024),
    ("frankfurt", "L40S", 4, 70, 64, 512),
    ("tokyo", "T4", 2, 60, 104, 512),
)
MODELS = tuple(model for _, model, *_ in POOLS)


def capacity_view() -> CapacityView:
    capacity = CapacityView()
    for region, model, gpus, count, cores, gib in POOLS:
        for i in range(count):
            capacity.on_capacity(
                {
                    "node_id": f"{region}-{i:03d}",
                    "region": region,
                    "zone": f"{region}-1",
                    "site": f"{region}-site",
                    "allocatable": {"cpu_milli": cores * 1000, "memory_mib": gib * 1024},
                    "devices": [
                        {"index": g, "model": model, "memory_total_mib": 80 * 1024} for g in range(gpus)
                    ],
                }
            )
    return capacity


def spec(i: int) -> AcceptedSpec:
    task = AcceptedTask(
        "",
        "w",
        cpu_milli=1000,
        memory_mib=2048,
        gpu_count=1,
        gpu_milli=500 if i % 3 == 0 else 1000,
        gpu_models=(MODELS[i % 3],),
        argv=("run",),
    )
    return AcceptedSpec(name=f"job-{i}", queue="bench", min_available=1, max_retries=0, tasks=(task,))


def assembled(clock: ManualClock) -> tuple[Scheduling, Projection]:
    profile = policy_profile("fgdb")
    last: list[FrameworkPlacer] = []

    def placer(requests: Sequence[Any], cycle: int) -> FrameworkPlacer:  # as scheduling.bootstrap makes it
        made = FrameworkPlacer(profile, workload_typical(requests), 0, cycle, last[-1] if last else None)
        last[:] = [made]
        return made

    writer = StoreWriter(InMemoryEventStore(clock=clock), InMemoryPendingReasons(), Unfenced())
    projection = Projection()
    scheduling = assemble(
        writer, projection, capacity_view(), placer, clock=clock, ids=uuid.uuid4, interval_s=3600.0
    )
    return scheduling, projection


def report(name: str, projection: Projection, job_id: str, **extra: Any) -> RecordTaskReport:
    return task_report(name, projection.jobs[job_id].tasks[0], job_id, T0, **extra)


async def measure(running: int, pending: int, cycles: int, profiler: cProfile.Profile | None) -> list[float]:
    clock = ManualClock(T0)
    scheduling, projection = assembled(clock)
    quotas = tuple(ResourceQuota(f"gpu:{m}", 10_000_000) for m in MODELS)
    await scheduling.commands.handle(
        SeedQueues(QueueConfig((QueueSpec("bench", quotas),), (PriorityClass("batch", 100),)))
    )
    live: deque[str] = deque()
    n = 0

    async def submit(count: int) -> list[str]:
        nonlocal n
        ids = []
        for _ in range(count):
            ids.append((await scheduling.commands.handle(SubmitJob(spec(n)))).id)
            n += 1
        return ids

    async def start(ids: list[str]) -> None:
        for job_id in ids:
            await scheduling.commands.handle(
                report("TaskStarted", projection, job_id, device_indices=[], pid=None)
            )

    first = await submit(running)
    await scheduling.cycles.run()
    await start(first)
    live.extend(first)
    times = []
    for _ in range(cycles):
        clock.advance(timedelta(milliseconds=100))
        for _ in range(pending):
            await scheduling.commands.handle(report("TaskFinished", projection, live.popleft(), exit_code=0))
        fresh = await submit(pending)
        if profiler is not None:
            profiler.enable()
        began = time.perf_counter()
        admitted = await scheduling.cycles.run()
        times.append(time.perf_counter() - began)
        if profiler is not None:
            profiler.disable()
        assert admitted == pending, f"admitted {admitted} of {pending}"
        await start(fresh)
        live.extend(fresh)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--running", type=int, default=150)
    parser.add_argument("--pending", default="1,5")
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--profile", action="store_true", help="cProfile the measured turns instead")
    args = parser.parse_args()
    for pending in (int(p) for p in args.pending.split(",")):
        profiler = cProfile.Profile() if args.profile else None
        times = asyncio.run(measure(args.running, pending, args.cycles, profiler))
        if profiler is not None:
            print(f"== {args.running} running, {pending} submitted per cycle ==")
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            continue
        ms = sorted(t * 1000 for t in times)
        print(
            f"{args.running} running, {pending} submitted per cycle: median {statistics.median(ms):.2f} ms,"
            f" p90 {ms[int(0.9 * len(ms))]:.2f} ms over {len(ms)} cycles"
        )


if __name__ == "__main__":
    main()
