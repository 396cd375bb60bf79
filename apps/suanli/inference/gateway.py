"""`suanli gateway`: a small HTTP request gateway in front of an inference service's replicas.

``POST /v1/services/{service_id}/generate`` asks routing's ``ResolveReplica`` for the replica to use (by
the gateway's policy, from the gateway's region), forwards the JSON body as is to
``http://{address}/generate`` and returns the replica's answer, with ``X-Suanli-Replica``,
``X-Suanli-Region`` and ``X-Suanli-Policy`` naming the choice. A replica that cannot be reached is
excluded and the request resolved once more (the next choice); a second failure answers 502. A replica
that refuses a request at once as overloaded (503 with ``Retry-After``) is excluded the same way for that
request only: another replica may have room, and the replica is alive. A 503 without ``Retry-After`` (a
request that waited out the replica's queue timeout) is the answer: its time is spent. The gateway
remembers an unreachable replica for ``exclude_s`` and leaves it out of every resolution meanwhile, so a
killed replica costs one failover, not one per request until routing's view forgets it (three missed
load reports); should every fresh replica be remembered so, they are tried after all. No fresh
replica answers 503 with routing's reason, an unknown service 404. The body's ``context_tokens`` and
``max_tokens``, when it has them, feed network-aware's latency estimate. Every answer is counted by status
code with its latency (``suanli_gateway_*``, served on ``SUANLI_METRICS_PORT`` when set); ``GET /healthz``
answers 200 once it listens. Every failover and every answer that is not the replica's own is logged
with its reason (the run's evidence). Docs: docs/inference.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import aiohttp
import grpc
import typer
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from opentelemetry import metrics

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.api.routing.v1 import routing_pb2_grpc
from suanli.cli import config, network
from suanli.cli.client import EXIT_UNREACHABLE, EXIT_USAGE, Failure, fail
from suanli.client.channel import aio_bearer_channel
from suanli.console.server import split_listen
from suanli.routing.domain.balancing import BALANCERS
from suanli.telemetry.names import GATEWAY_LATENCY, GATEWAY_REQUESTS, described

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:8090"
DEFAULT_POLICY = "network-aware"
TRIES = 2  # the first choice, then the next one
RESOLVE_TIMEOUT_S = 5.0
FORWARD_TIMEOUT_S = 300.0  # a generation can take minutes; a dead replica fails at connect, not here
# Opening a socket to a replica, and only that: aiohttp's `connect` timeout also counts the wait for a
# free connection of the pool, and under load (more generations open than the pool holds) that wait
# made live replicas look unreachable: 502s, and healthy replicas left out for `exclude_s`.
CONNECT_TIMEOUT_S = 5.0
# Connections open to replicas at once: a generation holds one for its whole length (tens of seconds),
# so this bounds the requests in flight through one gateway; beyond it requests wait for a free one.
DEFAULT_MAX_CONNECTIONS = 1024
HEALTH_PATH = "/healthz"
RETRY_AFTER = "Retry-After"  # on a replica's 503: refused at once, so another replica may take it
# Longer than routing takes to forget a replica that stopped reporting (3 intervals of 1 s in the demo).
DEFAULT_EXCLUDE_S = 10.0


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    region: str
    policy: str
    exclude_s: float = DEFAULT_EXCLUDE_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    connect_timeout_s: float = CONNECT_TIMEOUT_S


class Unreachable:
    """Replicas this gateway could not reach lately, per service, each remembered for ``ttl_s``."""

    def __init__(self, ttl_s: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self._monotonic = monotonic
        self._until: dict[tuple[str, str], float] = {}

    def add(self, service_id: str, replica_id: str) -> None:
        self._until[(service_id, replica_id)] = self._monotonic() + self.ttl_s

    def of(self, service_id: str) -> list[str]:
        """The replicas of ``service_id`` still remembered (the expired are forgotten on the way)."""
        now = self._monotonic()
        for key in [k for k, until in self._until.items() if until <= now]:
            del self._until[key]
        return sorted(r for s, r in self._until if s == service_id)


def _tokens(body: bytes) -> tuple[int, int]:
    """(context, generated) tokens named in a JSON body, 0 where it does not say."""
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        return 0, 0
    if not isinstance(doc, dict):
        return 0, 0

    def count(name: str) -> int:
        value = doc.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    return count("context_tokens"), count("max_tokens")


def _error(status: int, message: str, **extra: str) -> web.Response:
    return web.json_response({"error": message, **extra}, status=status)


class Gateway:
    """The request handler: resolve, forward, fail over once."""

    def __init__(
        self, routing: routing_pb2_grpc.RoutingStub, session: aiohttp.ClientSession, cfg: GatewayConfig
    ) -> None:
        self.routing = routing
        self.session = session
        self.cfg = cfg
        self.unreachable = Unreachable(cfg.exclude_s)

    async def generate(self, request: web.Request) -> web.Response:
        service_id = request.match_info["service_id"]
        body = await request.read()
        context_tokens, generated_tokens = _tokens(body)
        failed: list[str] = []
        remembered = self.unreachable.of(service_id)
        overloaded: web.Response | None = None  # a replica's refusal, the answer unless another serves
        tries = 0
        while tries < TRIES:
            ask = pb.ResolveReplicaRequest(
                service_id=service_id,
                client_region=self.cfg.region,
                policy=self.cfg.policy,
                context_tokens=context_tokens,
                generated_tokens=generated_tokens,
                # The replica id leads each line of `failed`.
                exclude=[*remembered, *(f.split(" ", 1)[0] for f in failed)],
            )
            try:
                answer = await self.routing.ResolveReplica(ask, timeout=RESOLVE_TIMEOUT_S)
            except grpc.aio.AioRpcError as exc:
                if remembered and exc.code() is grpc.StatusCode.FAILED_PRECONDITION:
                    remembered = []  # only replicas unreachable lately are left: try them after all
                    continue
                return overloaded or self._refused(service_id, exc, failed)
            tries += 1
            replica = answer.replica
            try:
                forwarded = await self._forward(replica, answer.policy, body, request.content_type)
            except (OSError, TimeoutError, aiohttp.ClientError) as exc:
                reason = str(exc) or type(exc).__name__
                failed.append(f"{replica.replica_id} ({replica.address or 'no address'}: {reason})")
                self.unreachable.add(service_id, replica.replica_id)
                log.warning("%s: %s unreachable (try %d): %s", service_id, replica.replica_id, tries, reason)
                continue
            if forwarded.status != 503 or RETRY_AFTER not in forwarded.headers:
                return forwarded
            # Overloaded: alive, so not remembered, but another replica may have room for this request.
            overloaded = forwarded
            failed.append(f"{replica.replica_id} (overloaded: {_overloaded(forwarded)})")
            log.warning("%s: %s refused (try %d): %s", service_id, replica.replica_id, tries, failed[-1])
        if overloaded is not None:
            return overloaded
        log.warning("%s: 502: %s", service_id, "; ".join(failed))
        return _error(502, f"replicas unreachable: {'; '.join(failed)}")

    async def _forward(self, replica: Any, policy: str, body: bytes, content_type: str) -> web.Response:
        if not replica.address:
            raise OSError("a simulated replica takes no requests")
        async with self.session.post(
            f"http://{replica.address}/generate", data=body, headers={"Content-Type": content_type}
        ) as answer:
            payload = await answer.read()
            headers = {
                "X-Suanli-Replica": replica.replica_id,
                "X-Suanli-Region": replica.region,
                "X-Suanli-Policy": policy,
            }
            if RETRY_AFTER in answer.headers:
                headers[RETRY_AFTER] = answer.headers[RETRY_AFTER]
            return web.Response(
                body=payload, status=answer.status, content_type=answer.content_type, headers=headers
            )

    def _refused(self, service_id: str, exc: Any, failed: list[str]) -> web.Response:
        code, details = exc.code(), exc.details() or ""
        log.warning("%s: routing refused: %s: %s", service_id, code.name, details)
        if failed:
            # The retry found nothing else: the replica's failure is the answer, routing's reason beside it.
            return _error(502, f"replica unreachable: {'; '.join(failed)}", routing=details)
        if code is grpc.StatusCode.NOT_FOUND:
            return _error(404, details)
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            return _error(400, details)
        if code is grpc.StatusCode.FAILED_PRECONDITION:
            return _error(503, details)
        return _error(503, f"routing: {code.name}: {details}")


def _overloaded(answer: web.Response) -> str:
    """The reason a replica's 503 gives (its JSON `error`), or the status alone."""
    try:
        doc = json.loads(answer.body) if isinstance(answer.body, bytes) else None
    except ValueError:
        doc = None
    return str(doc["error"]) if isinstance(doc, dict) and "error" in doc else "503"


