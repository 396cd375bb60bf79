"""Gateway benchmark (not a test): what `suanli gateway` adds to a request, and requests/s on one core.

The scene, all on this machine: a Tansu broker, the real routing service (in this process) with its load
view fed from `services.load` (a ReplicaLoadReported for the backend every few seconds, as a replica
reports), a backend replica that answers POST /generate at once (a minimal aiohttp handler in its own
process), and `suanli gateway` as a process pinned to core 0 (`taskset -c 0`, else sched_setaffinity).
A client process (pinned to the last core) sends the same request body either straight to the backend or
through the gateway:

- added latency: one request at a time (`--sequential` of each), p50/p99 through the gateway minus the
  same percentile straight to the backend: the gateway's own resolve (a ResolveReplica call to routing) and
  forward;
- requests/s: `--concurrency` requests in flight for `--seconds` through the gateway; the gateway's CPU
  time per request (its process's utime + stime over the run, from /proc) gives what one core can answer,
  1 / (CPU s per request), whatever else shares the machine; the client's answered rate is reported beside.

    .venv/bin/python bench/inference.py              # the recorded run
    .venv/bin/python bench/inference.py --quick      # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

SERVICE = "bench-chat"
REGION = "bench-east"
BODY = {"context_tokens": 1000, "max_tokens": 200}
CTX = mp.get_context("spawn")  # no fork() of a process whose gRPC threads are running


def _pin(core: int) -> None:
    cores = os.cpu_count() or 1
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(core, cores - 1)})


def _backend(port: Any, ready: Any) -> None:
    """The replica: answers POST /generate at once with what a replica reports."""
    from aiohttp import web

    _pin(os.cpu_count() or 1)

    async def generate(request: web.Request) -> web.Response:
        asked = await request.json()
        return web.json_response({"generated_tokens": asked.get("max_tokens", 1), "ttft_s": 0.0})

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/generate", generate)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port.value = runner.addresses[0][1]
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(serve())


async def _requests(url: str, count: int, concurrency: int, seconds: float | None) -> tuple[list[float], int]:
    """Latencies of `count` requests (or as many as `seconds` allow) with `concurrency` in flight."""
    import aiohttp

    latencies: list[float] = []
    failed = 0
    deadline = time.perf_counter() + seconds if seconds else None
    sent = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:

        async def worker() -> None:
            nonlocal sent, failed
            while (deadline is None and sent < count) or (
                deadline is not None and time.perf_counter() < deadline
            ):
                sent += 1
                started = time.perf_counter()
                async with http.post(url, json=BODY) as answer:
                    await answer.read()
                    if answer.status != 200:
                        failed += 1
                        continue
                latencies.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, failed


def _client(url: str, count: int, concurrency: int, seconds: float | None, out: Any) -> None:
    _pin(os.cpu_count() or 1)
    started = time.perf_counter()
    latencies, failed = asyncio.run(_requests(url, count, concurrency, seconds))
    out.put((latencies, failed, time.perf_counter() - started))


def measure(url: str, count: int, concurrency: int = 1, seconds: float | None = None) -> dict[str, float]:
    out: Any = CTX.Queue()
    process = CTX.Process(target=_client, args=(url, count, concurrency, seconds, out))
    process.start()
    latencies, failed, wall = out.get()
    process.join()
    latencies.sort()
    return {
        "requests": len(latencies),
        "failed": failed,
        "per_s": len(latencies) / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _report_load(bootstrap: str, prefix: str, address: str, stop: asyncio.Event) -> None:
    from suanli.bus import EventPublisher
    from suanli.bus.topics import topic_name
    from suanli.routing.testing import replica_load

    async with EventPublisher(bootstrap) as bus:
        while not stop.is_set():
            record = replica_load(
                SERVICE, f"{SERVICE}-r1", REGION, time.time_ns() // 1_000_000, address=address
            )
            await bus.publish(topic_name("services.load", prefix), SERVICE, "ReplicaLoadReported", record)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 5.0)


def _gateway(routing: str, listen: str, home: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "suanli.cli.main", "gateway", "--region", REGION, "--listen", listen]
    argv += ["--routing", routing, "--policy", "least-outstanding"]
    if shutil.which("taskset"):
        argv = ["taskset", "-c", "0", *argv]
    env = {**os.environ, "SUANLI_CONFIG": str(home / "config.yaml")}  # no context: no token, plaintext
    env.pop("SUANLI_METRICS_PORT", None)
    log = (home / "gateway.log").open("wb")
    return subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_gateway_affinity)


def _gateway_affinity() -> None:
    if not shutil.which("taskset"):
        _pin(0)


async def run(args: argparse.Namespace, bootstrap: str, home: Path) -> dict[str, Any]:
    import aiohttp

    from suanli.bus import ensure_topics
    from suanli.bus.topics import CATALOGUE
    from suanli.infra.net import free_loopback_port
    from suanli.routing.bootstrap import routing_api
    from suanli.routing.entrypoints.settings import RoutingSettings

    prefix = f"bench-gw-{uuid.uuid4().hex[:6]}"
    await ensure_topics(bootstrap, CATALOGUE, prefix=prefix)
    api = routing_api(
        RoutingSettings.load({}, bootstrap=bootstrap, topic_prefix=prefix, listen="127.0.0.1:0")
    )
    await api.start()
    port, ready = CTX.Value("i", 0), CTX.Event()
    backend = CTX.Process(target=_backend, args=(port, ready), daemon=True)
    backend.start()
    ready.wait(30)
    address = f"127.0.0.1:{port.value}"
    stop = asyncio.Event()
    reports = asyncio.create_task(_report_load(bootstrap, prefix, address, stop))
    listen = f"127.0.0.1:{free_loopback_port()}"
    gateway = _gateway(f"127.0.0.1:{api.port}", listen, home)
    through = f"http://{listen}/v1/services/{SERVICE}/generate"
    try:
        async with aiohttp.ClientSession() as http:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # the gateway listening and routing knowing the replica
                try:
                    async with http.post(through, json=BODY) as answer:
                        if answer.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
            else:
                raise RuntimeError(f"the gateway never answered 200 (log: {home / 'gateway.log'})")
        direct = await asyncio.to_thread(measure, f"http://{address}/generate", args.sequential)
        via = await asyncio.to_thread(measure, through, args.sequential)
        before = cpu_s(gateway.pid)
        load = await asyncio.to_thread(measure, through, 0, args.concurrency, args.seconds)
        used = cpu_s(gateway.pid) - before
    finally:
        gateway.terminate()
        gateway.wait(10)
        stop.set()
        await reports
        backend.terminate()
        await api.stop()
    return {"direct": direct, "via": via, "load": load, "cpu_per_request_ms": 1000 * used / load["requests"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sequential", type=int, default=2000, help="requests one at a time, each way")
    parser.add_argument("--concurrency", type=int, default=32, help="in flight for the requests/s run")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the requests/s run")
    parser.add_argument("--quick", action="store_true", help="200 sequential, 2 s under load")
    parser.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    args = parser.parse_args(argv)
    if args.quick:
        args.sequential, args.seconds = 200, 2.0
    from suanli.infra.broker import BrokerProcess

    home = Path(tempfile.mkdtemp(prefix="suanli-bench-gw-"))
    broker = None if args.bootstrap else BrokerProcess(log_path=home / "tansu.log")
    bootstrap = args.bootstrap or broker.start()  # type: ignore[union-attr]
    try:
        r = asyncio.run(run(args, bootstrap, home))
    finally:
        if broker is not None:
            broker.stop()
    d, v, load = r["direct"], r["via"], r["load"]
    print(
        f"gateway: {os.cpu_count()} cores, gateway pinned to core 0, "
        f"{platform.python_implementation()} {platform.python_version()}, {time.strftime('%Y-%m-%d')}"
    )
    print(f"  direct to the backend, one at a time   p50 {d['p50_ms']:.2f} ms  p99 {d['p99_ms']:.2f} ms")
    print(f"  through the gateway, one at a time     p50 {v['p50_ms']:.2f} ms  p99 {v['p99_ms']:.2f} ms")
    print(
        f"  added by the gateway                   p50 {v['p50_ms'] - d['p50_ms']:.2f} ms  "
        f"p99 {v['p99_ms'] - d['p99_ms']:.2f} ms"
    )
    per_core = 1000 / r["cpu_per_request_ms"]
    print(
        f"  {args.concurrency} in flight for {args.seconds:g} s: {load['per_s']:,.0f} requests/s answered "
        f"(p50 {load['p50_ms']:.1f} ms, p99 {load['p99_ms']:.1f} ms, {load['failed']} failed); gateway CPU "
        f"{r['cpu_per_request_ms']:.3f} ms per request: {per_core:,.0f} requests/s on one core"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
