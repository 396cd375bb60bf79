"""End to end under faults, on one platform for the module (tests run in file order and each leaves the
platform whole again): the scheduler SIGKILLed mid-stream and restarted, a standby taking over from a
killed leader, an agent process lost with its nodes, and the broker restarted empty (Tansu keeps nothing:
ARCHITECTURE §3). The platform must heal by itself: no task placed twice, none lost, no device shared
past its capacity.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import time
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.bus import topic_name, topics
from suanli.infra.broker import BrokerProcess
from suanli.infra.net import free_loopback_port
from suanli.infra.testing import outside_pytest_root
from suanli.platform.health import grpc_serving
from suanli.platform.stack import Stack
from suanli.sensing.adapters.fleet_file import load_fleet

from .kit import (
    E2E_DIR,
    Consumed,
    Platform,
    TopicReader,
    assert_no_overlapping_attempts,
    assert_placed_once,
    gpu_task,
    job_spec,
    over_allocations,
    placements_by_task_attempt,
    read_topics,
    stack_config,
    until,
    where,
)

FLEET_A = E2E_DIR / "fleets" / "half-a.yaml"  # 12 nodes, started by the Stack as "fleet"
FLEET_B = E2E_DIR / "fleets" / "half-b.yaml"  # 9 nodes, a second agent process "fleet-b"
NODES = 21
A100 = "A100 80GB SXM"
INTERVAL_S = 1.0
PLACEMENTS = topic_name(topics.PLACEMENTS.name)
LIFECYCLE = topic_name(topics.TASKS_LIFECYCLE.name)
STATUS = topic_name(topics.NODES_STATUS.name)
SNAPSHOTS = topic_name(topics.NODE_SNAPSHOTS.name)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    # Kept after the run (service logs for a failure); outside pytest's root, see outside_pytest_root.
    home = outside_pytest_root("suanli-e2e-faults-")
    # A short grace, so what the broker restart lost is re-sent by reconciliation within the test.
    config = stack_config(home, fleet=FLEET_A, snapshot_interval_s=INTERVAL_S, reconcile_grace_s=5.0)
    with Stack(config) as started:
        yield started


@pytest.fixture(scope="module")
async def platform(stack: Stack) -> AsyncIterator[Platform]:
    p = Platform(stack, stack.scheduler_addr)
    p.start(p.fleet_spec("fleet-b", FLEET_B))
    await p.ready_nodes(NODES, timeout=90)
    yield p
    await p.close()


def short_job(name: str, i: int, duration_s: float = 1.5) -> pb.JobSpec:
    # Whole and shared devices mixed, so the accounting check has sharing to look at.
    milli = 1000 if i % 2 else 400
    return job_spec(f"{name}-{i}", gpu_task("w", gpu_milli=milli, duration_s=duration_s))


async def test_scheduler_killed_mid_stream_rebuilds_and_places_nothing_twice(platform: Platform) -> None:
    token = secrets.token_hex(3)
    accepted: list[pb.Job] = []

    async def stream() -> None:
        for i in range(24):
            accepted.append(await platform.submit(short_job("crash", i), f"crash-{token}-{i}", timeout=90))
            await asyncio.sleep(0.1)  # a steady stream, ~10 jobs/s while the scheduler is up

    submitting = asyncio.create_task(stream())
    await until(lambda: _at_least(accepted, 6), 30, "the first jobs of the stream")
    known_before = [j.id for j in accepted]
    leader = platform.service("scheduling")
    await asyncio.to_thread(platform.kill, leader)  # SIGKILL: no clean shutdown, outbox mid-flight
    await asyncio.to_thread(platform.start, platform.stack.scheduling_spec())
    await asyncio.wait_for(submitting, 120)

    # Everything accepted before the crash is still there (rebuilt from the event store) ...
    for job_id in known_before:
        assert await platform.get_job(job_id) is not None
    # ... and every job, before and after, runs to completion exactly once.
    final = await platform.wait_final([j.id for j in accepted], timeout=120)
    assert len(final) == 24
    assert {pb.JobState.Name(j.state) for j in final.values()} == {"JOB_STATE_SUCCEEDED"}
    task_ids = {t.task_id for j in final.values() for t in j.tasks}

    def complete(records: list[Consumed]) -> bool:
        return task_ids <= {c.record["task_id"] for c in records if c.name == "TaskFinished"}

    records = await read_topics(platform.bootstrap, [PLACEMENTS, LIFECYCLE], complete)
    placements = [c for c in records if c.topic == PLACEMENTS]
    lifecycle = [c for c in records if c.topic == LIFECYCLE]
    assert_placed_once(placements, task_ids)
    started = [c for c in lifecycle if c.name == "TaskStarted" and c.record["task_id"] in task_ids]
    assert sorted(c.record["task_id"] for c in started) == sorted(task_ids)  # each ran once
    assert over_allocations(placements, lifecycle) == []


async def _at_least(items: list[pb.Job], n: int) -> bool:
    return len(items) >= n


async def test_standby_takes_over_when_the_leader_is_killed(platform: Platform) -> None:
    standby_addr = f"127.0.0.1:{free_loopback_port()}"
    await asyncio.to_thread(
        platform.start, platform.stack.scheduling_spec("scheduling-standby", standby_addr)
    )
    token = secrets.token_hex(3)
    spec = job_spec("takeover", gpu_task("w", duration_s=1.0))
    # A standby serves reads but refuses writes while the leader lives.
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await platform.api(standby_addr).SubmitJob(pb.SubmitJobRequest(spec=spec, request_id=f"s-{token}"))
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    await platform.api(standby_addr).ListJobs(pb.ListJobsRequest())

    await asyncio.to_thread(platform.kill, platform.service("scheduling"))
    platform.scheduler_addr = standby_addr  # from now on the standby is the platform's scheduler
    job = await platform.submit(spec, f"s-{token}", timeout=60)
    final = await platform.wait_final([job.id], timeout=60)
    assert pb.JobState.Name(final[job.id].state) == "JOB_STATE_SUCCEEDED"


async def test_a_leader_paused_past_its_lease_is_replaced_and_writes_nothing_once_resumed(
    platform: Platform,
) -> None:
    # The previous test left the standby leading; a paused process keeps its database session, so
    # only the lease (10 s by default) can depose it.
    paused = platform.service("scheduling-standby")
    paused_addr = platform.scheduler_addr
    takeover_addr = f"127.0.0.1:{free_loopback_port()}"
    await asyncio.to_thread(
        platform.start, platform.stack.scheduling_spec("scheduling-standby-2", takeover_addr)
    )
    token = secrets.token_hex(3)
    os.killpg(paused.pid, signal.SIGSTOP)
    try:
        platform.scheduler_addr = takeover_addr
        spec = job_spec("paused", gpu_task("w", duration_s=1.0))
        job = await platform.submit(spec, f"p-{token}", timeout=60)
        final = await platform.wait_final([job.id], timeout=60)
        assert pb.JobState.Name(final[job.id].state) == "JOB_STATE_SUCCEEDED"
    finally:
        os.killpg(paused.pid, signal.SIGCONT)

    # Resumed, it still thinks it leads until its next renewal: whatever it is asked to write now is
    # refused by the fence, and it steps down.
    late = job_spec("late-write", gpu_task("w", duration_s=1.0))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await platform.api(paused_addr).SubmitJob(pb.SubmitJobRequest(spec=late, request_id=f"l-{token}"))
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

    async def stepped_down() -> bool:
        return "stepped down as leader" in platform.log("scheduling-standby")

    await until(stepped_down, 30, "the resumed leader stepping down")
    listed = await platform.api().ListJobs(pb.ListJobsRequest(page_size=500))
    # Nothing of the refused write reached the store, and the new leader leads with a later epoch.
    assert len(listed.jobs) < 500 and "late-write" not in {j.spec.name for j in listed.jobs}
    log = platform.log("scheduling-standby-2")
    epochs = [int(e) for e in re.findall(r"elected leader \(epoch (\d+)", log)]
    assert epochs and epochs[-1] >= 2, log[-2000:]


async def test_lost_agent_its_nodes_go_lost_and_its_tasks_move(platform: Platform) -> None:
    token = secrets.token_hex(3)
    job = await platform.submit(
        job_spec("survivor", gpu_task("w", duration_s=120.0, gpu_models=[A100])), f"lost-{token}"
    )

    async def running() -> pb.TaskStatus | None:
        got = await platform.get_job(job.id)
        task = got.tasks[0] if got is not None else None
        return task if task is not None and task.state == "RUNNING" else None

    first = await until(running, 60, "the task running")
    # Kill the agent process hosting it: the node goes silent, as when a machine dies.
    fleet_name, fleet_file = ("fleet-b", FLEET_B) if "a100b" in first.node_id else ("fleet", FLEET_A)
    hosted = {n.identity.node_id for n in load_fleet(fleet_file).nodes}
    async with TopicReader(platform.bootstrap, STATUS, PLACEMENTS, LIFECYCLE) as reader:
        await reader.poll()
        await asyncio.to_thread(platform.kill, platform.service(fleet_name))
        killed_at = time.time()

        lost = await reader.wait_for(
            lambda c: (
                c.name == "NodeStatusChanged"
                and c.record["node_id"] == first.node_id
                and c.record["status"] == "LOST"
                and c.record["occurred_at"].timestamp() > killed_at
            ),
            timeout=30,
            what=f"{first.node_id} LOST on nodes.status",
        )
        # Lost within 3 report intervals of its last snapshot (plus metering's 1 s liveness tick).
        assert lost[0].record["occurred_at"].timestamp() - killed_at <= 3 * INTERVAL_S + 1.5

        async def listed_lost() -> bool:
            nodes = (await platform.api().ListNodes(pb.ListNodesRequest(page_size=500))).nodes
            return any(n.id == first.node_id and n.status == "LOST" for n in nodes)

        await until(listed_lost, 10, f"ListNodes showing {first.node_id} LOST")

        fence_s = platform.stack.config.lost_fence_s
        moved = await reader.wait_for(
            lambda c: (
                c.name == "TaskPlaced"
                and c.record["task_id"] == first.task_id
                and c.record["attempt"] > first.attempt
            ),
            timeout=30 + fence_s,
            what="the task placed again",
        )
        assert moved[0].record["node_id"] not in hosted and moved[0].record["node_id"] != first.node_id
        # The dead node never reports the lost attempt's end: the next one waited out the fence after
        # the stop order (the agent, had it been alive but cut off, would have stopped it by then).
        stop = next(
            c
            for c in reader.records
            if c.name == "TaskStopRequested"
            and (c.record["task_id"], c.record["attempt"]) == (first.task_id, first.attempt)
        )
        waited = (moved[0].record["occurred_at"] - stop.record["occurred_at"]).total_seconds()
        assert waited >= fence_s - 0.5, waited
        again = await until(running, 30, "the moved task running")
        assert (again.node_id, again.attempt) == (moved[0].record["node_id"], moved[0].record["attempt"])

        # Cancel it: the scheduler's TaskStopRequested reaches the agent, which stops it and says so.
        await platform.api().CancelJob(pb.CancelJobRequest(job_id=job.id, reason="e2e done"))
        stopped = await reader.wait_for(
            lambda c: (
                c.name == "TaskFailed"
                and c.record["task_id"] == first.task_id
                and c.record["attempt"] == again.attempt
            ),
            timeout=30,
            what="the cancelled task's end",
        )
        assert stopped[0].record["kind"] == "KILLED" and stopped[0].record["reason"].startswith("stopped:")

    async def released() -> bool:
        got = await platform.get_job(job.id)
        return got is not None and got.state == pb.JOB_STATE_CANCELLED and got.tasks[0].state == "STOPPED"

    await until(released, 30, "the job CANCELLED with its task STOPPED")
    # Bring the lost half back for what follows; its nodes come back READY.
    platform.start(platform.fleet_spec(fleet_name, fleet_file))
    await platform.ready_nodes(NODES, timeout=60)


async def test_broker_restarted_empty_every_job_still_finishes(platform: Platform) -> None:
    token = secrets.token_hex(3)
    before = [
        await platform.submit(short_job("before", i, duration_s=8.0), f"b-{token}-{i}") for i in range(6)
    ]

    async def all_running() -> bool:
        jobs = [await platform.get_job(j.id) for j in before]
        return all(j is not None and j.state == pb.JOB_STATE_RUNNING for j in jobs)

    await until(all_running, 60, "the first jobs running")

    stack = platform.stack
    assert stack.broker is not None
    port = stack.broker.port
    await asyncio.to_thread(stack.broker.stop)
    stack.broker = BrokerProcess(log_path=platform.home / "logs" / "tansu-restarted.log", port=port)
    await asyncio.to_thread(stack.broker.start)

    after = [
        await platform.submit(short_job("after", i, duration_s=2.0), f"a-{token}-{i}", timeout=60)
        for i in range(6)
    ]
    jobs = [*before, *after]
    final = await platform.wait_final([j.id for j in jobs], timeout=150)
    assert {
        j.id: (pb.JobState.Name(j.state), [(t.state, t.attempt, t.node_id, t.reason) for t in j.tasks])
        for j in final.values()
        if j.state != pb.JOB_STATE_SUCCEEDED
    } == {}
    assert platform.stack.supervisor.failed() == []

    # What the new broker saw: no (task, attempt) placed on two nodes, no attempt of a task started
    # while another of it ran, no device over-booked, no placement the agent had to refuse.
    after_ids = {t.task_id for j in after for t in final[j.id].tasks}

    def complete(records: list[Consumed]) -> bool:
        return after_ids <= {c.record["task_id"] for c in records if c.name == "TaskFinished"}

    records = await read_topics(
        platform.bootstrap, [PLACEMENTS, LIFECYCLE, STATUS, SNAPSHOTS], complete, timeout=60
    )
    placements = [c for c in records if c.topic == PLACEMENTS]
    lifecycle = [c for c in records if c.topic == LIFECYCLE]
    for key, placed in placements_by_task_attempt(placements).items():
        assert len({where(r) for r in placed}) == 1, f"{key} placed on two nodes: {placed}"
    assert over_allocations(placements, lifecycle, [c for c in records if c.topic == STATUS]) == []
    assert [c.record for c in lifecycle if c.name == "TaskFailed" and c.record["kind"] == "ERROR"] == []
    assert_no_overlapping_attempts(lifecycle, [c for c in records if c.topic == SNAPSHOTS])
    assert grpc_serving(platform.scheduler_addr, ca_pem=platform.stack.ca)