def counted(meter: metrics.Meter) -> Middleware:
    """A middleware counting every generate answer by status code, with its latency."""
    requests = meter.create_counter(GATEWAY_REQUESTS, **described(GATEWAY_REQUESTS))
    latency = meter.create_histogram(GATEWAY_LATENCY, **described(GATEWAY_LATENCY))

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path == HEALTH_PATH:
            return await handler(request)
        started = time.perf_counter()
        code = 500
        try:
            answer = await handler(request)
            code = answer.status
            return answer
        except web.HTTPException as exc:  # aiohttp's own answers: 404 no such path, 405 a GET
            code = exc.status
            raise
        finally:
            labels = {"code": str(code)}
            requests.add(1, labels)
            latency.record(time.perf_counter() - started, labels)

    return middleware


async def _healthy(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def application(gateway: Gateway) -> web.Application:
    app = web.Application(middlewares=[counted(metrics.get_meter("suanli.gateway"))])
    app.router.add_post("/v1/services/{service_id}/generate", gateway.generate)
    app.router.add_get(HEALTH_PATH, _healthy)
    return app


@dataclass
class RunningGateway:
    url: str
    runner: web.AppRunner
    session: aiohttp.ClientSession
    channel: Any

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.session.close()
        await self.channel.close()


async def start_gateway(
    listen: str, routing: str, cfg: GatewayConfig, token: str = "", ca_pem: bytes | None = None
) -> RunningGateway:
    """Listen on ``listen`` (port 0 picks one) and resolve through routing at ``routing``."""
    host, port = split_listen(listen)
    channel = aio_bearer_channel(routing, token, ca_pem)
    timeout = aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S, sock_connect=cfg.connect_timeout_s)
    connector = aiohttp.TCPConnector(limit=cfg.max_connections)
    session = aiohttp.ClientSession(timeout=timeout, connector=connector)
    runner = web.AppRunner(application(Gateway(routing_pb2_grpc.RoutingStub(channel), session, cfg)))
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError:
        await RunningGateway("", runner, session, channel).stop()
        raise
    bound = runner.addresses[0][1]  # the port picked when `listen` asked for 0
    return RunningGateway(f"http://{host}:{bound}", runner, session, channel)


