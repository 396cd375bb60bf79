"""`suanli serve routing` on the real broker: the view processor and the Routing API in one process.

One process serves the module (a faust worker takes seconds to join its group); each test uses its own
regions and sites. Probe rounds are published as sensing agents would, with their own timestamps.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from grpc_health.v1 import health_pb2, health_pb2_grpc
from routing_testkit import RoutingProcess
from typer.testing import CliRunner

from suanli.api.routing.v1 import routing_pb2 as pb
from suanli.api.routing.v1 import routing_pb2_grpc as pb_grpc
from suanli.bus import EventPublisher
from suanli.bus.headers import header
from suanli.cli.main import app as cli
from suanli.clock import to_ms
from suanli.contracts import decode
from suanli.routing.entrypoints.topics import RoutingTopics
from suanli.routing.testing import link_measured, node_capacity
from suanli.telemetry.tracing import continued

INTERVAL_S = 0.5
DOWN_AFTER = 3
CHECK_S = 0.2
READY_DEADLINE_S = 60.0
RESTART_DEADLINE_S = 120.0
DEADLINE_S = 20.0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def until(check: Callable[[], Any], *, timeout_s: float = DEADLINE_S, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if inspect.isawaitable(last):
                last = await last
        except grpc.aio.AioRpcError as exc:
            last = exc
        else:
            if last:
                return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


class TopicReader:
    """A topic read from the beginning without a consumer group, decoded."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.records: list[tuple[dict[str, Any] | bytes, list[tuple[str, bytes]]]] = []
        self._consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)

    async def __aenter__(self) -> TopicReader:
        await self._consumer.start()
        for _ in range(100):
            await self._consumer.topics()
            parts = self._consumer.partitions_for_topic(self.topic)
            if parts:
                break
            await asyncio.sleep(0.1)
        assert parts, f"{self.topic} does not exist"
        self._consumer.assign([TopicPartition(self.topic, p) for p in parts])
        await self._consumer.seek_to_beginning()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    async def poll(self, *, raw: bool = False) -> None:
        for messages in (await self._consumer.getmany(timeout_ms=200)).values():
            for m in messages:
                value = m.value if raw else decode(m.value)[1]
                self.records.append((value, list(m.headers or ())))

    async def links(
        self, link_id: str, done: Callable[[list[dict[str, Any]]], bool], what: str
    ) -> list[dict[str, Any]]:
        async def check() -> list[dict[str, Any]] | None:
            await self.poll()
            seen = [r for r, _ in self.records if isinstance(r, dict) and r["link_id"] == link_id]
            return seen if seen and done(seen) else None

        return await until(check, what=what)


@dataclass
class Prober:
    """Sends a round for every path each interval, as sensing agents do (rtt per path, settable)."""

    publisher: EventPublisher
    topic: str
    paths: dict[tuple[tuple[str, str], tuple[str, str]], dict[str, Any]] = field(default_factory=dict)

    async def round(self) -> None:
        at = now_ms()
        for (src, dst), figures in list(self.paths.items()):
            await self.publisher.publish(
                self.topic, src[1], "LinkMeasured", link_measured(src, dst, at, **figures)
            )

    async def run(self) -> None:
        while True:
            await self.round()
            await asyncio.sleep(INTERVAL_S)  # the agents' cadence, not a wait for an outcome


@dataclass
class Stack:
    bootstrap: str
    topics: RoutingTopics
    publisher: EventPublisher
    prober: Prober
    process: RoutingProcess

    def reader(self, topic: str) -> TopicReader:
        return TopicReader(self.bootstrap, topic)


@pytest.fixture(scope="module")
def process(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoutingProcess]:
    log_path = tmp_path_factory.mktemp("routing") / "routing.log"
    p = RoutingProcess(
        kafka_bootstrap,
        f"t-routing-{secrets.token_hex(3)}",
        log_path,
        probe_interval_s=INTERVAL_S,
        down_after=DOWN_AFTER,
        check_s=CHECK_S,
    )
    with p.running():
        yield p


async def serving(address: str, timeout_s: float) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)

        async def check() -> bool:
            answer = await stub.Check(
                health_pb2.HealthCheckRequest(service="suanli.routing.v1.Routing"), timeout=2
            )
            return answer.status == health_pb2.HealthCheckResponse.SERVING

        await until(check, timeout_s=timeout_s, what="the Routing API to serve")


