"""What the cycle's structural check (queueing/structural.py: NETWORK_CONSTRAINT, UNSCHEDULABLE,
NO_REGION_FITS before quota) costs per cycle on a large fleet: one pass over the nodes to group them into
shapes, then one verdict per distinct task request.

    .venv/bin/python bench/structural.py [--nodes 5000,50000] [--pending 1000] [--cycles 5]

The fleet repeats the pools of deploy/fleets/demo-3regions.yaml over 3 regions (one shape per pool and
region, whatever the node count); the pending jobs cycle through a few request shapes, one of them a task
no node can hold (4 A10 GPUs on one node). The figure is the median cycle's check, in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from suanli.scheduling.domain.model import GpuDevice, Job, Node, Task, TaskRequest
from suanli.scheduling.domain.network import EMPTY_NETWORK
from suanli.scheduling.domain.queueing.structural import StructuralCheck

# model, GPUs per node, CPU cores, memory GiB, share of the nodes (as in demo-3regions.yaml)
POOLS = (
    ("H200", 8, 224, 2048, 8),
    ("H100 SXM", 8, 192, 2048, 10),
    ("A100 80GB SXM", 8, 128, 1024, 10),
    ("L40S", 4, 64, 512, 6),
    ("A10", 1, 32, 128, 8),
    ("T4", 2, 104, 512, 12),
    (None, 0, 96, 384, 10),
)
REGIONS = ("washington-dc", "frankfurt", "tokyo")
SHAPES = (
    TaskRequest(cpu_milli=8000, memory_mib=65536, gpu_count=1, gpu_milli=1000, gpu_models=("A100 80GB SXM",)),
    TaskRequest(cpu_milli=2500, memory_mib=24576, gpu_count=1, gpu_milli=300),
    TaskRequest(cpu_milli=4000, memory_mib=8192),
    TaskRequest(cpu_milli=1000, memory_mib=1024, gpu_count=4, gpu_milli=1000, gpu_models=("A10",)),
)


def fleet(size: int) -> tuple[Node, ...]:
    weights = sum(p[4] for p in POOLS)
    nodes = []
    for model, gpus, cores, gib, share in POOLS:
        for i in range(size * share // weights):
            devices = tuple(GpuDevice(g, model) for g in range(gpus)) if model else ()
            region = REGIONS[i % len(REGIONS)]
            nodes.append(Node(f"{model or 'cpu'}-{i}", cores * 1000, gib * 1024, devices, region=region))
    return tuple(sorted(nodes, key=lambda n: n.id))


def jobs(count: int) -> list[Job]:
    return [
        Job(f"job-{i}", "bench", tuple(Task(f"job-{i}-w{k}", SHAPES[i % len(SHAPES)]) for k in range(2)))
        for i in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", default="5000,50000", help="fleet sizes, comma-separated")
    parser.add_argument("--pending", type=int, default=1000)
    parser.add_argument("--cycles", type=int, default=5)
    args = parser.parse_args()
    pending = jobs(args.pending)
    for size in (int(s) for s in args.nodes.split(",")):
        nodes = fleet(size)
        times = []
        for _ in range(args.cycles):
            start = time.perf_counter()
            check = StructuralCheck(nodes, EMPTY_NETWORK)  # one per cycle, as the cycle makes it
            verdicts = [check.reason(j) for j in pending]
            times.append(time.perf_counter() - start)
        impossible = sum(v is not None for v in verdicts)
        print(
            f"nodes {len(nodes):>6}  pending {len(pending)}  unschedulable {impossible}  "
            f"check per cycle {statistics.median(times) * 1000:.1f} ms"
        )


if __name__ == "__main__":
    main()
