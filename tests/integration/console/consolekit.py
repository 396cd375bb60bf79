"""Kit of the console tests: a scheduler with a small two-region fleet, the console in front of it,
an HTTP client that logs in as a browser would, and a reader of the console's event stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from scheduling.helpers import capacity, config, publish, started, task_spec, until

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.console.gateway import Targets
from suanli.console.server import RunningConsole, start_console

QUEUES = """
priority_classes: {high: 100, low: 0}
queues:
  - {name: acme, quotas: {gpu:A100: 8000, gpu:H200: 2000, cpu: 256000}}
  - {name: acme/vision, quotas: {gpu:A100: 4000, cpu: 128000}}
  - {name: globex, quotas: {gpu:A100: 4000, cpu: 128000}}
"""
# node -> (region, GPU model, GPUs): the heat map gets two regions and two models.
NODES = {"e1": ("cn-east", "A100", 4), "e2": ("cn-east", "H200", 2), "w1": ("cn-west", "A100", 4)}
# Short, so a change reaches the stream quickly; the tests wait on outcomes with deadlines, not on it.
REFRESH_S = 0.3


@dataclass(frozen=True)
class Fleet:
    api: pb_grpc.SchedulerStub
    address: str
    bootstrap: str
    prefix: str

    async def submit(self, name: str, queue: str = "acme", gpus: int = 1, model: str = "A100") -> pb.Job:
        task = task_spec(gpu_count=gpus)
        task.resources.gpu_models.append(model)
        spec = pb.JobSpec(name=name, queue=queue, kind=pb.JOB_KIND_TRAINING, tasks=[task])
        answer = await self.api.SubmitJob(pb.SubmitJobRequest(spec=spec, request_id=secrets.token_hex(8)))
        return answer.job


@contextlib.asynccontextmanager
async def fleet(pg_dsn: str, bootstrap: str, tmp: Path) -> AsyncIterator[Fleet]:
    prefix = f"t-console-{secrets.token_hex(3)}"
    service = await started(config(pg_dsn, bootstrap, prefix, tmp, queues_yaml=QUEUES))
    address = f"127.0.0.1:{service.port}"
    try:
        async with _channel(address) as api:
            for node, (region, model, gpus) in NODES.items():
                record = capacity(node, gpus=gpus, model=model, region=region)
                await publish(bootstrap, prefix, "capacity.nodes", node, "NodeCapacityChanged", record)

            async def seen() -> bool:
                return len((await api.ListNodes(pb.ListNodesRequest())).nodes) == len(NODES)

            await until(seen, what="capacity view")
            yield Fleet(api, address, bootstrap, prefix)
    finally:
        await service.stop()


@contextlib.asynccontextmanager
async def _channel(address: str) -> AsyncIterator[pb_grpc.SchedulerStub]:
    import grpc

    async with grpc.aio.insecure_channel(address) as channel:
        yield pb_grpc.SchedulerStub(channel)


@contextlib.asynccontextmanager
async def console(targets: Targets, token: str = "") -> AsyncIterator[RunningConsole]:
    running = await start_console(targets, token, None, "127.0.0.1:0", REFRESH_S)
    try:
        yield running
    finally:
        await running.stop()


def client() -> aiohttp.ClientSession:
    # unsafe=True: the console is at 127.0.0.1, and aiohttp's jar keeps no cookie of a bare IP otherwise.
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def log_in(session: aiohttp.ClientSession, running: RunningConsole, token: str | None = None) -> None:
    form = {"token": running.login_key if token is None else token, "next": "/"}
    async with session.post(f"{running.url}login", data=form, allow_redirects=False) as response:
        assert response.status == 303, await response.text()
        assert "HttpOnly" in response.headers["Set-Cookie"]
        assert "SameSite=Strict" in response.headers["Set-Cookie"]


class Stream:
    """The console's event stream of one page, read event by event."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next_update(self) -> dict[str, Any]:
        """The fragments of the next `update` event (comment lines and other fields skipped)."""
        name, data = "", []
        while True:
            raw = await self.response.content.readline()
            if not raw:
                raise EOFError("the event stream ended")
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                data.append(line.removeprefix("data: "))
            elif not line:
                if name == "update":
                    return dict(json.loads("\n".join(data)))
                name, data = "", []

    async def until(self, check: Any, timeout: float = 20.0) -> dict[str, Any]:
        """The first update for which ``check(fragments)`` holds."""
        async with asyncio.timeout(timeout):
            while True:
                update = await self.next_update()
                if check(update):
                    return update