@pytest.fixture(scope="module")
async def stack(kafka_bootstrap: str, process: RoutingProcess) -> AsyncIterator[Stack]:
    topics = RoutingTopics(process.env["SUANLI_TOPIC_PREFIX"])
    await serving(process.address, READY_DEADLINE_S)
    async with EventPublisher(kafka_bootstrap) as publisher:
        prober = Prober(publisher, topics.measured)
        # Ready means the worker folds: a warm-up path must come out as a link.
        prober.paths[(("Warm", "warm-1"), ("Up", "up-1"))] = {}
        task = asyncio.create_task(prober.run())
        s = Stack(kafka_bootstrap, topics, publisher, prober, process)
        async with s.reader(topics.links) as links:
            await until(lambda: _poll_any(links), timeout_s=READY_DEADLINE_S, what="the view processor")
        try:
            yield s
        finally:
            task.cancel()


async def _poll_any(reader: TopicReader) -> bool:
    await reader.poll()
    return any(isinstance(r, dict) and r["link_id"] == "warm-1->up-1" for r, _ in reader.records)


def stub(address: str) -> tuple[grpc.aio.Channel, pb_grpc.RoutingStub]:
    channel = grpc.aio.insecure_channel(address)
    return channel, pb_grpc.RoutingStub(channel)


# -- the view processor ------------------------------------------------------------------------------------


async def test_probe_rounds_become_network_links_with_their_figures(stack: Stack) -> None:
    src, dst = ("FigA", "figa-1"), ("FigB", "figb-1")
    start = now_ms()
    for i, rtt in enumerate((30.0, 34.0, 38.0)):
        record = link_measured(src, dst, start + 500 * i, rtt_ms=rtt, jitter_ms=1.0 + i, bandwidth_mbps=900.0)
        await stack.publisher.publish(stack.topics.measured, src[1], "LinkMeasured", record)
    async with stack.reader(stack.topics.links) as links:
        # Round 2 moves the EWMA by 1.2 ms (< 10 %): not published; round 3 by 3.24 ms: published.
        site = await links.links("figa-1->figb-1", lambda s: s[-1]["rounds"] == 3, "the third round's state")
        region = await links.links("region:FigA->FigB", lambda s: s[-1]["rounds"] == 3, "the region summary")
    assert [r["rounds"] for r in site] == [1, 3]
    last = site[-1]
    assert last["rtt_ms"] == pytest.approx(0.3 * 38 + 0.7 * (0.3 * 34 + 0.7 * 30))
    assert (last["baseline_rtt_ms"], last["jitter_p95_ms"], last["bandwidth_mbps"]) == (30.0, 3.0, 900.0)
    assert (last["status"], last["scope"], last["src_region"], last["dst_site"]) == (
        "OK",
        "site",
        "FigA",
        "figb-1",
    )
    assert to_ms(last["last_probe_at"]) == start + 1000
    assert (region[-1]["scope"], region[-1]["status"], region[-1]["src_site"]) == ("region", "OK", "")


async def test_the_link_change_a_probe_round_causes_continues_the_rounds_trace(stack: Stack) -> None:
    src, dst = ("TrA", "tra-1"), ("TrB", "trb-1")
    round_trace = secrets.token_hex(16)
    with continued(f"00-{round_trace}-{secrets.token_hex(8)}-01"):
        record = link_measured(src, dst, now_ms(), rtt_ms=25.0)
        await stack.publisher.publish(stack.topics.measured, src[1], "LinkMeasured", record)
    async with stack.reader(stack.topics.links) as links:
        await links.links("tra-1->trb-1", lambda s: True, "the path's first state")
    # The first state is the round's (the timer's republications later are in no trace).
    headers = next(h for r, h in links.records if isinstance(r, dict) and r["link_id"] == "tra-1->trb-1")
    traceparent = header(headers, "traceparent")
    assert traceparent is not None and traceparent.split("-")[1] == round_trace