def gateway(
    region: Annotated[
        str, typer.Option("--region", metavar="REGION", help="The clients' region: the origin of every RTT.")
    ],
    listen: Annotated[
        str, typer.Option("--listen", metavar="HOST:PORT", help="Where the gateway takes HTTP requests.")
    ] = DEFAULT_LISTEN,
    routing: network.Addr = network.DEFAULT_ADDR,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            metavar="POLICY",
            help="round-robin, least-outstanding, power-of-two or network-aware.",
        ),
    ] = DEFAULT_POLICY,
) -> None:
    """Serve an HTTP request gateway: resolve an inference replica through routing and forward to it.

    POST /v1/services/SERVICE/generate goes to the replica routing chooses; one retry on the next choice.
    It calls routing with the context's token, which needs the `service` (or `platform-admin`) role.
    """
    try:
        split_listen(listen)
        if policy not in BALANCERS:
            raise ValueError(f"--policy {policy!r}: one of {', '.join(BALANCERS)}")
        address = config.server("routing", routing, network.BUILTIN_ADDR)
        token, ca_pem = config.token(), config.ca()
    except (config.ConfigError, ValueError) as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    # Failovers and refusals go to stderr with their time: what a run's gateway.log shows.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_serve(listen, address, GatewayConfig(region, policy), token, ca_pem))
    except OSError as exc:
        raise fail(Failure(f"cannot listen on {listen}: {exc.strerror or exc}", EXIT_UNREACHABLE)) from None


async def _serve(listen: str, routing: str, cfg: GatewayConfig, token: str, ca_pem: bytes | None) -> None:
    from suanli.telemetry import METRICS_PORT_ENV, setup

    # /metrics only when asked for (`suanli up` gives each process a port); set up before the app
    # fetches its meter, which is then bound to the exporting provider.
    telemetry = setup("gateway") if os.environ.get(METRICS_PORT_ENV, "").strip() else None
    try:
        await _listen(listen, routing, cfg, token, ca_pem)
    finally:
        if telemetry is not None:
            telemetry.shutdown()


async def _listen(listen: str, routing: str, cfg: GatewayConfig, token: str, ca_pem: bytes | None) -> None:
    running = await start_gateway(listen, routing, cfg, token, ca_pem)
    typer.echo(f"Suanli gateway at {running.url} (routing {routing}, region {cfg.region}, {cfg.policy})")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await running.stop()
