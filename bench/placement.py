"""Placement decisions per second, one process, for FGD and fgdb (ours) on openb and on copies of it.

    .venv/bin/python bench/placement.py [--decisions 3000] [--sizes 1213,5000,15000] [--policies fgd,fgdb]

The node list is replicated (renamed copies) up to each size; the arrivals are the `default` pod list,
shuffled and inflated for that cluster as in the simulator. A decision is one `Scheduler.place_task` call
(admission, filters, scores, device choice and the new snapshot); failed placements count too. The first
decision of each run fills the per-node caches for every node and is timed separately.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from suanli.data import data_path
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.model import Node
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.snapshot import ClusterSnapshot
from suanli.scheduling.simulator.traces import load_nodes, load_pods
from suanli.scheduling.simulator.workload import build_arrivals, workload_distribution

TRACES = data_path("traces/openb")


def replicate(nodes: list[Node], size: int) -> list[Node]:
    return [
        replace(nodes[i % len(nodes)], id=f"{nodes[i % len(nodes)].id}-{i // len(nodes)}")
        for i in range(size)
    ]


def measure(policy: str, size: int, decisions: int) -> tuple[float, float, int]:
    nodes = replicate(load_nodes(TRACES / "openb_node_list_gpu_node.csv"), size)
    requests = [p.request for p in load_pods(TRACES / "openb_pod_list_default.csv")]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    arrivals = build_arrivals(requests, snapshot.total_gpu_milli, 1.3, np.random.default_rng(42))[:decisions]
    scheduler = Scheduler(
        policy_profile(policy), np.random.default_rng(42), PluginContext(workload_distribution(requests))
    )
    start = time.perf_counter()
    snapshot = scheduler.place_task(snapshot, arrivals[0]).snapshot
    first = time.perf_counter() - start
    start = time.perf_counter()
    for request in arrivals[1:]:
        snapshot = scheduler.place_task(snapshot, request).snapshot
    steady = time.perf_counter() - start
    return (len(arrivals) - 1) / steady, first, len(arrivals)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--decisions", type=int, default=3000)
    parser.add_argument("--sizes", default="1213,5000,15000")
    parser.add_argument("--policies", default="fgd,fgdb")
    args = parser.parse_args()
    print(f"{'policy':8} {'nodes':>6} {'decisions':>9} {'decisions/s':>12} {'first (ms)':>10}")
    for policy in args.policies.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            rate, first, n = measure(policy, size, args.decisions)
            print(f"{policy:8} {size:6d} {n:9d} {rate:12.0f} {first * 1000:10.1f}", flush=True)


if __name__ == "__main__":
    main()
