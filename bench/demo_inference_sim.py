"""The live demo's inference service in the simulator (not a test): what `suanli up` can reach at best.

`suanli up --headless --duration 90` replays the Azure conversation trace's first ~90 s at 1x against
`globex/chat` (`suanli.platform.demo_service`: llama-2-7b on half an L40S, 8-12 replicas, SLO 2 s TTFT +
100 ms TPOT, cold start 10 s, the SLO autoscaler) through one gateway in Washington DC. This replays the
same window through the simulator (`suanli.inference`, the same replica model `suanli.replica`, the same
autoscaler and network-aware balancer), all clients in the gateway's region, replicas there too:

- the demo's own service: 8 replicas at the start, the SLO autoscaler up to 12, its decisions applied
  from the first tick (the live autoscaler has no warm-up either);
- static counts (min = max = N) to show how many such replicas the window needs.

The simulator's >= 99 % (docs/BENCHMARKS.md, "Inference serving") is for deploy/services/chat.yaml
(llama-2-13b, up to 60 replicas), not for this service. Prints a Markdown table (docs/BENCHMARKS.md, "Live
demo inference").

    .venv/bin/python bench/demo_inference_sim.py [--seconds 90] [--static 2,6,8,10] [--seed 42]
    .venv/bin/python bench/demo_inference_sim.py --autoscaled 2-12,4-12,6-12,9-14   # other min-max choices
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from typing import Any

import numpy as np

from suanli.inference.runs import autoscaler_for, run, scenario
from suanli.inference.setup import Service, load_trace
from suanli.inference.simulator import SimResult
from suanli.platform.demo_service import GATEWAY_REGION, demo_spec
from suanli.resources import default_catalogue
from suanli.resources.network import measured_network
from suanli.serving.domain.spec import validate_service


def demo_service(replicas: tuple[int, int] | None = None) -> Service:
    """The demo's spec, in the gateway's region; `replicas` replaces (min, max) for a static count."""
    doc: dict[str, Any] = {**demo_spec(), "regions": [GATEWAY_REGION]}
    if replicas is not None:
        doc["min_replicas"], doc["max_replicas"] = replicas
    spec, speed = validate_service(doc, default_catalogue(), measured_network().regions)
    return Service(spec, speed)


def simulate(service: Service, seconds: float, seed: int) -> SimResult:
    trace = load_trace().window(0.0, seconds)
    sc = scenario(service, trace, {GATEWAY_REGION: 1.0}, seed)
    sc = replace(sc, setup=replace(sc.setup, warmup_s=0.0))
    return run(sc, autoscaler_for("slo", sc), "network-aware", service.spec.min_replicas)


def row(name: str, r: SimResult) -> str:
    served = r.e2e_s[~np.isnan(r.e2e_s)]
    p50, p99 = np.percentile(served, [50, 99]) if len(served) else (np.nan, np.nan)
    ups = ", ".join(f"{d.current}->{d.desired} at {d.at_s:.0f}s" for d in r.decisions) or "-"
    return (
        f"| {name} | {r.requests} | {100 * r.attainment:.1f} % | {p50:.1f} / {p99:.1f} s | "
        f"{r.dropped} | {r.gpu_seconds:.0f} | {ups} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=90.0, help="the trace's first SECONDS (90)")
    parser.add_argument("--static", default="2,6,8,10", help="static replica counts to run")
    parser.add_argument(
        "--autoscaled",
        default="",
        help="other MIN-MAX replica ranges to run with the SLO autoscaler, e.g. 2-12,6-12,9-14",
    )
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    started = time.perf_counter()
    print("| run | requests | SLO attainment | p50 / p99 | dropped | GPU-seconds | scale events |")
    print("|---|---|---|---|---|---|---|")
    spec = demo_service().spec
    label = f"the demo's: SLO autoscaler, {spec.min_replicas}-{spec.max_replicas}"
    print(row(label, simulate(demo_service(), args.seconds, args.seed)))
    for pair in filter(None, args.autoscaled.split(",")):
        low, high = (int(x) for x in pair.split("-"))
        label = f"SLO autoscaler, {low}-{high}"
        print(row(label, simulate(demo_service((low, high)), args.seconds, args.seed)))
    for count in (int(x) for x in args.static.split(",")):
        print(row(f"static {count}", simulate(demo_service((count, count)), args.seconds, args.seed)))
    print(f"\n{time.perf_counter() - started:.1f} s wall")


if __name__ == "__main__":
    main()
