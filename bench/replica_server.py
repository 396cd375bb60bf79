"""How closely a simulated replica's HTTP answers follow its model: wall time minus the model's latency.

    .venv/bin/python bench/replica_server.py [--clients 16] [--requests 25] [--seed 7]

One `suanli.replica.server.ReplicaServer` (llama-2-7b on a whole A100 80GB SXM, batch 16) on a local port;
`--clients` concurrent clients each send `--requests` requests one after another (context 100-2000 and
20-200 generated tokens, drawn from the seed). Prints the wall time, the request rate and the overhead (the
client's wall time of a request minus the `latency_s` the model gave it): timers, HTTP and the event loop.
Figures: docs/BENCHMARKS.md, "Simulated replica server".
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

import aiohttp

from suanli.clock import SystemClock
from suanli.contracts.load import ReplicaLoad
from suanli.replica.live import ReplicaIdentity
from suanli.replica.models import MODELS
from suanli.replica.server import ReplicaServer
from suanli.replica.service_time import replica_speed
from suanli.resources import default_catalogue


def ask(rng: random.Random) -> dict[str, Any]:
    return {"context_tokens": rng.randint(100, 2000), "max_tokens": rng.randint(20, 200)}


async def run(clients: int, requests: int, seed: int) -> None:
    speed = replica_speed(MODELS["llama-2-7b"], default_catalogue().lookup("A100 80GB SXM"), 1.0, 16)

    async def ignore(load: ReplicaLoad) -> None:
        return None

    server = ReplicaServer(
        ReplicaIdentity("bench", "bench-r1", "local"),
        speed,
        interval_s=1.0,
        on_report=ignore,
        clock=SystemClock(),
    )
    address = await server.start()
    rng = random.Random(seed)
    overhead: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:

        async def client() -> None:
            for _ in range(requests):
                started = time.monotonic()
                async with http.post(f"http://{address}/generate", json=ask(rng)) as answer:
                    body = await answer.json()
                overhead.append(time.monotonic() - started - body["latency_s"])

        began = time.monotonic()
        await asyncio.gather(*(client() for _ in range(clients)))
        wall = time.monotonic() - began
    await server.stop()
    overhead.sort()
    total = clients * requests
    p99 = overhead[min(len(overhead) - 1, int(0.99 * len(overhead)))]
    print(
        f"{total} requests, {clients} clients: {wall:.1f} s wall, {total / wall:.1f} req/s; overhead "
        f"median {statistics.median(overhead) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=25)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(run(args.clients, args.requests, args.seed))


if __name__ == "__main__":
    main()
