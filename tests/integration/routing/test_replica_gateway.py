"""ResolveReplica, `suanli gateway` and the trace driver on the real broker: routing's load view fed from
services.load.

The last tests run a simulated fleet's replicas (sensing's agents, in process) behind the gateway, and a
real agent's replica: a vLLM-like server process whose load the agent scrapes. The partition's also runs
routing's view processor, which turns the agents' probe rounds into link states.

One Routing API (in process) and one gateway serve the module; each test names its own services. The
replicas are tiny aiohttp servers answering with their own id; their load reports are published by the
test, again on every poll (replicas report periodically, and routing's load consumer reads from the
newest report on).
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import grpc
import numpy as np
import pytest
from aiohttp import web
from aiokafka import AIOKafkaConsumer
from routing_testkit import RoutingProcess

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.api.routing.v1 import routing_pb2_grpc as pb_grpc
from suanli.bus import EventPublisher
from suanli.bus.headers import DLQ_ERROR_MESSAGE
from suanli.bus.topics import topic_name
from suanli.clock import from_ms
from suanli.contracts.load import STALE_INTERVALS, ReplicaLoad
from suanli.contracts.replica_env import MAX_BATCH_ENV, MODEL_ENV, REPLICA_ENV, SERVICE_ID_ENV
from suanli.inference.attainment import DriveStats, SloTarget
from suanli.inference.drive import DriveConfig, Driver
from suanli.inference.gateway import GatewayConfig, RunningGateway, start_gateway
from suanli.resources import default_catalogue
from suanli.routing.bootstrap import routing_api
from suanli.routing.domain.links import REGION, SITE, LinkState, LinkStatus
from suanli.routing.entrypoints.api import RoutingApi
from suanli.routing.entrypoints.settings import RoutingSettings
from suanli.routing.service_layer.records import link_record
from suanli.routing.testing import region_link, replica_load
from suanli.sensing.adapters.bus import BusSink, ensure_agent_topics
from suanli.sensing.bootstrap import RealAgentConfig, build_fleet_host, build_real_agent
from suanli.sensing.domain.fleet import parse_fleet
from suanli.sensing.domain.identity import NodeIdentity
from suanli.sensing.domain.placement import DeviceShare, Placement, StopOrder
from suanli.sensing.entrypoints.runtime import RunSettings, report_loop
from suanli.sensing.service_layer.host import AgentHost
from suanli.serving.domain.trace import Trace

EAST, WEST = "gw-east", "gw-west"
DEADLINE_S = 10.0
TTFT_S = 0.05  # what the test replicas say their first token took


class Replica:
    """An HTTP replica answering POST /generate with its id (after `delay_s`), or 503 with `refuse`:
    "busy" refuses at once (Retry-After), "late" as a request that waited out the queue (none)."""

    def __init__(self, replica_id: str, *, delay_s: float = 0.0, refuse: str = "") -> None:
        self.replica_id = replica_id
        self.delay_s = delay_s
        self.refuse = refuse
        self.runner: web.AppRunner | None = None
        self.address = ""
        self.asked: list[Any] = []

    async def start(self) -> Replica:
        async def generate(request: web.Request) -> web.Response:
            asked = await request.json()
            self.asked.append(asked)
            if self.refuse == "busy":  # as a simulated replica refuses over its KV bound
                return web.json_response({"error": "KV cache full"}, status=503, headers={"Retry-After": "1"})
            if self.refuse == "late":
                return web.json_response({"error": "waited 30.2 s in the queue"}, status=503)
            await asyncio.sleep(self.delay_s)  # a generation's length, as a replica would take it
            # As a simulated replica answers: what it generated and its time to first token.
            reply = {"generated_tokens": asked.get("max_tokens", 1), "ttft_s": TTFT_S}
            return web.json_response({"replica": self.replica_id, "asked": asked, **reply})

        app = web.Application()
        app.router.add_post("/generate", generate)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.address = f"127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None


async def publish(
    bootstrap: str, prefix: str, topic: str, key: str, name: str, record: dict[str, Any]
) -> None:
    async with EventPublisher(bootstrap) as bus:
        await bus.publish(topic_name(topic, prefix), key, name, record)


class Stack:
    def __init__(self, bootstrap: str, prefix: str, api: RoutingApi, gateway: RunningGateway) -> None:
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.api = api
        self.gateway = gateway
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{api.port}")
        self.routing = pb_grpc.RoutingStub(self.channel)

    async def report(
        self,
        service_id: str,
        replica: str,
        region: str,
        address: str = "",
        *,
        in_flight: int = 0,
        queued: int = 0,
        interval_s: float = 60.0,
    ) -> None:
        at = time.time_ns() // 1_000_000
        record = replica_load(
            service_id,
            replica,
            region,
            at,
            address=address,
            in_flight=in_flight,
            queued=queued,
            interval_s=interval_s,
        )
        await publish(self.bootstrap, self.prefix, "services.load", service_id, "ReplicaLoadReported", record)
        await self._read(service_id, replica, from_ms(at), interval_s)

    async def _read(self, service_id: str, replica: str, at: datetime, interval_s: float) -> None:
        """Wait until routing holds the report sampled `at` (or a newer one).

        Routing counts a resolve as a send when it comes after the replica's newest report *it has read*:
        a resolve racing its own report would count sends a later report covers, and the next pick would
        see the replica busier than the test says. A report stale before it is read never shows; the
        wait ends with its freshness.
        """
        deadline = time.monotonic() + min(DEADLINE_S, STALE_INTERVALS * interval_s)
        while time.monotonic() < deadline:
            held = self.api.loads.of(service_id, datetime.now(UTC)).get(replica)
            if held is not None and held.reported_at >= at:
                return
            await asyncio.sleep(0.01)

    async def resolve(self, service_id: str, policy: str, region: str = EAST) -> pb.ResolveReplicaResponse:
        request = pb.ResolveReplicaRequest(
            service_id=service_id,
            client_region=region,
            policy=policy,
            context_tokens=500,
            generated_tokens=50,
        )
        return await self.routing.ResolveReplica(request, timeout=5)


async def until(check: Callable[[], Awaitable[Any]], what: str, *, timeout_s: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = await check()
        except grpc.aio.AioRpcError as exc:
            last = exc
        else:
            if last:
                return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


def link(src: str, dst: str, rtt_ms: float) -> dict[str, Any]:
    return link_record(
        region_link(src, dst, rtt_ms), producer="test", event_id=str(uuid.uuid4()), at=datetime.now(UTC)
    )


@pytest.fixture(scope="module")
async def stack(kafka_bootstrap: str) -> AsyncIterator[Stack]:
    prefix = f"t-gateway-{uuid.uuid4().hex[:6]}"
    for src, dst in ((EAST, WEST), (WEST, EAST)):
        state = link(src, dst, 40.0)
        await publish(kafka_bootstrap, prefix, "network.links", state["link_id"], "NetworkLinkChanged", state)
    settings = RoutingSettings.load({}, bootstrap=kafka_bootstrap, topic_prefix=prefix, listen="127.0.0.1:0")
    api = routing_api(settings)
    await api.start()
    await asyncio.wait_for(api.ready(), DEADLINE_S)  # reports written from now on are read
    await until(lambda: asyncio.sleep(0, len(api.network.region_links()) == 2), "the network view")
    gateway = await start_gateway(
        "127.0.0.1:0", f"127.0.0.1:{api.port}", GatewayConfig(EAST, "least-outstanding")
    )
    s = Stack(kafka_bootstrap, prefix, api, gateway)
    try:
        yield s
    finally:
        await s.channel.close()
        await gateway.stop()
        await api.stop()


async def test_least_outstanding_picks_the_idle_replica_and_errors_are_precise(stack: Stack) -> None:
    async def idle_chosen() -> bool:
        await stack.report("svc-lo", "svc-lo-r1", EAST, in_flight=6, queued=2)
        await stack.report("svc-lo", "svc-lo-r2", EAST, in_flight=1)
        answer = await stack.resolve("svc-lo", "least-outstanding")
        return len(answer.alternatives) == 1 and answer.replica.replica_id == "svc-lo-r2"

    await until(idle_chosen, "least-outstanding to pick the idle replica")
    answer = await stack.resolve("svc-lo", "least-outstanding")
    # Its report's one in flight and the request routed to it just above, which no report shows yet.
    assert answer.reason == "2 outstanding, the fewest"
    assert [a.replica_id for a in answer.alternatives] == ["svc-lo-r1"]

    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await stack.resolve("svc-nobody", "least-outstanding")
    assert unknown.value.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as bad:
        await stack.resolve("svc-lo", "fastest")
    assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert (bad.value.details() or "").startswith("policy: unknown policy 'fastest'")


async def test_network_aware_keeps_the_region_and_spills_only_when_home_is_loaded(stack: Stack) -> None:
    async def home_chosen() -> bool:
        await stack.report("svc-na", "svc-na-east", EAST, in_flight=1)
        await stack.report("svc-na", "svc-na-west", WEST)
        answer = await stack.resolve("svc-na", "network-aware")
        return len(answer.alternatives) == 1 and answer.replica.replica_id == "svc-na-east"

    await until(home_chosen, "network-aware to keep the home region")
    answer = await stack.resolve("svc-na", "network-aware")
    assert (answer.home_region, answer.spilled) == (EAST, False)
    assert answer.alternatives[0].rtt_ms == 40.0

    async def spilled() -> pb.ResolveReplicaResponse | None:
        # Home full (batch of 8 taken, 20 queued): its wait outweighs the 40 ms to the west.
        await stack.report("svc-na", "svc-na-east", EAST, in_flight=8, queued=20)
        answer = await stack.resolve("svc-na", "network-aware")
        return answer if answer.spilled else None

    answer = await until(spilled, "network-aware to spill west")
    assert answer.replica.replica_id == "svc-na-west"
    assert answer.reason.startswith(f"spilled from {EAST}")


async def test_a_stale_report_stops_being_chosen(stack: Stack) -> None:
    async def both_fresh() -> bool:
        await stack.report("svc-st", "svc-st-a", EAST, interval_s=0.2)
        await stack.report("svc-st", "svc-st-b", EAST, in_flight=5)
        answer = await stack.resolve("svc-st", "least-outstanding")
        return answer.replica.replica_id == "svc-st-a"

    await until(both_fresh, "the idle replica to be chosen")

    async def a_gone() -> bool:  # a stopped reporting: stale after 3 x 0.2 s
        answer = await stack.resolve("svc-st", "least-outstanding")
        return answer.replica.replica_id == "svc-st-b" and not answer.alternatives

    await until(a_gone, "the stale replica to be left out")


async def test_the_gateway_forwards_and_fails_over_when_a_replica_dies(stack: Stack) -> None:
    one, two = await Replica("svc-gw-r1").start(), await Replica("svc-gw-r2").start()
    url = f"{stack.gateway.url}/v1/services/svc-gw/generate"
    async with aiohttp.ClientSession() as http:

        async def forwarded() -> tuple[int, dict[str, Any], Any] | None:
            await stack.report("svc-gw", one.replica_id, EAST, one.address)
            await stack.report("svc-gw", two.replica_id, EAST, two.address, in_flight=3)
            if len((await stack.resolve("svc-gw", "least-outstanding")).alternatives) != 1:
                return None  # both reports read: the failover below has a next choice
            async with http.post(url, json={"prompt": "hi", "max_tokens": 4}) as answer:
                body = await answer.json()
                return (
                    (answer.status, body, answer.headers) if body.get("replica") == one.replica_id else None
                )

        status, body, headers = await until(forwarded, "the gateway to forward to the idle replica")
        assert status == 200 and body["asked"] == {"prompt": "hi", "max_tokens": 4}
        assert (headers["X-Suanli-Replica"], headers["X-Suanli-Region"]) == (one.replica_id, EAST)

        await one.stop()  # still reported fresh and idle: the first choice, now unreachable
        async with http.post(url, json={"prompt": "again"}) as answer:
            assert answer.status == 200, await answer.text()
            assert (await answer.json())["replica"] == two.replica_id
            assert answer.headers["X-Suanli-Replica"] == two.replica_id

        await two.stop()
        async with http.post(url, json={"prompt": "nobody"}) as answer:
            assert answer.status == 502
            error = (await answer.json())["error"]
            assert one.replica_id in error and two.replica_id in error

        async with http.post(f"{stack.gateway.url}/v1/services/svc-none/generate", json={}) as answer:
            assert answer.status == 404

        async def stale() -> dict[str, Any] | None:
            # Reported once routing knows nothing of it (404); stale three intervals (0.3 s) later.
            async with http.post(f"{stack.gateway.url}/v1/services/svc-gw-stale/generate", json={}) as answer:
                if answer.status == 404:
                    await stack.report("svc-gw-stale", "svc-gw-stale-r1", EAST, one.address, interval_s=0.1)
                return await answer.json() if answer.status == 503 else None

        refused = await until(stale, "a 503 for a service with no fresh replica")
        assert "no fresh replica" in refused["error"]


async def test_requests_waiting_for_a_pooled_connection_are_not_failed_over(stack: Stack) -> None:
    # Regression: the connect timeout also counted the wait for a free pooled connection, so with more
    # generations open than the pool holds (100 by default; the demo had ~100 open at 4 requests/s of
    # ~25 s each) live replicas looked unreachable: 502s, and healthy replicas left out for 10 s.
    slow = await Replica("svc-pool-r1", delay_s=0.6).start()
    cfg = GatewayConfig(EAST, "least-outstanding", max_connections=2, connect_timeout_s=0.2)
    small = await start_gateway("127.0.0.1:0", f"127.0.0.1:{stack.api.port}", cfg)
    url = f"{small.url}/v1/services/svc-pool/generate"
    try:
        async with aiohttp.ClientSession() as http:

            async def reported() -> bool:
                await stack.report("svc-pool", slow.replica_id, EAST, slow.address)
                return bool(fresh(stack, "svc-pool"))

            await until(reported, "the replica's report")

            async def ask() -> int:
                async with http.post(url, json={"context_tokens": 10, "max_tokens": 2}) as answer:
                    return answer.status

            # Six at once through a pool of two: four wait 0.6-1.2 s for a connection, past 0.2 s.
            assert await asyncio.gather(*(ask() for _ in range(6))) == [200] * 6
            assert len(slow.asked) == 6
    finally:
        await small.stop()
        await slow.stop()


@asynccontextmanager
async def first_and_busier(stack: Stack, service: str, first: Replica) -> AsyncIterator[Replica]:
    """`first` (idle, least-outstanding's pick) and a busier replica that answers, both reported."""
    other = await Replica(f"{service}-r2").start()
    await first.start()
    try:

        async def both_reported() -> bool:
            await stack.report(service, first.replica_id, EAST, first.address)
            await stack.report(service, other.replica_id, EAST, other.address, in_flight=3)
            return len(fresh(stack, service)) == 2

        await until(both_reported, "both replicas' reports")
        yield other
    finally:
        await first.stop()
        await other.stop()


async def test_an_overloaded_replica_s_refusal_goes_to_the_next_replica(stack: Stack) -> None:
    full = Replica("svc-busy-r1", refuse="busy")
    url = f"{stack.gateway.url}/v1/services/svc-busy/generate"
    async with first_and_busier(stack, "svc-busy", full) as roomy, aiohttp.ClientSession() as http:
        # The refusing replica looks idle (least-outstanding picks it first); its 503 is retried.
        for _ in range(3):
            async with http.post(url, json={"max_tokens": 4}) as answer:
                assert answer.status == 200, await answer.text()
                assert answer.headers["X-Suanli-Replica"] == roomy.replica_id
        assert full.asked  # it was asked, and refused: alive, so it stays a choice
        await roomy.stop()
        async with http.post(url, json={"max_tokens": 4}) as answer:
            # Only the refusing one left to answer: its own 503 and reason, not a 502.
            assert answer.status == 503
            assert "KV cache full" in (await answer.json())["error"]


async def test_a_request_that_waited_out_a_replica_s_queue_is_not_sent_again(stack: Stack) -> None:
    late = Replica("svc-late-r1", refuse="late")
    url = f"{stack.gateway.url}/v1/services/svc-late/generate"
    async with first_and_busier(stack, "svc-late", late) as other, aiohttp.ClientSession() as http:
        async with http.post(url, json={"max_tokens": 4}) as answer:
            assert answer.status == 503 and "Retry-After" not in answer.headers
            assert answer.headers["X-Suanli-Replica"] == late.replica_id
            assert "waited 30.2 s" in (await answer.json())["error"]
        assert len(late.asked) == 1 and other.asked == []


async def test_garbage_on_services_load_is_dead_lettered_and_routing_keeps_serving(stack: Stack) -> None:
    async with EventPublisher(stack.bootstrap) as bus:
        await bus.publish_raw(topic_name("services.load", stack.prefix), b"k", b"not avro at all", [])
    other = link(EAST, "gw-north", 10.0)  # decodes, but is no load report
    await publish(stack.bootstrap, stack.prefix, "services.load", "x", "NetworkLinkChanged", other)
    dlq = AIOKafkaConsumer(
        topic_name("services.load.dlq", stack.prefix),
        bootstrap_servers=stack.bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    await dlq.start()
    reasons: list[str] = []
    try:

        async def both_dead_lettered() -> bool:
            for records in (await dlq.getmany(timeout_ms=200)).values():
                reasons.extend(dict(r.headers or ()).get(DLQ_ERROR_MESSAGE, b"").decode() for r in records)
            return len(reasons) >= 2

        await until(both_dead_lettered, "both records on services.load.dlq")
    finally:
        await dlq.stop()
    assert any("only ReplicaLoadReported belongs here" in r for r in reasons), reasons

    async def still_serving() -> bool:
        await stack.report("svc-dlq", "svc-dlq-r1", WEST)
        answer = await stack.resolve("svc-dlq", "round-robin")
        return answer.replica.replica_id == "svc-dlq-r1"

    await until(still_serving, "routing to keep resolving after garbage")


async def test_the_trace_driver_replays_through_the_gateway_and_counts_what_failed(stack: Stack) -> None:
    replica = await Replica("svc-drive-r1").start()
    trace = Trace(np.linspace(0.0, 0.5, 20), np.full(20, 300), np.full(20, 11))
    target = SloTarget(ttft_s=2.0, tpot_s=0.1)
    try:

        async def resolvable() -> bool:
            await stack.report("svc-drive", replica.replica_id, EAST, replica.address)
            answer = await stack.resolve("svc-drive", "least-outstanding")
            return answer.replica.replica_id == replica.replica_id

        await until(resolvable, "routing to know the replica")
        async with aiohttp.ClientSession() as http:
            served = DriveStats(target)
            await Driver(http, DriveConfig(stack.gateway.url, "svc-drive"), served).replay(trace)
            unknown = DriveStats(target)
            await Driver(http, DriveConfig(stack.gateway.url, "svc-drive-none"), unknown).replay(trace)
    finally:
        await replica.stop()
    answered = served.summary(1.0)
    assert (answered.requests, answered.answered, answered.slo_met, answered.failures) == (20, 20, 20, {})
    assert answered.latency_p99_s is not None and answered.latency_p99_s < target.e2e_s(11)
    assert answered.ttft_p50_s == pytest.approx(TTFT_S, rel=0.011)
    # Every request was routed to the replica, whose answer echoes what the trace asked for.
    assert replica.asked[-1] == {"context_tokens": 300, "max_tokens": 11}
    refused = unknown.summary(1.0)
    assert (refused.requests, refused.answered, refused.slo_attainment) == (20, 0, 0.0)
    assert refused.failures == {"http 404": 20}


# Simulated replicas: a simulated fleet's agents serve replica tasks with the model's timing and report
# their load on services.load (sensing's adapters.replicas); the orders are placed on the agents directly.
NORTH = "gw-north"
REPORT_S = 0.2
SIM_FLEET = {
    "name": "gw-sim",
    "seed": 3,
    "regions": [
        {
            "name": region,
            "sites": [
                {
                    "name": f"{region}-s1",
                    "node_groups": [
                        {"name": "gpu", "count": count, "gpu_model": "A100 80GB SXM", "gpus_per_node": 1}
                    ],
                }
            ],
        }
        for region, count in ((EAST, 2), (WEST, 1), (NORTH, 1))
    ],
    # What the agents' probes measure: north (a gateway's region, no replica) is nearer east than west.
    "network": {
        "region_pairs": [
            {"regions": [NORTH, EAST], "rtt_ms": 10.0, "jitter_ms": 0.5},
            {"regions": [NORTH, WEST], "rtt_ms": 50.0, "jitter_ms": 0.5},
            {"regions": [EAST, WEST], "rtt_ms": 40.0, "jitter_ms": 0.5},
        ]
    },
}
ASK = {"context_tokens": 200, "max_tokens": 10, "prompt": "hello"}


@asynccontextmanager
async def simulated_fleet(
    stack: Stack, *, probe_s: float | None = None, faults: Path | None = None
) -> AsyncIterator[AgentHost]:
    """The fleet's agents, in process. With ``probe_s`` they run as `suanli agent --simulate` runs them
    (sensing's report loop): they report and probe their links every ``probe_s``, with the faults in the
    run-time faults file ``faults`` (read again each round)."""
    await ensure_agent_topics(stack.bootstrap, stack.prefix)
    interval_s = probe_s or 60.0
    async with EventPublisher(stack.bootstrap) as publisher:
        fleet = parse_fleet(SIM_FLEET, default_catalogue())
        host = build_fleet_host(
            fleet,
            BusSink(publisher, prefix=stack.prefix),
            interval_s=interval_s,
            default_duration_s=300.0,
            replica_interval_s=REPORT_S,
            faults_path=faults,
        )
        stop = asyncio.Event()
        running = None
        if probe_s is not None:
            group = f"{stack.prefix}-fleet"  # unused: the test places the orders, the loop reads none
            settings = RunSettings(stack.bootstrap, group, stack.prefix, interval_s, probe_s)
            running = asyncio.create_task(report_loop(host, settings, stop))
        try:
            yield host
        finally:
            stop.set()
            if running is not None:
                await running
            for agent in host.agents.values():
                await agent.shutdown()


def replica_placement(node_id: str, service_id: str, replica_id: str) -> Placement:
    env = {SERVICE_ID_ENV: service_id, REPLICA_ENV: replica_id, MODEL_ENV: "llama-2-7b", MAX_BATCH_ENV: "8"}
    return Placement(f"t-{replica_id}", f"j-{replica_id}", node_id, 1, (DeviceShare(0),), env=env)


def fresh(stack: Stack, service_id: str) -> dict[str, ReplicaLoad]:
    return stack.api.loads.of(service_id, datetime.now(UTC))


async def test_simulated_replicas_serve_report_and_a_killed_one_is_routed_around_at_once(
    stack: Stack,
) -> None:
    async with simulated_fleet(stack) as host, aiohttp.ClientSession() as http:
        nodes = [f"{EAST}-s1-gpu-001", f"{EAST}-s1-gpu-002"]
        for n, node in enumerate(nodes, 1):
            await host.agents[node].place(replica_placement(node, "svc-sim", f"svc-sim-r{n}"))
        await until(lambda: asyncio.sleep(0, len(fresh(stack, "svc-sim")) == 2), "both replicas' reports")
        url = f"{stack.gateway.url}/v1/services/svc-sim/generate"
        async with http.post(url, json=ASK) as answer:
            assert answer.status == 200, await answer.text()
            body, chosen = await answer.json(), answer.headers["X-Suanli-Replica"]
        assert body["replica_id"] == chosen and body["generated_tokens"] == 10
        assert 0 < body["ttft_s"] < body["latency_s"] < 5.0
        report = fresh(stack, "svc-sim")[chosen]
        assert (report.region, report.max_batch, report.interval_s) == (EAST, 8, REPORT_S)
        assert report.address.startswith("127.0.0.1:") and report.kv_free_tokens > 0

        async def answered_counted() -> bool:
            return fresh(stack, "svc-sim")[chosen].finished_total == 1

        await until(answered_counted, "the answered request in the replica's next report")

        killed = host.agents[nodes[int(chosen[-1]) - 1]]
        await killed.stop(
            StopOrder(f"t-{chosen}", f"j-{chosen}", killed.identity.node_id, 1, "killed", False)
        )
        dead = report.address

        async def port_closed() -> bool:
            try:
                async with http.post(f"http://{dead}/generate", json=ASK):
                    return False
            except aiohttp.ClientConnectionError:
                return True

        await until(port_closed, "the killed replica's port to close")
        # Still fresh in routing's view for up to 3 intervals: the gateway fails over once and then
        # leaves it out, so no request fails and every one is answered by the other replica.
        assert chosen in fresh(stack, "svc-sim")
        served = []
        for _ in range(6):
            async with http.post(url, json=ASK) as answer:
                assert answer.status == 200, await answer.text()
                served.append(answer.headers["X-Suanli-Replica"])
        assert chosen not in served
        # It sends nothing more: routing forgets it after three missed reports.
        await until(
            lambda: asyncio.sleep(0, chosen not in fresh(stack, "svc-sim")), "the killed replica to go stale"
        )


# A partition as it happens: the fleet's agents probe their links, a faults file written while they run
# loses every probe to and from a region, and routing's view processor (`suanli serve routing --role
# view`) makes the lost rounds DOWN links, which the stack's API reads from network.links.
PROBE_S = 0.25
READY_S = 60.0  # the view processor's start: a faust worker takes seconds to join its group


@pytest.fixture
def network_view(stack: Stack, tmp_path: Path) -> Iterator[RoutingProcess]:
    """Routing's view processor on the stack's topics. A path is DOWN for a round whose probes were all
    lost; never here for silence (``down_after`` intervals are far longer than the test)."""
    view = RoutingProcess(
        stack.bootstrap,
        stack.prefix,
        tmp_path / "routing-view.log",
        role="view",
        probe_interval_s=PROBE_S,
        down_after=100,
        check_s=0.2,
    )
    with view.running():
        yield view


def links_of(stack: Stack, region: str) -> list[LinkState]:
    """The link states routing's view holds to or from ``region``, site paths and region pairs."""
    return [s for s in stack.api.network.links.values() if region in s.region_pair]


async def test_a_partitioned_region_loses_its_traffic_to_the_next_region(
    stack: Stack, network_view: RoutingProcess, tmp_path: Path
) -> None:
    faults = tmp_path / "faults.yaml"
    north = await start_gateway(
        "127.0.0.1:0", f"127.0.0.1:{stack.api.port}", GatewayConfig(NORTH, "network-aware")
    )
    try:
        async with (
            simulated_fleet(stack, probe_s=PROBE_S, faults=faults) as host,
            aiohttp.ClientSession() as http,
        ):
            for node, replica in (
                (f"{EAST}-s1-gpu-001", "svc-part-r1"),
                (f"{WEST}-s1-gpu-001", "svc-part-r2"),
            ):
                await host.agents[node].place(replica_placement(node, "svc-part", replica))
            url = f"{north.url}/v1/services/svc-part/generate"

            async def region_of_answer() -> str:
                async with http.post(url, json=ASK) as answer:
                    assert answer.status == 200, await answer.text()
                    return answer.headers["X-Suanli-Region"]

            def measured() -> bool:
                # North's links come only from routing's fold of the agents' rounds (nothing else sends them).
                up = {s.region_pair for s in links_of(stack, NORTH) if s.status is LinkStatus.OK}
                return len(fresh(stack, "svc-part")) == 2 and {(NORTH, EAST), (NORTH, WEST)} <= up

            await until(
                lambda: asyncio.sleep(0, measured()),
                "north's probed links and both replicas",
                timeout_s=READY_S,
            )
            assert await region_of_answer() == EAST  # the nearer region

            faults.write_text(f"faults:\n  - {{kind: partition, region: {EAST}}}\n")

            async def answered_from(region: str) -> bool:
                return await region_of_answer() == region

            await until(lambda: answered_from(WEST), "traffic to move west")
            for _ in range(3):
                assert await region_of_answer() == WEST

            def east_down() -> bool:
                east = links_of(stack, EAST)
                pairs = {s.region_pair for s in east if s.scope == REGION}
                return len(pairs) == 4 and all(s.status is LinkStatus.DOWN for s in east)

            await until(lambda: asyncio.sleep(0, east_down()), "every link of east DOWN")
            east_sites = [s for s in links_of(stack, EAST) if s.scope == SITE]
            assert len(east_sites) == 4  # east's one site to and from north's and west's
            assert all(s.reason.endswith("probes of the round lost") for s in east_sites), east_sites

            faults.write_text("faults: []\n")  # the partition heals
            await until(lambda: answered_from(EAST), "traffic to return east")
            await until(
                lambda: asyncio.sleep(0, all(s.status is LinkStatus.OK for s in links_of(stack, EAST))),
                "every link of east OK again",
            )
    finally:
        await north.stop()


# A real agent's replica: the stand-in for vLLM that sensing's tests run (its /metrics and /generate).
VLLM_LIKE_SERVER = Path(__file__).parents[1] / "sensing" / "vllm_like_server.py"


async def test_a_real_agents_replica_is_resolved_and_served_through_the_gateway(stack: Stack) -> None:
    await ensure_agent_topics(stack.bootstrap, stack.prefix)
    node = f"{EAST}-real-1"
    config = RealAgentConfig(
        NodeIdentity(node, EAST, f"{EAST}-a", f"{EAST}-s1"),
        interval_s=60.0,
        stop_grace_s=5.0,
        replica_host="127.0.0.1",
        replica_interval_s=REPORT_S,
    )
    env = {
        SERVICE_ID_ENV: "svc-real",
        REPLICA_ENV: "svc-real-r1",
        MODEL_ENV: "org/real-7b",
        MAX_BATCH_ENV: "4",
    }
    placement = Placement(
        "t-real", "j-real", node, 1, command=(sys.executable, str(VLLM_LIKE_SERVER)), env=env
    )
    async with EventPublisher(stack.bootstrap) as publisher, aiohttp.ClientSession() as http:
        real = build_real_agent(config, BusSink(publisher, prefix=stack.prefix))
        agent = real.host.agents[node]
        try:
            await agent.place(placement)
            await until(lambda: asyncio.sleep(0, "svc-real-r1" in fresh(stack, "svc-real")), "its report")
            address = fresh(stack, "svc-real")["svc-real-r1"].address
            assert address.startswith("127.0.0.1:")
            resolved = await stack.resolve("svc-real", "least-outstanding")
            assert (resolved.replica.replica_id, resolved.replica.address) == ("svc-real-r1", address)
            url = f"{stack.gateway.url}/v1/services/svc-real/generate"
            async with http.post(url, json=ASK) as answer:
                assert answer.status == 200, await answer.text()
                assert answer.headers["X-Suanli-Replica"] == "svc-real-r1"
                assert (await answer.json())["generated_tokens"] == 10

            async def answered_counted() -> bool:
                return fresh(stack, "svc-real")["svc-real-r1"].finished_total == 1

            await until(answered_counted, "the answered request in the replica's next report")
            await agent.stop(StopOrder("t-real", "j-real", node, 1, "scaled in", False))
            await until(
                lambda: asyncio.sleep(0, "svc-real-r1" not in fresh(stack, "svc-real")), "its reports to stop"
            )
        finally:
            await agent.shutdown()
            real.close()
