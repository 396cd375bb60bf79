"""Routing benchmark (not a test): resolves per second on one core and the server-side p99.

The scene: the 10 measured regions (traces/network, median of the five windows, via
suanli.resources.network) and 1,000 sites
spread over them (100 per region), one GPU node each, H100/A100/L40S in turn, with a seeded share of
their GPUs in use. The network model on top of the measured RTTs: jitter 2 % of the RTT, loss 0.1 % between
regions, 20-100 Gbps measured bandwidth (seeded), intra-region paths unmeasured (intra_region_rtt_ms). Each
resolve asks from a random region with random constraints (max RTT, bandwidth floor, GPU model, CU needed,
price limit), drawn once with a fixed seed.

Two measurements, on one core each:
- in-process: `Router.resolve` (validation, the cached `RoutingTable` and the vectorised scoring) in a loop
  on core 0; resolves/s is calls over the loop's wall time, p50/p99 per call; and what the first resolve
  after a view change pays to rebuild the table (one node's capacity changed);
- through gRPC: a server process pinned to core 0 serving `suanli.routing.v1.Routing` (the production
  servicer, answer writer and metrics with an OpenTelemetry SDK meter), driven by ``--clients`` client
  processes on the next cores with ``--concurrency`` calls in flight each. The server times each Resolve
  from request to answer (what `suanli_routing_resolve_seconds` records) and reports its p50/p99 and its
  process CPU time per call (gRPC's own threads included): 1 / that is what one server core can answer;
  the clients report what they got answered per second.

    .venv/bin/python bench/routing.py              # 10 s each (the recorded run)
    .venv/bin/python bench/routing.py --quick      # a smoke run: 1 s each, 1 client
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import platform
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MODELS = (
    ("NVIDIA H100 80GB HBM3", "h100-80gb-sxm", 989.0),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm", 312.0),
    ("NVIDIA L40S", "l40s", 362.0),
)
TARGET_RATE = 20_000
TARGET_P99_MS = 2.0


def regions_rtt() -> dict[tuple[str, str], float]:
    from suanli.resources.network import measured_network

    return dict(measured_network().region_rtt_ms)


def build_router(sites: int, seed: int) -> Any:
    from suanli.clock import ManualClock, to_ms
    from suanli.data import data_path
    from suanli.resources.pricebook_file import load_pricebook
    from suanli.routing.domain.links import REGION, LinkState, LinkStatus
    from suanli.routing.domain.scoring import ScoringPolicy
    from suanli.routing.service_layer.capacity import CapacityState
    from suanli.routing.service_layer.network import NetworkState
    from suanli.routing.service_layer.router import Router
    from suanli.routing.testing import node_capacity

    rng = random.Random(seed)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    at = to_ms(now)
    network = NetworkState()
    for (src, dst), rtt in sorted(regions_rtt().items()):
        network.apply(
            LinkState(
                f"region:{src}->{dst}",
                REGION,
                src,
                "",
                dst,
                "",
                rtt,
                rtt,
                (0.02 * rtt,),
                0.001,
                rng.uniform(20_000, 100_000),
                at,
                LinkStatus.OK,
                "",
                100,
            )
        )
    regions = sorted(network.regions())
    capacity = CapacityState()
    for i in range(sites):
        region = regions[i % len(regions)]
        model, device_class, cu = MODELS[(i // len(regions)) % len(MODELS)]
        record = node_capacity(
            f"n{i}",
            region,
            f"{region[:3].lower()}-{i}",
            at,
            model=model,
            device_class=device_class,
            cu_per_gpu=cu,
            used_gpus=rng.randint(0, 8),
        )
        capacity.apply(record, at)
    book = load_pricebook(data_path("deploy/billing/pricebook.yaml"))
    router = Router(network, capacity, book, ScoringPolicy(), ManualClock(now))
    router.table()  # built once; rebuilt only when a view changes
    return router, regions


def queries(regions: list[str], count: int, seed: int) -> list[Any]:
    from suanli.routing.service_layer.router import ResolveQuery

    rng = random.Random(seed + 1)
    out = []
    for _ in range(count):
        out.append(
            ResolveQuery(
                kind=rng.choice(("training", "inference")),
                from_region=rng.choice(regions),
                max_rtt_ms=rng.choice((0.0, 50.0, 100.0, 200.0)),
                min_bandwidth_gbps=rng.choice((0.0, 0.0, 25.0)),
                gpu_models=rng.choice(((), ("H100",), ("A100", "L40S"))),
                cu=rng.choice((0.0, 312.0, 989.0, 3000.0)),
                max_price_per_hour=rng.choice((0.0, 0.0, 30.0)),
                limit=10,
            )
        )
    return out


def pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and core < (os.cpu_count() or 1):
        os.sched_setaffinity(0, {core})


@dataclass
class Figures:
    name: str
    rate: float
    p50_ms: float
    p99_ms: float
    calls: int

    def line(self) -> str:
        ok = "meets" if self.rate >= TARGET_RATE and self.p99_ms <= TARGET_P99_MS else "misses"
        return (
            f"{self.name:<28} {self.rate:>10,.0f}/s  p50 {self.p50_ms:6.3f} ms  p99 {self.p99_ms:6.3f} ms  "
            f"({self.calls:,} calls; {ok} >= {TARGET_RATE:,}/s, p99 <= {TARGET_P99_MS} ms)"
        )


def percentiles(samples_ns: list[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return statistics.median(ordered) / 1e6, p99 / 1e6


def in_process(sites: int, seconds: float, seed: int) -> Figures:
    pin(0)
    router, regions = build_router(sites, seed)
    work = queries(regions, 4096, seed)
    for q in work:
        router.resolve(q)  # warm: the table's per-origin, per-limit and per-model caches
    samples: list[int] = []
    clock = time.perf_counter_ns
    start = time.perf_counter()
    end = start + seconds
    i = 0
    while time.perf_counter() < end:
        for q in work[i % 4096 : i % 4096 + 256]:
            t0 = clock()
            router.resolve(q)
            samples.append(clock() - t0)
        i += 256
    elapsed = time.perf_counter() - start
    p50, p99 = percentiles(samples)
    return Figures("in-process Router.resolve", len(samples) / elapsed, p50, p99, len(samples))


def rebuild_ms(sites: int, seed: int) -> tuple[float, float]:
    """Median and max time of the first resolve's table rebuild after one node's capacity changed."""
    from suanli.clock import to_ms
    from suanli.routing.testing import node_capacity

    router, regions = build_router(sites, seed)
    at = to_ms(router.clock.now())
    samples = []
    for i in range(40):
        region = regions[i % len(regions)]
        record = node_capacity(f"n{i}", region, f"{region[:3].lower()}-{i}", at + 1 + i, used_gpus=i % 8)
        router.capacity.apply(record, at + 1 + i)
        t0 = time.perf_counter()
        router.table()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples), max(samples)


# -- through gRPC -------------------------------------------------------------------------------------------


class _Timings:
    """The servicer's metrics (the production instruments, on an SDK meter) that also keep each
    Resolve's server-side time once measuring has begun."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        from suanli.routing.adapters.metrics import ResolveMetrics

        meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("bench")
        self.metrics = ResolveMetrics(meter)
        self.seconds: list[float] = []
        self.measuring = False

    def resolved(self, kind: str, outcome: str, seconds: float) -> None:
        self.metrics.resolved(kind, outcome, seconds)
        if self.measuring:
            self.seconds.append(seconds)


