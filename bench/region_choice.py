"""Gang placements per second with network-aware region choice, against the same gangs placed region-blind.

    .venv/bin/python bench/region_choice.py [--gangs 400] [--rtt traces/network/regions_rtt.csv]

The openb GPU nodes (1,213) are spread evenly over the 10 regions of the measured RTT table (IBM Cloud VPC,
the median of its five 30-day windows per direction: the kernel's `suanli.resources.network`, the model the
simulator and simulated fleets use; `--rtt` names another copy of the file) by the multi-region
simulator's rule (`simulator/geography.py`, seed 42). Each gang has 2..8 tasks of one
whole GPU and a data region drawn uniformly (seeded); half of them bound the RTT to it (50 or 150 ms).
`network-aware` is fgdb with region choice (locality region, the network filter and score);
`region-blind` places the same tasks node by node (locality any, no data region). Per mode: gangs/s,
gangs placed, the mean RTT from each placed task's region to its data region, and gangs split across
regions (0 where the locality forbids it).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from suanli.data import data_path
from suanli.resources.network import measured_network, read_measured_network
from suanli.scheduling.domain.framework import PluginContext, Scheduler
from suanli.scheduling.domain.model import Locality, TaskRequest
from suanli.scheduling.domain.network import NetworkSnapshot
from suanli.scheduling.domain.plugins.policies import policy_profile
from suanli.scheduling.domain.snapshot import ClusterSnapshot
from suanli.scheduling.simulator.geography import even_weights, spread_nodes
from suanli.scheduling.simulator.multiregion import network_snapshot
from suanli.scheduling.simulator.traces import load_nodes, load_pods
from suanli.scheduling.simulator.workload import workload_distribution

TRACES = data_path("traces/openb")
WHOLE = TaskRequest(cpu_milli=8000, memory_mib=16_384, gpu_count=1, gpu_milli=1000)


def gangs(regions: Sequence[str], count: int, rng: np.random.Generator) -> list[list[TaskRequest]]:
    out = []
    for _ in range(count):
        size = int(rng.integers(2, 9))
        data = regions[int(rng.integers(len(regions)))]
        bound = [None, None, 50.0, 150.0][int(rng.integers(4))]
        out.append([replace(WHOLE, data_region=data, max_rtt_ms=bound)] * size)
    return out


def run(
    snapshot: ClusterSnapshot, network: NetworkSnapshot, work: list[list[TaskRequest]], aware: bool
) -> tuple[float, int, float, int]:
    typical = workload_distribution([p.request for p in load_pods(TRACES / "openb_pod_list_default.csv")])
    scheduler = Scheduler(
        policy_profile("fgdb"), np.random.default_rng(42), PluginContext(typical, network=network)
    )
    placed = split = 0
    rtts: list[float] = []
    start = time.perf_counter()
    for gang in work:
        requests = gang if aware else [replace(r, data_region="", max_rtt_ms=None) for r in gang]
        result = scheduler.place_gang(snapshot, requests, Locality.REGION if aware else Locality.ANY)
        if not result.placed:
            continue
        snapshot = result.snapshot
        placed += 1
        regions = {snapshot.regions[int(snapshot.region_code[a.node])] for a in result.assignments}
        split += len(regions) > 1
        for region in (snapshot.regions[int(snapshot.region_code[a.node])] for a in result.assignments):
            rtts.append(network.path(region, gang[0].data_region)[0] or 0.0)
    seconds = time.perf_counter() - start
    return len(work) / seconds, placed, float(np.mean(rtts)) if rtts else 0.0, split


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--gangs", type=int, default=400)
    parser.add_argument("--rtt", type=Path, default=None, help="regions_rtt.csv (default: the packaged copy)")
    args = parser.parse_args()
    measured = read_measured_network(args.rtt.read_text()) if args.rtt else measured_network()
    network = network_snapshot(measured)
    regions = network.regions
    nodes = spread_nodes(
        load_nodes(TRACES / "openb_node_list_gpu_node.csv"),
        measured,
        even_weights(regions),
        np.random.default_rng(42),
    )
    snapshot = ClusterSnapshot.from_nodes(nodes)
    work = gangs(regions, args.gangs, np.random.default_rng(7))
    print(f"{'mode':14} {'gangs':>6} {'gangs/s':>8} {'placed':>7} {'mean RTT ms':>12} {'split':>6}")
    for mode, aware in (("network-aware", True), ("region-blind", False)):
        rate, placed, rtt, split = run(snapshot, network, work, aware)
        print(f"{mode:14} {len(work):6d} {rate:8.0f} {placed:7d} {rtt:12.1f} {split:6d}", flush=True)


if __name__ == "__main__":
    main()