async def test_a_path_whose_probes_stop_goes_down_within_down_after_intervals(stack: Stack) -> None:
    path = (("DnA", "dna-1"), ("DnB", "dnb-1"))
    stack.prober.paths[path] = {"rtt_ms": 20.0}
    async with stack.reader(stack.topics.links) as links:
        await links.links("dna-1->dnb-1", lambda s: s[-1]["status"] == "OK", "the path up")
        del stack.prober.paths[path]
        down = await links.links("dna-1->dnb-1", lambda s: s[-1]["status"] == "DOWN", "the path DOWN")
        region = await links.links("region:DnA->DnB", lambda s: s[-1]["status"] == "DOWN", "the region DOWN")
    silent_s = (to_ms(down[-1]["occurred_at"]) - to_ms(down[-1]["last_probe_at"])) / 1000
    limit_s = DOWN_AFTER * INTERVAL_S
    # Marked once the limit passed, at the next check (plus the fetch and publish of this machine).
    assert limit_s <= silent_s <= limit_s + CHECK_S + 1.0, silent_s
    assert down[-1]["reason"].startswith("no probe for ")
    assert region[-1]["reason"] == "all 1 site paths down"


async def test_garbage_on_links_measured_is_dead_lettered_with_the_reason(stack: Stack) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=stack.bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        await producer.send_and_wait(stack.topics.measured, b"not an event", key=b"junk-1")
    finally:
        await producer.stop()
    bad = link_measured(("DlA", "dla-1"), ("DlB", "dlb-1"), now_ms(), loss_ratio=2.0)
    await stack.publisher.publish(stack.topics.measured, "dla-1", "LinkMeasured", bad)
    stray = node_capacity("dl-node", "DlA", "dla-1", now_ms())
    await stack.publisher.publish(stack.topics.measured, "dl-node", "NodeCapacityChanged", stray)
    good = link_measured(("DlA", "dla-1"), ("DlB", "dlb-1"), now_ms())
    await stack.publisher.publish(stack.topics.measured, "dla-1", "LinkMeasured", good)

    async with stack.reader(f"{stack.topics.measured}.dlq") as dlq:
        # This module's only garbage: these three records, nothing else.
        async def all_three() -> bool:
            await dlq.poll(raw=True)
            return len(dlq.records) >= 3

        await until(all_three, what="three dead letters")
    by_class = {dict(h)["dlq-error-class"].rsplit(b".", 1)[-1]: dict(h) for _, h in dlq.records}
    assert len(dlq.records) == 3
    assert sorted(by_class) == [b"CorruptEventError", b"InvalidProbe", b"NotAProbe"]
    assert by_class[b"CorruptEventError"]["dlq-error-message"].startswith(b"bad magic")
    assert (
        by_class[b"InvalidProbe"]["dlq-error-message"]
        == b"LinkMeasured.loss_ratio: must be at most 1, got 2.0"
    )
    assert by_class[b"NotAProbe"]["dlq-error-message"].startswith(b"NodeCapacityChanged on ")
    assert {h["dlq-original-topic"] for h in by_class.values()} == {stack.topics.measured.encode()}
    async with stack.reader(stack.topics.links) as links:  # and the processor carried on
        (state,) = await links.links("dla-1->dlb-1", lambda s: True, "the valid round after the garbage")
    assert state["loss_ratio"] == 0.0


# -- the Routing API ---------------------------------------------------------------------------------------

ORIGIN = ("RsHome", "home-1")
NEAR = ("RsNear", "near-1")
FAR = ("RsFar", "far-1")
CUT = ("RsCut", "cut-1")


async def _fleet(stack: Stack) -> None:
    """Nodes in four regions; the origin probes the others (RsCut loses every probe)."""
    at = now_ms()
    for node, (region, site), used in (
        ("rs-h", ORIGIN, 6),
        ("rs-n", NEAR, 0),
        ("rs-f", FAR, 0),
        ("rs-c", CUT, 0),
    ):
        record = node_capacity(node, region, site, at, used_gpus=used)
        await stack.publisher.publish(f"{stack.topics.capacity}", node, "NodeCapacityChanged", record)
    stack.prober.paths[(ORIGIN, NEAR)] = {"rtt_ms": 12.0, "bandwidth_mbps": 20_000.0}
    stack.prober.paths[(ORIGIN, FAR)] = {"rtt_ms": 180.0, "bandwidth_mbps": 5_000.0}
    stack.prober.paths[(ORIGIN, CUT)] = {"rtt_ms": 0.0, "loss_ratio": 1.0}


async def _regions_seen(api: pb_grpc.RoutingStub) -> pb.NetworkMatrix | None:
    matrix = await api.GetNetwork(pb.GetNetworkRequest(sites=True), timeout=5)
    status = {(link.src_region, link.dst_region): link.status for link in matrix.region_links}
    wanted = {
        (ORIGIN[0], NEAR[0]): pb.LINK_STATUS_OK,
        (ORIGIN[0], FAR[0]): pb.LINK_STATUS_OK,
        (ORIGIN[0], CUT[0]): pb.LINK_STATUS_DOWN,
    }
    return matrix if all(status.get(k) == v for k, v in wanted.items()) else None


