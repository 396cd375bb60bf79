"""The inference simulator's benchmark: the Azure conversation trace against baselines and ours.

    .venv/bin/python bench/inference_sim.py [--seeds 42,43,44] [--kpa-targets 4,6,8,10,12]
        [--json out/inference_sim.json] [--plots docs/img] [--workers 2] [--speed 1] [--right-size]

Part 1 (the goal): with the network-aware balancer, per seed, static-at-peak-minute, static-at-mean, the
KPA-like autoscaler at each target concurrency, and ours (`slo`). Part 2 (balancers): seed 42, every
balancer with static-peak and ours. Part 3 (`--right-size`): part 1 again with each replica at the GPU
share `right_sized` picks from the trace's first 10 minutes (baselines re-sized at that share too), with
GPU-seconds also against the spec's static-peak of the same seed. Prints Markdown tables
(docs/BENCHMARKS.md, "Inference serving") and the wall time per run; `--plots` writes the
replicas-over-time and latency-CDF PNGs of seed 42.
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
from suanli.inference.runs import compare, right_sized, scenario
from suanli.inference.setup import CLIENT_WEIGHTS, load_service, load_trace
from suanli.routing.domain.balancing import BALANCERS

GOAL = ("static-peak", "static-mean", "kpa", "slo")


Job = tuple[int, str, tuple[str, ...], tuple[float, ...], float, str | None, float | None]


def _job(args: Job) -> dict[str, Any]:
    seed, balancer, autoscalers, kpa_targets, speed, plots, gpu = args
    service = load_service(gpu=gpu)
    trace = load_trace().compressed(speed)
    sc = scenario(service, trace, CLIENT_WEIGHTS, seed)
    started = time.perf_counter()
    comparison = compare(sc, balancer, autoscalers, kpa_targets)
    wall = time.perf_counter() - started
    setup = {"seed": seed, "balancer": balancer, "speed": speed, "gpu": service.spec.gpus}
    summary = report.summarise(comparison, setup)
    summary["wall_s"] = wall
    if plots:
        tag = f"inference_{balancer}_seed{seed}" + (f"_gpu{gpu:g}" if gpu is not None else "")
        report.plot(Path(plots), tag, comparison, sc.setup.tick_s)
    return summary


def _right_sized_table(sized: list[dict[str, Any]], spec_peak: dict[int, float]) -> str:
    """The right-sized runs, with GPU-seconds against their own static-peak and the spec's."""
    header = ("seed", "GPU per replica", "run", *report.COLUMNS[:-1], "% of spec's static-peak", "dropped")
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for s in sized:
        seed = s["setup"]["seed"]
        for label, r in s["runs"].items():
            cells = report.cells(r)
            share = f"{100 * r['gpu_seconds'] / spec_peak[seed]:.1f}"
            row = [str(seed), f"{s['setup']['gpu']:g}", label, *cells[:-1], share, cells[-1]]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


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
    parser.add_argument(
        "--right-size",
        action="store_true",
        help="part 3: every goal run again at the GPU share right_sized() picks from the first 10 minutes",
    )
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    targets = tuple(float(t) for t in args.kpa_targets.split(",") if t.strip())
    plots = str(args.plots) if args.plots else None
    jobs: list[Job] = [
        (seed, "network-aware", GOAL, targets, args.speed, plots if seed == seeds[0] else None, None)
        for seed in seeds
    ]
    jobs += [
        (seeds[0], b, ("static-peak", "slo"), (), args.speed, None, None)
        for b in BALANCERS
        if b != "network-aware"
    ]
    if args.right_size:
        options = right_sized(load_service(), load_trace().compressed(args.speed))
        print("## right-sizing (first 10 minutes of the trace)\n")
        print("\n".join(f"- {o.explain()}" for o in options) + "\n")
        best = options[0].gpus
        jobs += [
            (seed, "network-aware", GOAL, targets, args.speed, plots if seed == seeds[0] else None, best)
            for seed in seeds
        ]
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        everything = list(pool.map(_job, jobs))
    summaries = [s for job, s in zip(jobs, everything, strict=True) if job[6] is None]
    sized = [s for job, s in zip(jobs, everything, strict=True) if job[6] is not None]
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
    if sized:
        spec_peak = {s["setup"]["seed"]: s["runs"]["static-peak"]["gpu_seconds"] for s in goal}
        print(f"\n## right-sized: {sized[0]['setup']['gpu']:g} GPU per replica, network-aware\n")
        print(_right_sized_table(sized, spec_peak))
    for s in everything:
        print(
            f"\nstatic-peak {s['static_peak_replicas']} / static-mean {s['static_mean_replicas']} replicas "
            f"(seed {s['setup']['seed']}, {s['setup']['balancer']}); {s['wall_s']:.1f} s wall for "
            f"{len(s['runs'])} runs + the static-peak search"
        )
    print(f"\ntotal wall {time.perf_counter() - started:.0f} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(everything, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
