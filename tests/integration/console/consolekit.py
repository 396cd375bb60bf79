"""Kit of the console tests: a scheduler with a small two-region fleet (alone, or with billing, routing
and serving holding real data), the console in front of it, an HTTP client that logs in as a browser
would, and a reader of the console's event stream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import grpc
from auth.authkit import companions, region_link
from scheduling.helpers import capacity, config, envelope, publish, started, task_spec, until

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.billing.v1 import billing_pb2_grpc as bpb_grpc
from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.routing.v1 import routing_pb2_grpc as rpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.api.serving.v1 import serving_pb2 as spb
from suanli.api.serving.v1 import serving_pb2_grpc as spb_grpc
from suanli.console.gateway import Targets
from suanli.console.server import RunningConsole, start_console
from suanli.contracts import default_registry, sample_records

QUEUES = """
priority_classes: {high: 100, low: 0, serving: 500}
queues:
  - {name: acme, quotas: {gpu:A100: 8000, gpu:H200: 2000, cpu: 256000}}
  - {name: acme/vision, quotas: {gpu:A100: 4000, cpu: 128000}}
  - {name: globex, quotas: {gpu:A100: 4000, cpu: 128000}}
"""
# node -> (region, GPU model, GPUs): the heat map gets two regions and two models.
NODES = {"e1": ("cn-east", "A100", 4), "e2": ("cn-east", "H200", 2), "w1": ("cn-west", "A100", 4)}
# One replica on half an A100: the Services page has a service with a placed replica.
SERVICE = """
name: chat
queue: acme
model: llama-2-7b
resources: {gpu: 0.5, gpu_models: [A100], cpu: "2", memory: 8Gi}
command: python -m server
min_replicas: 1
max_replicas: 2
target: {concurrency: 8}
"""
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


def _prefix() -> str:
    return f"t-console-{secrets.token_hex(3)}"


@contextlib.asynccontextmanager
async def fleet(pg_dsn: str, bootstrap: str, tmp: Path, prefix: str = "") -> AsyncIterator[Fleet]:
    prefix = prefix or _prefix()
    service = await started(config(pg_dsn, bootstrap, prefix, tmp, queues_yaml=QUEUES))
    address = f"127.0.0.1:{service.port}"
    try:
        async with scheduler_stub(address) as api:
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
async def scheduler_stub(address: str) -> AsyncIterator[pb_grpc.SchedulerStub]:
    async with grpc.aio.insecure_channel(address) as channel:
        yield pb_grpc.SchedulerStub(channel)


def _usage(job: pb.Job, node: str, seconds: int) -> dict[str, Any]:
    """A UsageMetered record: ``job``'s task on ``node``, one H200 for the ``seconds`` up to now."""
    end = datetime.now(UTC)
    return {
        **sample_records(default_registry().current("UsageMetered"))[0],
        **envelope(job.id),
        "task_id": f"{job.id}/0",
        "job_id": job.id,
        "tenant": job.spec.queue.split("/")[0],
        "queue": job.spec.queue,
        "node_id": node,
        "window_start": end - timedelta(seconds=seconds),
        "window_end": end,
        "cu_seconds": {"h200": float(seconds)},
        "gpu_milli_seconds": 1000 * seconds,
        "cpu_milli_seconds": 0,
        "attempt": 1,
        "efficiency": None,
    }


@contextlib.asynccontextmanager
async def platform(pg_dsn: str, bootstrap: str, tmp: Path) -> AsyncIterator[tuple[Fleet, Targets]]:
    """The fleet's scheduler with billing, routing and serving on its topics, each holding something
    to show: a measured path cn-east -> cn-west, a job of acme billed for an hour of H200, and an
    inference service with its replica placed. No authentication (tests/integration/console/
    test_console_auth.py has it)."""
    prefix = _prefix()
    async with contextlib.AsyncExitStack() as stack:
        # The scheduler and the others side by side: none needs another to start.
        f, addresses = await asyncio.gather(
            stack.enter_async_context(fleet(pg_dsn, bootstrap, tmp, prefix)),
            companions(stack, pg_dsn, bootstrap, prefix),
        )
        targets = Targets(f.address, addresses.billing, addresses.routing, addresses.serving)
        link = region_link("cn-east", "cn-west")
        await publish(bootstrap, f.prefix, "network.links", link["link_id"], "NetworkLinkChanged", link)
        billed = await f.submit("billed", model="H200")
        usage = _usage(billed, "e2", 3600)
        await publish(bootstrap, f.prefix, "usage.metered", usage["task_id"], "UsageMetered", usage)
        channels = [grpc.aio.insecure_channel(a) for a in (targets.routing, targets.billing, targets.serving)]
        for channel in channels:
            stack.push_async_callback(channel.close)
        routing, billing, serving = channels
        await spb_grpc.ServingStub(serving).CreateService(spb.CreateServiceRequest(spec=SERVICE))

        async def measured() -> bool:
            matrix = await rpb_grpc.RoutingStub(routing).GetNetwork(rpb.GetNetworkRequest())
            return bool(matrix.region_links)

        async def charged() -> bool:
            try:
                answer = await bpb_grpc.BillingStub(billing).GetUsage(bpb.GetUsageRequest(tenant="acme"))
            except grpc.aio.AioRpcError as exc:
                if exc.code() is grpc.StatusCode.NOT_FOUND:  # billing has not read the job yet
                    return False
                raise
            return bool(answer.rows)

        async def replica_placed() -> bool:
            answer = await spb_grpc.ServingStub(serving).GetService(
                spb.GetServiceRequest(tenant="acme", name="chat")
            )
            return answer.placed_replicas == 1

        # Together: the three services catch up at the same time, not one after the other.
        await asyncio.gather(
            until(measured, what="routing has the path"),
            until(charged, what="billing has rated the usage"),
            until(replica_placed, what="the replica is placed"),
        )
        yield f, targets


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