def _server(sites: int, seed: int, ports: Any, results: Any, measure: Any, stop: Any) -> None:
    pin(0)

    async def serve() -> None:
        from suanli.contracts.load import LoadView
        from suanli.routing.entrypoints.grpc_server import RoutingServicer, serving, start_server
        from suanli.routing.service_layer.replicas import ReplicaResolver

        router, _ = build_router(sites, seed)
        timings = _Timings()
        replicas = ReplicaResolver(LoadView(), router.network, router.clock.now, intra_region_ms=1.0)
        server, port, health = await start_server(
            RoutingServicer(router, router.network, timings, replicas), "127.0.0.1:0"
        )
        serving(health)
        ports.put(port)
        while not measure.is_set():
            await asyncio.sleep(0.01)
        timings.measuring, cpu = True, time.process_time()
        while not stop.is_set():
            await asyncio.sleep(0.01)
        timings.measuring, cpu = False, time.process_time() - cpu
        await server.stop(grace=None)
        calls = len(timings.seconds)
        results.put(([int(s * 1e9) for s in timings.seconds], cpu / max(1, calls)))

    asyncio.run(serve())


def _client(core: int, port: int, seconds: float, concurrency: int, seed: int, go: Any, done: Any) -> None:
    pin(core)
    regions = sorted({r for pair in regions_rtt() for r in pair})
    done.put(asyncio.run(_drive(port, regions, seconds, concurrency, seed + core, go)))


