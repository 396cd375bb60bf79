"""PostgreSQL stopped for 30 s while jobs finish and new ones are submitted: nothing lost, nothing twice.

The stack runs on an embedded PostgreSQL of its own, stopped with ``pg_ctl stop -m fast`` (every
connection dropped) and started again on the same socket. While it is down the scheduler loses its
leader lock, task reports wait uncommitted, billing and the relay retry; afterwards every job must be
final and succeeded, each task must have run exactly once, and no dead-letter topic may hold anything.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.bus import topics
from suanli.bus.topics import topic_name
from suanli.infra.postgres import PostgresMode, resume_embedded, stop_embedded
from suanli.infra.testing import outside_pytest_root
from suanli.platform.stack import Stack

from .kit import (
    Consumed,
    Platform,
    assert_placed_once,
    dead_letters,
    gpu_task,
    job_spec,
    read_topics,
    ready_platform,
    stack_config,
    until,
)

OUTAGE_S = 60.0
RUNNING_JOBS, SUBMITTED_DURING = 6, 4
PLACEMENTS = topic_name(topics.PLACEMENTS.name)
LIFECYCLE = topic_name(topics.TASKS_LIFECYCLE.name)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    home = outside_pytest_root("suanli-e2e-pg-outage-")  # kept after the run: service logs for a failure
    with Stack(stack_config(home, pg_mode=PostgresMode.EMBEDDED)) as started:
        yield started


@pytest.fixture(scope="module")
async def platform(stack: Stack) -> AsyncIterator[Platform]:
    async with ready_platform(stack, 8) as ready:
        yield ready


async def test_jobs_finished_and_submitted_during_a_postgres_outage_each_run_once(platform: Platform) -> None:
    pg = platform.stack.pg
    assert pg is not None and pg.source == "embedded" and pg.data_dir is not None
    token = secrets.token_hex(3)
    # Long enough to be running when the database stops, short enough to end while it is down.
    running = [
        await platform.submit(job_spec(f"outage-{i}", gpu_task("w", duration_s=12.0)), f"run-{token}-{i}")
        for i in range(RUNNING_JOBS)
    ]

    async def all_running() -> bool:
        jobs = [await platform.get_job(j.id) for j in running]
        return all(j is not None and j.state == pb.JOB_STATE_RUNNING for j in jobs)

    await until(all_running, 60, "every job running before the outage")

    stop_embedded(pg.data_dir)
    try:
        # Submitted while no leader can write: the client retries with the same request id until one can.
        during = asyncio.gather(
            *(
                platform.submit(
                    job_spec(f"during-{i}", gpu_task("w", duration_s=2.0)),
                    f"during-{token}-{i}",
                    timeout=OUTAGE_S + 90,
                )
                for i in range(SUBMITTED_DURING)
            )
        )
        await asyncio.sleep(OUTAGE_S)  # the outage itself: what the test is about, not a wait for an outcome
    finally:
        resume_embedded(pg)
    accepted = [*running, *await during]

    final = await platform.wait_final([j.id for j in accepted], timeout=120)
    assert {pb.JobState.Name(j.state) for j in final.values()} == {"JOB_STATE_SUCCEEDED"}
    task_ids = {t.task_id for j in final.values() for t in j.tasks}
    assert len(task_ids) == RUNNING_JOBS + SUBMITTED_DURING

    def complete(records: list[Consumed]) -> bool:
        return task_ids <= {c.record["task_id"] for c in records if c.name == "TaskFinished"}

    records = await read_topics(platform.bootstrap, [PLACEMENTS, LIFECYCLE], complete)
    assert_placed_once([c for c in records if c.topic == PLACEMENTS], task_ids)
    started = [c for c in records if c.name == "TaskStarted" and c.record["task_id"] in task_ids]
    assert sorted(c.record["task_id"] for c in started) == sorted(task_ids)  # each ran once
    assert await dead_letters(platform.bootstrap) == {}
