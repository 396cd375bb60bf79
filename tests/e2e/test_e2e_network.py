"""End to end on the network: every service as a real process, a simulated fleet in three regions probing
its links every second, and a faults file the test writes while it runs (docs/sensing.md, "Network
faults"). The data sits in Frankfurt (no GPUs); London is 12 ms from it in the measured tables, Madrid
29 ms (tests/e2e/fleets/network-3regions.yaml). Tests run in file order on one platform.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest
from aiokafka import AIOKafkaProducer

from suanli.api.routing.v1 import routing_pb2 as rpb
from suanli.api.routing.v1 import routing_pb2_grpc as rpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.bus import topic_name, topics
from suanli.cli.config import aio_bearer_channel
from suanli.infra.testing import outside_pytest_root
from suanli.platform.health import grpc_serving
from suanli.platform.stack import Stack

from .kit import E2E_DIR, Consumed, Platform, TopicReader, gpu_task, job_spec, stack_config, until

FLEET = E2E_DIR / "fleets" / "network-3regions.yaml"
DATA_REGION = "frankfurt"
NEAR, FAR = "london", "madrid"  # 12 ms and 29 ms from the data region, 24 and 16 GPUs
MAX_RTT_MS = 60.0
DEGRADED_RTT_MS = 400.0
PROBE_INTERVAL_S = 1.0
PLACEMENTS = topic_name(topics.PLACEMENTS.name)
MEASURED = topic_name(topics.LINKS_MEASURED.name)


@pytest.fixture(scope="module")
def faults(stack: Stack) -> Path:
    return stack.config.home / "faults.yaml"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    home = outside_pytest_root("suanli-e2e-network-")
    config = stack_config(home, fleet=FLEET, probe_interval_s=PROBE_INTERVAL_S, faults=home / "faults.yaml")
    with Stack(config) as started:
        yield started


@pytest.fixture(scope="module")
async def platform(stack: Stack) -> AsyncIterator[Platform]:
    p = Platform(stack, stack.scheduler_addr)
    await p.ready_nodes(6, timeout=90)
    yield p
    await p.close()


@pytest.fixture
async def routing(stack: Stack) -> AsyncIterator[rpb_grpc.RoutingStub]:
    async with aio_bearer_channel(stack.routing_addr, stack.admin_token, stack.ca) as channel:
        yield rpb_grpc.RoutingStub(channel)


def near_data(name: str, *, regions: tuple[str, ...] = ()) -> pb.JobSpec:
    spec = job_spec(name, gpu_task("w", duration_s=1.0, regions=regions))
    spec.data_region = DATA_REGION
    spec.max_rtt_ms = MAX_RTT_MS
    return spec


async def region_link(routing: rpb_grpc.RoutingStub, src: str, dst: str) -> rpb.Link | None:
    try:
        matrix = await routing.GetNetwork(rpb.GetNetworkRequest(), timeout=5)
    except grpc.aio.AioRpcError:
        return None
    return next((x for x in matrix.region_links if (x.src_region, x.dst_region) == (src, dst)), None)


async def pending_on(platform: Platform, job_id: str, code: str) -> pb.Job:
    async def probe() -> pb.Job | None:
        job = await platform.get_job(job_id)
        return job if job is not None and job.pending_reason.code == code else None

    return await until(probe, 30, f"{job_id} pending with {code}")


async def test_rtt_bound_jobs_avoid_a_region_whose_link_degrades(
    platform: Platform, routing: rpb_grpc.RoutingStub, faults: Path
) -> None:
    token = secrets.token_hex(3)
    # The view fills path by path: first the scheduler must know both (an RTT bound rules out a region
    # whose path is not measured yet). A job allowed only in one region is placed once it does.
    for region in (NEAR, FAR):
        known = await platform.submit(near_data("known", regions=(region,)), f"known-{region}-{token}")
        final = await platform.wait_final([known.id], timeout=60)
        assert [t.region for t in final[known.id].tasks] == [region]
    # Before the fault both regions are within the bound, and region choice prefers the near one
    # (roomier, closer, the same price).
    before = await run_near_data(platform, "before", token)
    assert {c.record["region"] for c in before} == {NEAR}
    assert all(c.record["rtt_ms"] is not None and c.record["rtt_ms"] <= MAX_RTT_MS for c in before)

    faults.write_text(
        f"faults:\n  - {{kind: degrade, link: [{DATA_REGION}, {NEAR}], rtt_ms: {DEGRADED_RTT_MS:g}}}\n"
    )

    async def degraded() -> bool:
        link = await region_link(routing, NEAR, DATA_REGION)
        return link is not None and link.rtt_ms > MAX_RTT_MS

    await until(degraded, 30, f"routing's view: {NEAR}->{DATA_REGION} above {MAX_RTT_MS:g} ms")

    # The scheduler reads the same topic a moment later: a job allowed only in the near region is
    # placed while it has not heard yet (then cancelled), and waits on the network once it has.
    async def refused_near() -> pb.Job | None:
        probe = await platform.submit(
            near_data("probe", regions=(NEAR,)), f"probe-{token}-{secrets.token_hex(2)}"
        )
        job = await until(lambda: _through_a_cycle(platform, probe.id), 30, "a scheduling cycle")
        if job.pending_reason.code == "NETWORK_CONSTRAINT":
            return job
        await platform.api().CancelJob(pb.CancelJobRequest(job_id=probe.id, reason="too early"))
        return None

    waiting = await until(refused_near, 60, f"the scheduler refusing {NEAR} for the RTT bound")
    assert NEAR in waiting.pending_reason.message
    explained = await platform.api().ExplainJob(pb.ExplainJobRequest(job_id=waiting.id))
    verdicts = {v.region: v.verdict for v in explained.regions}
    assert "ms" in verdicts[NEAR], verdicts
    await platform.api().CancelJob(pb.CancelJobRequest(job_id=waiting.id, reason="e2e done"))

    # The same jobs now go to the far region, never behind the degraded link.
    after = await run_near_data(platform, "after", token)
    assert {c.record["region"] for c in after} == {FAR}
    assert all(c.record["rtt_ms"] is not None and c.record["rtt_ms"] <= MAX_RTT_MS for c in after)


async def run_near_data(platform: Platform, name: str, token: str, jobs: int = 4) -> list[Consumed]:
    """Run RTT-bound jobs free to go to any region; their TaskPlaced records (and the scheduler's answers
    agree on the region)."""
    submitted = [await platform.submit(near_data(f"{name}-{i}"), f"{name}-{token}-{i}") for i in range(jobs)]
    final = await platform.wait_final([j.id for j in submitted], timeout=90)
    assert {pb.JobState.Name(j.state) for j in final.values()} == {"JOB_STATE_SUCCEEDED"}
    regions = {t.task_id: t.region for j in final.values() for t in j.tasks}
    async with TopicReader(platform.bootstrap, PLACEMENTS) as reader:
        placed = await reader.wait_for(
            lambda c: c.name == "TaskPlaced" and c.record["task_id"] in regions,
            count=len(regions),
            what=f"the placements of the {name} jobs",
        )
    assert {c.record["task_id"]: c.record["region"] for c in placed} == regions
    return placed


async def _through_a_cycle(platform: Platform, job_id: str) -> pb.Job | None:
    job = await platform.get_job(job_id)
    if job is None:
        return None
    placed = bool(job.tasks) and all(t.node_id for t in job.tasks)
    return job if placed or job.pending_reason.code else None


async def test_a_gang_is_never_split_across_regions(platform: Platform) -> None:
    token = secrets.token_hex(3)
    # 4 eight-GPU tasks: London (3 nodes) and Madrid (2) could hold them together, no region alone.
    too_big = await platform.submit(_eight_gpu_gang("gang-4", 4), f"g4-{token}")
    waiting = await pending_on(platform, too_big.id, "NO_REGION_FITS")
    assert NEAR in waiting.pending_reason.message and FAR in waiting.pending_reason.message
    job = await platform.get_job(too_big.id)
    assert job is not None and not any(t.node_id for t in job.tasks)
    await platform.api().CancelJob(pb.CancelJobRequest(job_id=too_big.id, reason="e2e done"))

    fits = await platform.submit(_eight_gpu_gang("gang-3", 3), f"g3-{token}")
    final = await platform.wait_final([fits.id], timeout=90)
    assert pb.JobState.Name(final[fits.id].state) == "JOB_STATE_SUCCEEDED"
    task_ids = {t.task_id for t in final[fits.id].tasks}
    async with TopicReader(platform.bootstrap, PLACEMENTS) as reader:
        placed = await reader.wait_for(
            lambda c: c.name == "TaskPlaced" and c.record["task_id"] in task_ids,
            count=3,
            what="the gang's placements",
        )
    assert {c.record["region"] for c in placed} == {NEAR}
    assert len({c.record["node_id"] for c in placed}) == 3


def _eight_gpu_gang(name: str, replicas: int) -> pb.JobSpec:
    task = gpu_task("w", replicas=replicas, duration_s=2.0)
    task.resources.gpu_count = 8
    spec = job_spec(name, task)
    spec.locality = pb.LOCALITY_REGION
    return spec


# ~5-20 s (it waits for the next probe round).
async def test_garbage_on_links_measured_is_dead_lettered(
    platform: Platform, routing: rpb_grpc.RoutingStub
) -> None:
    garbage = f"not a probe round {secrets.token_hex(4)}".encode()
    producer = AIOKafkaProducer(bootstrap_servers=platform.bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        await producer.send_and_wait(MEASURED, garbage, key=b"fra1")
    finally:
        await producer.stop()
    async with TopicReader(platform.bootstrap, f"{MEASURED}.dlq") as dlq:
        (dead,) = await dlq.wait_for(lambda c: c.value == garbage, what="the garbage on the DLQ")
    assert dead.headers["dlq-original-topic"] == MEASURED.encode()
    assert dead.headers["dlq-error-class"] and dead.headers["dlq-error-message"]
    # The view keeps folding rounds after it (the first round of the pair may still be on its way when
    # this test runs first in its module).
    first = await until(lambda: region_link(routing, FAR, DATA_REGION), 40, "the pair's first round")

    async def newer() -> bool:
        link = await region_link(routing, FAR, DATA_REGION)
        return link is not None and link.rounds > first.rounds

    await until(newer, 40, "the view folding rounds after the garbage")


async def test_routing_killed_and_restarted_serves_a_rebuilt_view(platform: Platform) -> None:
    """Killed, routing's last view keeps steering placement; restarted, it serves the view it rebuilt."""
    stack = platform.stack
    await asyncio.to_thread(platform.kill, platform.service("routing"))
    assert not grpc_serving(stack.routing_addr, ca_pem=stack.ca)
    # Routing down: the scheduler keeps placing from its last network snapshot, still avoiding the link.
    while_down = await run_near_data(platform, "routing-down", secrets.token_hex(3), jobs=1)
    assert {c.record["region"] for c in while_down} == {FAR}
    # Ready (SERVING) only once network.links and capacity.nodes were read whole again.
    await asyncio.to_thread(platform.start, stack.routing_spec())

    async with aio_bearer_channel(stack.routing_addr, stack.admin_token, stack.ca) as channel:
        routing = rpb_grpc.RoutingStub(channel)
        link = await region_link(routing, NEAR, DATA_REGION)
        # Rebuilt from network.links, not relearned: the baseline is what the path showed before the
        # fault (about 12 ms), which no round since the restart (all about 400 ms) could have taught it.
        assert link is not None and link.rtt_ms > MAX_RTT_MS, link
        assert link.status == rpb.LINK_STATUS_DEGRADED and link.baseline_rtt_ms < MAX_RTT_MS, link
        far = await region_link(routing, FAR, DATA_REGION)
        assert far is not None and far.status == rpb.LINK_STATUS_OK and far.rtt_ms <= MAX_RTT_MS

        answer = await routing.Resolve(
            rpb.ResolveRequest(from_region=DATA_REGION, max_rtt_ms=MAX_RTT_MS, gpu_models=["A100 80GB SXM"]),
            timeout=5,
        )
    assert {c.region for c in answer.candidates} == {FAR}
    excluded = {(e.region, e.code) for e in answer.excluded}
    assert (NEAR, rpb.EXCLUSION_CODE_RTT) in excluded, answer.excluded
