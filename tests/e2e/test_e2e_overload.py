"""End to end under overload: a valid best-effort job of 1,000 one-core tasks lands on a running platform
where other tenants' work runs, a non-preemptible gang among it.

What must hold (issue 11): the big job is placed in waves the agents absorb, so no node's snapshots fall
behind and no node is declared LOST; nothing of the non-preemptible gang is stopped; the big job runs or
waits with a reason; every other job finishes; after the big job is cancelled a new job starts within
seconds.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.bus import topic_name, topics
from suanli.platform.stack import Stack

from .kit import QUEUE, Platform, TopicReader, gpu_task, job_spec, stack_config, until

NODES = 20  # deploy/fleets/small.yaml: about 1,900 cores, room for the whole big job
BIG_TASKS = 1_000
WAVE = 100
PLACEMENTS = topic_name(topics.PLACEMENTS.name)
STATUS = topic_name(topics.NODES_STATUS.name)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("e2e-overload")
    with Stack(stack_config(home)) as started:
        yield started


@pytest.fixture(scope="module")
async def platform(stack: Stack) -> AsyncIterator[Platform]:
    p = Platform(stack, stack.scheduler_addr)
    await p.ready_nodes(NODES, timeout=90)
    yield p
    await p.close()


def big_job() -> pb.JobSpec:
    shard = pb.TaskSpec(
        name="shard",
        replicas=BIG_TASKS,
        command="python shard.py",
        duration_s=20.0,
        resources=pb.ResourceRequest(cpu_milli=1000, memory_mib=1024),
    )
    return pb.JobSpec(name="big", queue=QUEUE, best_effort=True, tasks=[shard])


def gang() -> pb.JobSpec:
    spec = job_spec("gang", gpu_task("w", replicas=2, duration_s=45.0, gpu_models=["H100 SXM"]))
    spec.preemptible = False
    spec.min_available = 2
    return spec


async def _submit(platform: Platform, spec: pb.JobSpec) -> pb.Job:
    return await platform.submit(spec, f"{spec.name}-{secrets.token_hex(4)}")


async def test_a_thousand_task_job_neither_flaps_nodes_nor_stops_others_and_the_platform_heals(
    platform: Platform,
) -> None:
    async with TopicReader(platform.bootstrap, PLACEMENTS, STATUS) as reader:
        gang_job = await _submit(platform, gang())

        async def gang_running() -> bool:
            job = await platform.get_job(gang_job.id)
            return job is not None and all(t.state == "RUNNING" for t in job.tasks)

        await until(gang_running, 30, "the non-preemptible gang running")
        others = [
            await _submit(platform, job_spec(f"before-{i}", gpu_task("w", duration_s=3.0))) for i in range(3)
        ]
        started = time.monotonic()
        big = await _submit(platform, big_job())

        async def big_progressing() -> pb.Job | None:
            job = await platform.get_job(big.id)
            if job is None:
                return None
            running = sum(1 for t in job.tasks if t.state == "RUNNING")
            return job if running >= 2 * WAVE else None

        # Work of other tenants keeps coming in while the big job is placed wave by wave.
        for i in range(4):
            others.append(await _submit(platform, job_spec(f"during-{i}", gpu_task("w", duration_s=3.0))))
            await asyncio.sleep(2)
        progressed = await until(big_progressing, 60, "two waves of the big job running")
        pending = [t for t in progressed.tasks if t.state == "PENDING"]
        if pending:  # what is not placed yet waits with a reason a person can read
            assert progressed.state == pb.JOB_STATE_RUNNING or progressed.pending_reason.code
        assert sum(1 for t in progressed.tasks if t.state == "PLACED") <= WAVE

        await platform.api().CancelJob(pb.CancelJobRequest(job_id=big.id, reason="too big"), timeout=10)
        probe = await _submit(platform, job_spec("probe", gpu_task("w", duration_s=2.0)))
        submitted = time.monotonic()

        seen: list[pb.Job] = []

        async def probe_started() -> bool:
            job = await platform.get_job(probe.id)
            seen[:] = [job] if job is not None else seen
            return job is not None and any(t.state in ("RUNNING", "SUCCEEDED") for t in job.tasks)

        try:
            await until(probe_started, 15, "a job submitted after the cancel to start")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the probe as last seen: {seen}") from None
        assert time.monotonic() - submitted < 15

        done = await platform.wait_final([gang_job.id, probe.id, *(j.id for j in others)], timeout=90)
        assert {j: pb.JobState.Name(x.state) for j, x in done.items()} == {
            j: "JOB_STATE_SUCCEEDED" for j in done
        }
        assert done[gang_job.id].restarts == 0
        await reader.poll()
        lost = [
            c.record["node_id"] for c in reader.named("NodeStatusChanged") if c.record["status"] == "LOST"
        ]
        assert lost == [], f"nodes flapped LOST during the run: {sorted(set(lost))}"
        gang_tasks = {t.task_id for t in done[gang_job.id].tasks}
        stopped = [
            c.record
            for c in reader.named("TaskStopRequested", "TaskPreempted")
            if c.record["task_id"] in gang_tasks
        ]
        assert stopped == [], f"the non-preemptible gang was told to stop: {stopped}"
        assert time.monotonic() - started < 150