async def _ranked(api: pb_grpc.RoutingStub, **fields: Any) -> pb.ResolveResponse:
    request = pb.ResolveRequest(from_region=ORIGIN[0], gpu_models=["H100"], **fields)
    return await api.Resolve(request, timeout=5)


async def test_resolve_ranks_by_compute_network_and_price_and_says_why_others_are_out(stack: Stack) -> None:
    await _fleet(stack)
    channel, api = stub(stack.process.address)
    try:
        matrix = await until(lambda: _regions_seen(api), what="the network matrix")
        assert {"RsHome", "RsNear", "RsFar", "RsCut"} <= set(matrix.regions)
        assert any(link.link_id == "home-1->near-1" for link in matrix.site_links)

        async def fleet_known() -> pb.ResolveResponse | None:
            got = await _ranked(api, kind=pb.WORKLOAD_KIND_TRAINING, cu=989.0, limit=10)
            ours = [c for c in got.candidates if c.region.startswith("Rs")]
            return got if len(ours) == 3 else None

        got = await until(fleet_known, what="capacity of the four regions")
        ours = [c for c in got.candidates if c.region.startswith("Rs")]
        # Training weighs compute: the empty remote sites before the origin's nearly full one.
        assert [c.region for c in ours] == ["RsNear", "RsFar", "RsHome"]
        near = ours[0]
        assert (near.site, near.gpu_model, near.currency) == ("near-1", "H100 SXM", "CNY")
        assert near.rtt_ms == pytest.approx(12.0)
        assert near.score.total == pytest.approx(
            0.5 * near.score.compute + 0.2 * near.score.network + 0.3 * near.score.price
        )
        cut = [e for e in got.excluded if e.region == "RsCut"]
        assert [(e.code, e.site) for e in cut] == [(pb.EXCLUSION_CODE_LINK_DOWN, "")]
        assert cut[0].reason.startswith("path RsHome->RsCut is DOWN: all 1 site paths down")

        bounded = await _ranked(
            api, kind=pb.WORKLOAD_KIND_INFERENCE, cu=989.0, max_rtt_ms=100.0, min_bandwidth_gbps=10.0
        )
        # 12 ms away with 7 of 8 GPUs free beats the origin's last 2 GPUs even for inference.
        assert [c.region for c in bounded.candidates if c.region.startswith("Rs")] == ["RsNear", "RsHome"]
        far = next(e for e in bounded.excluded if e.region == "RsFar")
        assert (far.code, far.reason) == (
            pb.EXCLUSION_CODE_RTT,
            "rtt 180.0 ms on RsHome->RsFar > max_rtt_ms 100",
        )
    finally:
        await channel.close()


async def test_bad_requests_are_invalid_argument_naming_the_field(stack: Stack) -> None:
    channel, api = stub(stack.process.address)
    try:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await api.Resolve(pb.ResolveRequest(from_region="Atlantis"), timeout=5)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details().startswith("from_region: unknown region 'Atlantis'; known regions: ")
        assert "Warm" in caught.value.details()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await api.Resolve(pb.ResolveRequest(from_region="Warm", max_rtt_ms=-5), timeout=5)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert caught.value.details().startswith("max_rtt_ms: ")
    finally:
        await channel.close()


async def test_watch_network_streams_changes_as_they_arrive(stack: Stack) -> None:
    channel, api = stub(stack.process.address)
    try:
        call = api.WatchNetwork(pb.WatchNetworkRequest(sites=True))
        path = (("WaA", "waa-1"), ("WaB", "wab-1"))
        stack.prober.paths[path] = {"rtt_ms": 40.0}

        async def first() -> pb.Link:
            async for update in call:
                if update.link.link_id == "waa-1->wab-1":
                    return update.link
            raise AssertionError("stream ended")

        link = await asyncio.wait_for(first(), DEADLINE_S)
        assert (link.status, link.rtt_ms, link.scope) == (pb.LINK_STATUS_OK, 40.0, "site")
        call.cancel()
    finally:
        await channel.close()


