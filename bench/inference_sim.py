"""The inference simulator's benchmark: the Azure conversation trace against baselines and ours.

    .venv/bin/python bench/inference_sim.py [--seeds 42,43,44] [--kpa-targets 4,6,8,10,12]
        [--json out/inference_sim.json] [--plots docs/img] [--workers 2] [--speed 1]

Part 1 (the goal): with the network-aware balancer, per seed, static-at-peak-minute, static-at-mean, the
KPA-like autoscaler at each target concurrency, and ours (`slo`). Part 2 (balancers): seed 42, every
balancer with static-peak and ours. Prints Markdown tables (docs/BENCHMARKS.md, "Inference serving")
and the wall time per run; `--plots` writes the replicas-over-time and latency-CDF PNGs of seed 42.
Runs go to `--workers` processes (each run is one single-threaded simulation).
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from suanli.inference import report
from suanli.inference.runs import compare, scenario
from suanli.inference.setup import CLIENT_WEIGHTS, load_service, load_trace
from suanli.routing.domain.balancing import BALANCERS

GOAL = ("static-peak", "static-mean", "kpa", "slo")


def _job(args: tuple[int, str, tuple[str, ...], tuple[float, ...], float, str | None]) -> dict[str, Any]:
    seed, balancer, autoscalers, kpa_targets, speed, plots = args
    service = load_service()
    trace = load_trace().compressed(speed)
    sc = scenario(service, trace, CLIENT_WEIGHTS, seed)
    started = time.perf_counter()
    comparison = compare(sc, balancer, autoscalers, kpa_targets)
    wall = time.perf_counter() - started
    summary = report.summarise(comparison, {"seed": seed, "balancer": balancer, "speed": speed})
    summary["wall_s"] = wall
    if plots:
        report.plot(Path(plots), f"inference_{balancer}_seed{seed}", comparison, sc.setup.tick_s)
    return summary


def _table(summaries: list[dict[str, Any]]) -> str:
    header = ("seed", "balancer", "run", *report.COLUMNS)
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for s in summaries:
        for label, r in s["runs"].items():
            row = [str(s["setup"]["seed"]), s["setup"]["balancer"], label, *report.cells(r)]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="42,43,44")
    parser.add_argument("--kpa-targets", default="4,6,8,10,12")
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--plots", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    targets = tuple(float(t) for t in args.kpa_targets.split(",") if t.strip())
    plots = str(args.plots) if args.plots else None
    jobs = [
        (seed, "network-aware", GOAL, targets, args.speed, plots if seed == seeds[0] else None)
        for seed in seeds
    ]
    jobs += [
        (seeds[0], b, ("static-peak", "slo"), (), args.speed, None) for b in BALANCERS if b != "network-aware"
    ]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        summaries = list(pool.map(_job, jobs))
    goal = [s for s in summaries if s["setup"]["balancer"] == "network-aware"]
    print("## goal: network-aware balancer\n")
    print(_table(goal))
    print("\n## balancers: static-peak and ours, seed", seeds[0], "\n")
    first = [s for s in summaries if s["setup"]["seed"] == seeds[0]]
    print(
        _table(
            [
                {**s, "runs": {k: v for k, v in s["runs"].items() if k in ("static-peak", "slo")}}
                for s in first
            ]
        )
    )
    for s in summaries:
        print(
            f"\nstatic-peak {s['static_peak_replicas']} / static-mean {s['static_mean_replicas']} replicas "
            f"(seed {s['setup']['seed']}, {s['setup']['balancer']}); {s['wall_s']:.1f} s wall for "
            f"{len(s['runs'])} runs + the static-peak search"
        )
    print(f"\ntotal wall {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(summaries, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
