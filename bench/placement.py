"""Placement decisions per second, one process on one core, for FGD and fgdb (ours) on openb and copies of it.

    .venv/bin/python bench/placement.py [--decisions 3000] [--sizes 1213,5000,15000] [--policies fgd,fgdb]
    .venv/bin/python bench/placement.py --base /tmp/base --rounds 2 --sizes 5000,15000,50000

The node list is replicated (renamed copies) up to each size; the arrivals are the `default` pod list (or
`--workload`'s), shuffled and inflated for that cluster as in the simulator. A decision is one
`Scheduler.place_task` call (admission, filters, scores, device choice and the new snapshot); failed
placements count too. The first decision of each run fills the caches for every node and is timed
separately.

Each measurement runs in a fresh child process pinned to one CPU. `--base DIR` also measures the code of
another checkout (e.g. `git worktree add /tmp/base <commit>`, or `git archive <commit> libs services apps
| tar -x -C /tmp/base`) in the same run, interleaved with this one (base, new, base, new, ...), and prints
the ratios and whether both made the same placements (a digest of every node and device chosen).
`--no-cache` adds this code with the scheduler's per-request cache off (`Scheduler(incremental=False)`).
Rates (and the first decision) are given by wall clock and by the child's CPU time; on a shared machine
the CPU-time figures are the steadier ones. The load average before each measurement is printed with it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def replicate(nodes: list[Any], size: int) -> list[Any]:
    return [
        replace(nodes[i % len(nodes)], id=f"{nodes[i % len(nodes)].id}-{i // len(nodes)}")
        for i in range(size)
    ]


def measure(
    policy: str, size: int, decisions: int, traces: Path, incremental: bool, workload: str = "default"
) -> dict[str, Any]:
    """One run in this process, with whatever `suanli` the import path holds (this code or a base's)."""
    import numpy as np

    from suanli.scheduling.domain.framework import PluginContext, Scheduler
    from suanli.scheduling.domain.plugins.policies import policy_profile
    from suanli.scheduling.domain.snapshot import ClusterSnapshot
    from suanli.scheduling.simulator.traces import load_nodes, load_pods
    from suanli.scheduling.simulator.workload import build_arrivals, workload_distribution

    nodes = replicate(load_nodes(traces / "openb_node_list_gpu_node.csv"), size)
    requests = [p.request for p in load_pods(traces / f"openb_pod_list_{workload}.csv")]
    snapshot = ClusterSnapshot.from_nodes(nodes)
    arrivals = build_arrivals(requests, snapshot.total_gpu_milli, 1.3, np.random.default_rng(42))[:decisions]
    options = {} if incremental else {"incremental": False}
    scheduler = Scheduler(
        policy_profile(policy),
        np.random.default_rng(42),
        PluginContext(workload_distribution(requests)),
        **options,
    )
    digest = hashlib.blake2b(digest_size=8)
    start, start_cpu = time.perf_counter(), time.process_time()
    result = scheduler.place_task(snapshot, arrivals[0])
    first, first_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    snapshot = result.snapshot
    placed = [result.assignment]
    wall, cpu = time.perf_counter(), time.process_time()
    for request in arrivals[1:]:
        result = scheduler.place_task(snapshot, request)
        snapshot = result.snapshot
        placed.append(result.assignment)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    for a in placed:
        digest.update(repr(None if a is None else (a.node, a.gpu_indices, a.gpu_milli)).encode())
    steady = len(arrivals) - 1
    return {
        "rate_wall": steady / wall,
        "rate_cpu": steady / cpu,
        "first_ms": first * 1000,
        "first_cpu_ms": first_cpu * 1000,
        "decisions": len(arrivals),
        "digest": digest.hexdigest(),
    }


def child(args: argparse.Namespace) -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {args.cpu})
    traces = Path(args.traces)
    print(
        json.dumps(measure(args.policy, args.size, args.decisions, traces, not args.no_cache, args.workload))
    )


def run_child(
    code: str, policy: str, size: int, decisions: int, traces: Path, cpu: int, workload: str
) -> dict[str, Any]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", "--policy", policy, "--size", str(size)]
    argv += [
        "--decisions",
        str(decisions),
        "--traces",
        str(traces),
        "--cpu",
        str(cpu),
        "--workload",
        workload,
    ]
    if code == "no-cache":
        argv.append("--no-cache")
    elif code != "new":
        root = Path(code)
        env["PYTHONPATH"] = os.pathsep.join(str(root / p) for p in ("libs", "services", "apps"))
    out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True, cwd=REPO)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--decisions", type=int, default=3000, help="decisions per run (first included)")
    parser.add_argument("--sizes", default="1213,5000,15000", help="cluster sizes (nodes), comma-separated")
    parser.add_argument("--policies", default="fgd,fgdb", help="named policies, comma-separated")
    parser.add_argument(
        "--workload", default="default", help="openb pod list (gpuspec25: fgdb's pressure term)"
    )
    parser.add_argument("--base", help="checkout of the code to compare with, measured interleaved")
    parser.add_argument("--no-cache", action="store_true", help="also measure with the per-request cache off")
    parser.add_argument("--rounds", type=int, default=1, help="measurements per code, interleaved")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU every run is pinned to")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--policy", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--traces", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from suanli.data import data_path

    traces = data_path("traces/openb")
    codes = ([args.base] if args.base else []) + ["new"] + (["no-cache"] if args.no_cache else [])
    names = {c: ("base" if c == args.base else c) for c in codes}
    print(
        f"{'policy':7} {'nodes':>6} {'code':8} {'round':>5} {'load':>5} {'decisions':>9} "
        f"{'rate/s wall':>11} {'rate/s cpu':>10} {'first ms':>8} {'cpu ms':>6}  digest"
    )
    for policy in args.policies.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            results: dict[str, list[dict[str, Any]]] = {c: [] for c in codes}
            for round_ in range(1, args.rounds + 1):
                for code in codes:
                    load = os.getloadavg()[0]
                    r = run_child(code, policy, size, args.decisions, traces, args.cpu, args.workload)
                    results[code].append(r)
                    print(
                        f"{policy:7} {size:6d} {names[code]:8} {round_:5d} {load:5.2f} {r['decisions']:9d} "
                        f"{r['rate_wall']:11.0f} {r['rate_cpu']:10.0f} {r['first_ms']:8.1f} "
                        f"{r['first_cpu_ms']:6.1f}  {r['digest']}",
                        flush=True,
                    )
            if args.base:
                base, new = results[args.base], results["new"]
                digests = {r["digest"] for r in base + new}

                def mean(rs: list[dict[str, Any]], k: str) -> float:
                    return sum(r[k] for r in rs) / len(rs)

                wall = mean(new, "rate_wall") / mean(base, "rate_wall")
                cpu = mean(new, "rate_cpu") / mean(base, "rate_cpu")
                first = mean(base, "first_ms") / mean(new, "first_ms")
                first_cpu = mean(base, "first_cpu_ms") / mean(new, "first_cpu_ms")
                print(
                    f"{policy:7} {size:6d} ratio new/base: rate wall {wall:.2f}, rate cpu {cpu:.2f}, first "
                    f"decision {first:.1f}x faster (cpu {first_cpu:.1f}x); same placements: "
                    f"{'yes' if len(digests) == 1 else 'NO'}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