async def _drive(
    port: int, regions: list[str], seconds: float, concurrency: int, seed: int, go: Any
) -> tuple[int, float]:
    import grpc

    from suanli.api.routing.v1 import routing_pb2 as pb
    from suanli.api.routing.v1 import routing_pb2_grpc as pb_grpc

    kinds = {"training": pb.WORKLOAD_KIND_TRAINING, "inference": pb.WORKLOAD_KIND_INFERENCE}
    requests = [
        pb.ResolveRequest(
            kind=kinds[q.kind],
            from_region=q.from_region,
            max_rtt_ms=q.max_rtt_ms,
            min_bandwidth_gbps=q.min_bandwidth_gbps,
            gpu_models=list(q.gpu_models),
            cu=q.cu,
            max_price_per_hour=q.max_price_per_hour,
            limit=q.limit,
        )
        for q in queries(regions, 4096, seed)
    ]
    done = 0
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.RoutingStub(channel)
        for r in requests[:256]:
            await stub.Resolve(r)  # warm: the connection and the server's caches
        while not go.is_set():
            await asyncio.sleep(0.001)
        end = time.perf_counter() + seconds

        async def worker(offset: int) -> None:
            nonlocal done
            i = offset
            while time.perf_counter() < end:
                await stub.Resolve(requests[i % len(requests)])
                done += 1
                i += concurrency

        start = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
        elapsed = time.perf_counter() - start
    return done, elapsed


def through_grpc(
    sites: int, seconds: float, clients: int, concurrency: int, seed: int
) -> tuple[Figures, float]:
    """The clients' figures and the server's CPU seconds per call."""
    ctx = mp.get_context("spawn")
    ports, results, done = ctx.Queue(), ctx.Queue(), ctx.Queue()
    measure, stop, go = ctx.Event(), ctx.Event(), ctx.Event()
    server = ctx.Process(target=_server, args=(sites, seed, ports, results, measure, stop), daemon=True)
    server.start()
    drivers = []
    try:
        port = ports.get(timeout=120)
        cores = os.cpu_count() or 1
        drivers = [
            ctx.Process(
                target=_client,
                args=(1 + k % max(1, cores - 1), port, seconds, concurrency, seed, go, done),
                daemon=True,
            )
            for k in range(clients)
        ]
        for d in drivers:
            d.start()
        time.sleep(2.0 + 0.5 * clients)  # the clients start, connect and warm up
        measure.set()
        go.set()
        answered = [done.get(timeout=seconds + 120) for _ in drivers]
        stop.set()
        ns, cpu_per_call = results.get(timeout=60)
    finally:
        stop.set()
        for d in drivers:
            d.join(timeout=30)
        server.join(timeout=30)
    rate = sum(n for n, _ in answered) / max(elapsed for _, elapsed in answered)
    p50, p99 = percentiles(ns)
    name = f"gRPC Resolve (server p50/p99; {clients} client(s) x {concurrency} in flight)"
    return Figures(name, rate, p50, p99, len(ns)), cpu_per_call


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each measurement")
    parser.add_argument("--sites", type=int, default=1000, help="sites (one pool each) over the 10 regions")
    parser.add_argument(
        "--clients", type=int, default=None, help="gRPC client processes (default: one per spare core, 1-2)"
    )
    parser.add_argument("--concurrency", type=int, default=16, help="gRPC calls in flight per client")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 s each, one client")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.clients = 1.0, 1
    if args.clients is None:
        args.clients = max(1, min(2, (os.cpu_count() or 1) - 1))
    print(
        f"routing bench: {len(regions_rtt())} region pairs, {args.sites} sites, {args.seconds:g} s each; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.1f}, "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    print(in_process(args.sites, args.seconds, args.seed).line(), flush=True)
    median, worst = rebuild_ms(args.sites, args.seed)
    print(f"{'table rebuild (a view changed)':<28} {median:10.2f} ms median, {worst:.2f} ms max", flush=True)
    figures, cpu_per_call = through_grpc(args.sites, args.seconds, args.clients, args.concurrency, args.seed)
    print(figures.line())
    print(
        f"{'gRPC server CPU per Resolve':<28} {cpu_per_call * 1e6:10.1f} us  "
        f"(one server core answers at most {1 / cpu_per_call:,.0f}/s)"
    )


if __name__ == "__main__":
    main()