async def test_the_cli_shows_the_matrix_resolves_and_reports_bad_regions(
    stack: Stack, tmp_path: Path
) -> None:
    await _fleet(stack)
    channel, api = stub(stack.process.address)
    try:
        await until(lambda: _regions_seen(api), what="the network matrix")
    finally:
        await channel.close()
    runner = CliRunner()
    env = {"SUANLI_ROUTING_ADDR": stack.process.address, "COLUMNS": "400"}
    png = tmp_path / "net.png"
    shown = await asyncio.to_thread(runner.invoke, cli, ["network", "--sites", "--png", str(png)], env=env)
    assert shown.exit_code == 0, shown.output
    assert "RsCut" in shown.output and "DOWN" in shown.output and "home-1" in shown.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    args = [
        "route",
        "resolve",
        "--from",
        "RsHome",
        "--gpu-model",
        "H100",
        "--cu",
        "989",
        "--max-rtt-ms",
        "100",
    ]
    ranked = await asyncio.to_thread(runner.invoke, cli, args, env=env)
    assert ranked.exit_code == 0, ranked.output
    assert "RsNear" in ranked.output and "LINK_DOWN" in ranked.output and "RTT" in ranked.output
    as_data = await asyncio.to_thread(runner.invoke, cli, [*args, "-o", "json"], env=env)
    answer = json.loads(as_data.stdout)
    ours = [c for c in answer["candidates"] if c["region"].startswith("Rs")]
    assert [c["region"] for c in ours] == ["RsNear", "RsHome"] and ours[0]["score"]["total"] > 0
    assert {"EXCLUSION_CODE_LINK_DOWN", "EXCLUSION_CODE_RTT"} <= {e["code"] for e in answer["excluded"]}
    listed = await asyncio.to_thread(runner.invoke, cli, ["network", "-o", "json"], env=env)
    links = json.loads(listed.stdout)["links"]
    to_cut = {(x["src_region"], x["status"]) for x in links if x["dst_region"] == "RsCut"}
    assert ("RsHome", "LINK_STATUS_DOWN") in to_cut
    bad = await asyncio.to_thread(runner.invoke, cli, ["route", "resolve", "--from", "Atlantis"], env=env)
    assert bad.exit_code == 3
    assert "INVALID_ARGUMENT: from_region: unknown region 'Atlantis'; known regions:" in bad.output


# -- failure: SIGKILL and restart (last: it restarts the module's process) --------------------------------


async def test_sigkilled_routing_restarts_with_its_view_rebuilt(stack: Stack) -> None:
    await _fleet(stack)
    slow = (("RsHome", "home-2"), ("RsSlow", "slow-1"))
    stack.prober.paths[slow] = {"rtt_ms": 20.0}
    channel, api = stub(stack.process.address)
    async with stack.reader(stack.topics.links) as links:
        await links.links("home-2->slow-1", lambda s: s[-1]["status"] == "OK", "the slow path up")
        stack.prober.paths[slow] = {"rtt_ms": 100.0}
        await links.links("home-2->slow-1", lambda s: s[-1]["status"] == "DEGRADED", "the slow path degraded")
    before = await until(lambda: _regions_seen(api), what="the network matrix")
    ranked_before = [c.region for c in (await _ranked(api, cu=989.0)).candidates if c.region.startswith("Rs")]
    await channel.close()

    stack.process.kill()
    stack.process.start()
    await serving(stack.process.address, RESTART_DEADLINE_S)
    channel, api = stub(stack.process.address)
    try:
        after = await _regions_seen(api)  # serving means the view was read whole again
        assert after is not None
        assert {link.link_id for link in before.region_links} <= {link.link_id for link in after.region_links}
        ranked = [c.region for c in (await _ranked(api, cu=989.0)).candidates if c.region.startswith("Rs")]
        assert ranked == ranked_before
        # The restarted processor folds onto the seeded state: the slow path slows further and keeps its
        # 20 ms baseline (starting blank it would take 160 ms as the baseline and call the path OK).
        stack.prober.paths[slow] = {"rtt_ms": 160.0}

        async def slower() -> pb.Link | None:
            matrix = await api.GetNetwork(pb.GetNetworkRequest(sites=True), timeout=5)
            link = next((x for x in matrix.site_links if x.link_id == "home-2->slow-1"), None)
            return link if link is not None and link.rtt_ms > 110.0 else None

        slow_link = await until(slower, timeout_s=RESTART_DEADLINE_S, what="the restarted processor folding")
        assert slow_link.status == pb.LINK_STATUS_DEGRADED
        assert slow_link.baseline_rtt_ms == pytest.approx(20.0)
    finally:
        await channel.close()
