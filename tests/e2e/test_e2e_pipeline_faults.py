"""The fault suite's pipeline faults, on one platform for the module (tests run in file order and each
leaves the platform whole): metering and billing SIGKILLed during a live run, the broker paused with
jobs submitted meanwhile, 10,000 malformed records over every input topic while real work runs, and
(last, since nothing the broker held survives it) the broker restarted empty with jobs running across it.

Each test checks outcomes only: every job final and succeeded, no two attempts of a task overlapping,
exactly one charge per usage window and device class with the amount a fault-free run gives, and no
dead letter but the ones the test sent.

"Charges equal a fault-free run" is exact, not a tolerance. A simulated task's run time is what its agent
stamps on `TaskStarted` and `TaskFinished` (the agents are never faulted here), and a usage window and its
price depend only on those stamps, the allocation in `TaskPlaced`, the node's devices and the job's
terms, never on when metering or billing read them (docs/metering.md, "Usage windows, and why they are
exact"). So the reference is the pure cores of metering and billing fed those facts, as read back from
the topics, once and in order: `windows` → `usage_record` → `rate`. Billing must hold exactly those
charges: the same charge ids, CU-seconds, unit prices and amounts, none missing, none doubled, none
reversed.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from suanli import contracts
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.billing.adapters.records import terms_from_job_submitted, usage_from_record
from suanli.billing.domain.rating import rate
from suanli.bus import headers as h
from suanli.bus import topic_name, topics
from suanli.bus.publisher import EventPublisher, OutgoingRecord, ProducerSettings
from suanli.clock import to_ms
from suanli.contracts.codec import HEADER_SIZE, MAGIC
from suanli.contracts.codec import header as schema_header
from suanli.contracts.compat import sample_records
from suanli.infra.broker import BrokerProcess
from suanli.infra.testing import outside_pytest_root
from suanli.metering.adapters.records import allocation_of, usage_record
from suanli.metering.domain.capacity import capacity_of
from suanli.metering.domain.nodes import rate as rate_shares
from suanli.metering.domain.usage import Charge, windows
from suanli.platform.stack import Stack
from suanli.resources import default_catalogue
from suanli.resources.pricebook_file import load_pricebook

from .kit import (
    Consumed,
    Platform,
    TopicReader,
    assert_no_overlapping_attempts,
    assert_placed_once,
    dead_letters,
    distinct,
    gpu_task,
    job_spec,
    read_topics,
    ready_platform,
    stack_config,
    until,
)

PLACEMENTS = topic_name(topics.PLACEMENTS.name)
LIFECYCLE = topic_name(topics.TASKS_LIFECYCLE.name)
SNAPSHOTS = topic_name(topics.NODE_SNAPSHOTS.name)
JOBS = topic_name(topics.JOBS_EVENTS.name)
USAGE = topic_name(topics.USAGE_METERED.name)
FACTS = (PLACEMENTS, LIFECYCLE, SNAPSHOTS, JOBS)
FLOOD_KEY = b"flood-"


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    home = outside_pytest_root("suanli-e2e-pipeline-")  # kept after the run: service logs for a failure
    with Stack(stack_config(home)) as started:
        yield started


@pytest.fixture(scope="module")
async def platform(stack: Stack) -> AsyncIterator[Platform]:
    async with ready_platform(stack, 8) as ready:
        yield ready


def flood_letter(c: Consumed) -> bool:
    """A dead letter of the flood test's own malformed records (every test after it ignores those)."""
    return (c.key or b"").startswith(FLOOD_KEY)


def shared_job(name: str, i: int, duration_s: float, max_retries: int = 0) -> pb.JobSpec:
    # Whole and shared devices mixed: the amounts then depend on the share, not only on the time.
    task = gpu_task("w", gpu_milli=1000 if i % 2 else 500, duration_s=duration_s)
    return job_spec(f"{name}-{i}", task, max_retries=max_retries)


async def submit_all(
    platform: Platform, name: str, token: str, count: int, duration_s: float, max_retries: int = 0
) -> list[pb.Job]:
    return [
        await platform.submit(shared_job(name, i, duration_s, max_retries), f"{name}-{token}-{i}", timeout=60)
        for i in range(count)
    ]


async def all_running(platform: Platform, jobs: Sequence[pb.Job]) -> bool:
    got = [await platform.get_job(j.id) for j in jobs]
    return all(j is not None and j.state == pb.JOB_STATE_RUNNING for j in got)


# -- the fault-free reference -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Priced:
    usage_event_id: str
    device_class: str
    window: tuple[int, int]
    cu_seconds: Decimal
    unit_price: Decimal
    amount: Decimal


def reference_charges(records: Sequence[Consumed], job_ids: set[str], stack: Stack) -> dict[str, Priced]:
    """The charges a fault-free run bills for ``job_ids``, by charge id (see the module's docstring)."""
    catalogue = default_catalogue()
    book = load_pricebook(stack.config.pricebook)
    snapshots = {c.record["node_id"]: c.record for c in records if c.name == "NodeSnapshot"}
    terms = {
        job_id: (tenant, t)
        for job_id, tenant, t in (
            terms_from_job_submitted(c.record) for c in records if c.name == "JobSubmitted"
        )
    }
    placed: dict[tuple[str, int], dict[str, Any]] = {}
    started: dict[tuple[str, int], int] = {}
    ended: dict[tuple[str, int], int] = {}
    for c in records:
        key = (c.record.get("task_id", ""), c.record.get("attempt", 0))
        if c.name == "TaskPlaced":
            placed.setdefault(key, c.record)
        elif c.name == "TaskStarted":
            started.setdefault(key, to_ms(c.record["occurred_at"]))
        elif c.name in ("TaskFinished", "TaskFailed"):
            ended.setdefault(key, to_ms(c.record["occurred_at"]))
    out: dict[str, Priced] = {}
    for key, placement in placed.items():
        if placement["job_id"] not in job_ids:
            continue
        assert key in started and key in ended, f"{key}: no start or end on {LIFECYCLE}"
        snapshot = snapshots[placement["node_id"]]
        held = rate_shares(allocation_of(placement), capacity_of(snapshot, [], catalogue), catalogue)
        tenant, job_terms = terms[placement["job_id"]]
        charge = Charge(key[0], key[1], placement["job_id"], tenant, placement["queue"])
        for window in windows(
            charge, held.allocation, started_ms=started[key], from_ms=started[key], to_ms=ended[key]
        ):
            # One-minute billing periods and minute windows: no period boundary falls inside a window.
            for c in rate(usage_from_record(usage_record(window)), job_terms, snapshot["region"], book):
                out[c.charge_id] = Priced(
                    c.usage_event_id or "",
                    c.device_class,
                    (to_ms(c.start), to_ms(c.end)),
                    c.cu_seconds,
                    c.unit_price,
                    c.amount,
                )
    return out


async def tenant_of(platform: Platform, job_id: str) -> str:
    """The tenant a job is charged to, from its JobSubmitted (the gRPC Job does not carry it)."""

    def submitted(records: list[Consumed]) -> bool:
        return any(c.name == "JobSubmitted" and c.record["job_id"] == job_id for c in records)

    records = await read_topics(platform.bootstrap, [JOBS], submitted, timeout=60)
    return next(
        str(c.record["tenant"]) for c in records if c.name == "JobSubmitted" and c.record["job_id"] == job_id
    )


async def billed(platform: Platform, tenant: str, job_ids: set[str]) -> list[Any]:
    charges = await platform.charges(tenant) or []
    return [c for c in charges if c.job_id in job_ids]


async def everything_on(bootstrap: str, topic: str, timeout: float = 10.0) -> list[Consumed]:
    """Every record of ``topic`` at the time of asking: read until, once records came, three polls in a
    row bring nothing more (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    async with TopicReader(bootstrap, topic) as reader:
        quiet, count = 0, 0
        while (count == 0 or quiet < 3) and time.monotonic() < deadline:
            got = len(await reader.poll())
            quiet, count = (quiet + 1, count) if got == count else (0, got)
        return list(reader.records)


async def assert_charged_as_without_faults(
    platform: Platform,
    jobs: Sequence[pb.Job],
    fenced: Sequence[pb.Job] = (),
    earlier: Sequence[Consumed] = (),
) -> None:
    """Every job final and succeeded, each task run once without overlap, and billing holding exactly the
    reference charges (polled until they are all in, then compared whole).

    A task of a ``fenced`` job may have run more than once: every attempt but its last stopped by its
    agent's self-fence (cut off from the broker that long), never two at a time, each billed for what it
    ran; the reference covers every attempt. ``earlier``: the facts a broker held before it restarted
    empty, read then (the reference needs them; the new broker has only what came after).
    """
    jobs = [*jobs, *fenced]
    final = await platform.wait_final([j.id for j in jobs], timeout=150)
    assert {j.id: pb.JobState.Name(j.state) for j in final.values()} == {
        j.id: "JOB_STATE_SUCCEEDED" for j in jobs
    }
    job_ids = {j.id for j in jobs}
    task_ids = {t.task_id for j in final.values() for t in j.tasks}

    def complete(records: list[Consumed]) -> bool:
        return task_ids <= {c.record["task_id"] for c in records if c.name == "TaskFinished"} and job_ids <= {
            c.record["job_id"] for c in records if c.name == "JobSubmitted"
        }

    def complete_with_earlier(records: list[Consumed]) -> bool:
        return complete([*earlier, *records])

    records = distinct(
        [*earlier, *await read_topics(platform.bootstrap, FACTS, complete_with_earlier, timeout=60)]
    )
    fenced_tasks = {t.task_id for j in fenced for t in final[j.id].tasks}
    assert_placed_once([c for c in records if c.topic == PLACEMENTS], task_ids - fenced_tasks)
    for c in records:
        if c.name == "TaskFailed" and c.record["task_id"] in task_ids:
            assert c.record["task_id"] in fenced_tasks, c.record
            assert (c.record["kind"], c.record["reason"].split(":")[0]) == ("KILLED", "self-fenced"), c.record
    assert_no_overlapping_attempts(
        [c for c in records if c.topic == LIFECYCLE], [c for c in records if c.topic == SNAPSHOTS]
    )
    expected = reference_charges(records, job_ids, platform.stack)
    (tenant,) = {
        c.record["tenant"] for c in records if c.name == "JobSubmitted" and c.record["job_id"] in job_ids
    }

    last: list[Any] = []

    async def all_billed() -> list[Any] | None:
        last[:] = await billed(platform, tenant, job_ids)
        return list(last) if {c.charge_id for c in last} >= set(expected) else None

    try:
        charges = await until(all_billed, 120, f"the {len(expected)} reference charges billed", every=1.0)
    except AssertionError as exc:
        # Late or different: the missing reference windows and what was billed instead tell which.
        have = {c.charge_id: c for c in last}
        missing = {
            i: (p.usage_event_id, p.device_class, p.window) for i, p in expected.items() if i not in have
        }
        extra = [
            (c.usage_event_id, c.device_class, c.window_start.ToMilliseconds(), c.window_end.ToMilliseconds())
            for i, c in have.items()
            if i not in expected
        ]
        # Never metered, or metered and not billed: whether each missing window reached usage.metered.
        metered = {c.record.get("event_id") for c in await everything_on(platform.bootstrap, USAGE)}
        lost = sorted({u for u, _, _ in missing.values() if u in metered})
        raise AssertionError(
            f"{exc}: {len(missing)} missing {missing}; billed instead {extra};"
            f" of the missing, on {USAGE} (so lost in billing, not metering): {lost}"
        ) from None
    # Exactly once: no charge id twice, nothing beyond the reference, nothing reversed or re-billed.
    assert [i for i, n in Counter(c.charge_id for c in charges).items() if n > 1] == []
    assert [(c.charge_id, c.reverses_charge_id) for c in charges if c.reverses_charge_id] == []
    got = {
        c.charge_id: Priced(
            c.usage_event_id,
            c.device_class,
            (c.window_start.ToMilliseconds(), c.window_end.ToMilliseconds()),
            Decimal(c.cu_seconds),
            Decimal(c.unit_price),
            Decimal(c.amount),
        )
        for c in charges
    }
    assert got == expected
    per_window = Counter((p.usage_event_id, p.device_class) for p in got.values())
    assert set(per_window.values()) == {1}
    assert await dead_letters(platform.bootstrap, ignore=flood_letter) == {}


# -- metering and billing SIGKILLed -----------------------------------------------------------------


async def test_metering_and_billing_killed_mid_run_bill_exactly_what_a_fault_free_run_bills(
    platform: Platform,
) -> None:
    token = secrets.token_hex(3)
    # Running across metering's crash: their start is in its lost state, their end comes after it.
    across = await submit_all(platform, "across", token, 4, duration_s=12.0)
    await until(lambda: all_running(platform, across), 60, "the first jobs running")
    killed_at = time.time()
    await asyncio.to_thread(platform.crash_and_restart, "metering")
    # Placed, run and ended while metering rebuilds its tables from their changelogs.
    during = await submit_all(platform, "rebuild", token, 4, duration_s=3.0)
    tenant = await tenant_of(platform, across[0].id)

    async def some_billed() -> bool:
        return bool(await billed(platform, tenant, {j.id for j in across}))

    # Billing killed once usage flows again, while the rest of it is still arriving.
    await until(some_billed, 90, "the first usage billed after metering's restart", every=0.5)
    await asyncio.to_thread(platform.crash_and_restart, "billing")
    after = await submit_all(platform, "after", token, 4, duration_s=3.0)
    await assert_charged_as_without_faults(platform, [*across, *during, *after])

    # Metering's views came back whole: no node was called LOST on the way, and every service is up.
    assert await lost_since(platform, killed_at) == []
    assert platform.stack.supervisor.failed() == []


async def lost_since(platform: Platform, since: float) -> list[dict[str, Any]]:
    """The nodes declared LOST on ``nodes.status`` at or after ``since`` (wall clock, s)."""
    status = await read_topics(
        platform.bootstrap, [topic_name(topics.NODES_STATUS.name)], lambda _: True, timeout=10
    )
    lost = [c.record for c in status if c.record.get("status") == "LOST"]
    return [r for r in lost if r["occurred_at"].timestamp() >= since]


# -- the broker unavailable -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outage_s",
    [
        pytest.param(25.0, id="25s"),
        # The issue's two minutes: past the agents' self-fence, so the long job is killed and rerun.
        pytest.param(120.0, id="2min", marks=[pytest.mark.slow, pytest.mark.timeout(600)]),
    ],
)
async def test_jobs_submitted_while_the_broker_is_paused_are_delivered_once(
    platform: Platform, outage_s: float
) -> None:
    broker = platform.stack.broker
    assert broker is not None and broker.pid is not None
    token = secrets.token_hex(3)
    # Running when the broker stops and ending while it is away, before the agents' self-fence: their
    # ends wait in the agents. One more runs on: should the outage outlast the agents' self-fence (they
    # stop what they can no longer account for, docs/sensing.md) it is killed and runs again after.
    running = await submit_all(platform, "paused", token, 4, duration_s=8.0)
    across = await submit_all(
        platform, "through", token, 1, duration_s=min(outage_s + 10, 40.0), max_retries=1
    )
    await until(lambda: all_running(platform, [*running, *across]), 60, "jobs running before the outage")

    # SIGSTOP: every connection stays open and nothing answers (a hung broker, or a partition); it keeps
    # what it stored, unlike a restart of this memory-only broker (ARCHITECTURE §3).
    os.kill(broker.pid, signal.SIGSTOP)
    paused_at, paused_wall = time.monotonic(), time.time()
    try:
        # Accepted while the broker is away: the scheduler writes them to PostgreSQL and its outbox.
        during = await submit_all(platform, "outage", token, 4, duration_s=2.0)
        accepted_s = time.monotonic() - paused_at
        await asyncio.sleep(max(0.0, outage_s - accepted_s))  # the outage itself, not a wait for an outcome
    finally:
        os.kill(broker.pid, signal.SIGCONT)
    assert accepted_s < outage_s, f"submissions took {accepted_s:.1f}s, longer than the outage"
    print(f"broker paused {outage_s:.0f}s: 4 submissions accepted within {accepted_s:.2f}s of the pause")
    await assert_charged_as_without_faults(platform, [*running, *during], fenced=across)
    # Metering heard no snapshot while the broker was away, nor did it hear the broker: no node is lost.
    assert await lost_since(platform, paused_wall) == []
    assert platform.stack.supervisor.failed() == []


# -- 10,000 malformed records -----------------------------------------------------------------------


# Every input topic, and who consumes it through the bus (dead-lettering what it cannot read). Routing's
# compacted readers of capacity.nodes and network.links count undecodable records instead (every instance
# reads every record, docs/routing.md), so they add no dead letters.
READERS: dict[str, tuple[str, ...]] = {
    "node.snapshots": ("suanli-metering", "scheduling-view"),
    "tasks.lifecycle": ("suanli-metering", "scheduling", "serving"),
    "placements": ("suanli-metering", "sensing-fleet", "serving"),
    "usage.samples": ("suanli-metering",),
    "jobs.events": ("suanli-metering", "billing", "serving"),
    "jobs.replies": ("serving",),
    # Replicas' load reports: every serving and routing instance keeps the whole view in a group of its own.
    "services.load": ("serving-load", "suanli-routing-load"),
    "capacity.nodes": ("scheduling-view", "billing"),
    "nodes.status": ("scheduling-view",),
    "network.links": ("scheduling-view",),
    "usage.metered": ("billing",),
    "links.measured": ("suanli-routing",),
    "jobs.commands": ("scheduling-commands",),
}
# The default run floods 1,000 records (2 of them oversize) to keep the suite in its time budget; the
# issue's 10,000 (20 oversize) run with `-m slow` and are the figures in BENCHMARKS.md.
FLOODS = [
    pytest.param(1_000, id="1000"),
    pytest.param(10_000, id="10000", marks=[pytest.mark.slow, pytest.mark.timeout(600)]),
]
OVERSIZE_EVERY = 500  # 1.5 MiB each, over Kafka's default 1 MiB message limit
KINDS = ("undecodable", "unknown-schema", "bad-field", "trailing", "truncated")


def reader_kind(consumer: str) -> str:
    """A consumer group without its instance suffix (`scheduling-view-<host>-<pid>` → `scheduling-view`)."""
    for kind in sorted({r for readers in READERS.values() for r in readers}, key=len, reverse=True):
        if consumer == kind or consumer.startswith(f"{kind}-"):
            return kind
    return consumer


def _valid(topic: str) -> bytes:
    """A valid encoding of the first event catalogued on ``topic``, its first string field marked."""
    name = next(n for n, spec in contracts.EVENTS.items() if spec.topic == topic)
    record = sample_records(contracts.default_registry().current(name))[0]
    record["event_id"] = "\x01" * 24
    return contracts.encode(name, record)


def malformed(i: int, topic: str, valid: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Record ``i`` of the flood: its value and headers (none, lying ones, or non-UTF-8 ones)."""
    kind = KINDS[i % len(KINDS)]
    tag = f"{topic} {i}".encode()
    if kind == "undecodable":
        value = secrets.token_bytes(16) + tag
    elif kind == "unknown-schema":
        value = MAGIC + secrets.token_bytes(8) + valid[HEADER_SIZE:]
    elif kind == "bad-field":
        value = valid.replace(b"\x01" * 24, b"\xff" * 24)  # a string field that is not UTF-8
    elif kind == "trailing":
        value = valid + tag
    else:
        value = valid[: len(valid) // 2]
    if i % OVERSIZE_EVERY == 0:
        value = schema_header(contracts.default_registry().current(_event_on(topic))) + b"\x00" * (3 << 19)
    headers = [
        [],
        [(h.EVENT_NAME, b"NodeSnapshot"), (h.EVENT_ID, tag), ("traceparent", b"00-not-a-trace-01")],
        [(h.EVENT_ID, b"\xff\xfe"), ("traceparent", b"\xc3\x28")],
    ][i % 3]
    return value, headers


def _event_on(topic: str) -> str:
    return next(n for n, spec in contracts.EVENTS.items() if spec.topic == topic)


async def real_job_latency(platform: Platform, name: str) -> dict[str, float]:
    """Seconds from SubmitJob to RUNNING, to SUCCEEDED and to its first charge, for one 1 s job."""
    begun = time.monotonic()
    job = await platform.submit(job_spec(name, gpu_task("w", duration_s=1.0)), name, timeout=60)
    marks: dict[str, float] = {"accepted": time.monotonic() - begun}
    tenant = ""

    async def reached() -> bool:
        nonlocal tenant
        got = await platform.get_job(job.id)
        if got is not None and got.state in (pb.JOB_STATE_RUNNING, pb.JOB_STATE_SUCCEEDED):
            marks.setdefault("running", time.monotonic() - begun)
        if got is not None and got.state == pb.JOB_STATE_SUCCEEDED:
            marks.setdefault("succeeded", time.monotonic() - begun)
            tenant = tenant or await tenant_of(platform, job.id)
            return bool(await billed(platform, tenant, {job.id}))
        assert got is None or got.state not in (pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED), got
        return False

    await until(reached, 180, f"{name} placed, run and charged", every=0.1)
    marks["charged"] = time.monotonic() - begun
    return marks


@pytest.mark.parametrize("flood", FLOODS)
async def test_malformed_records_are_dead_lettered_while_real_work_is_served(
    platform: Platform, flood: int
) -> None:
    token = secrets.token_hex(3)
    quiet = await real_job_latency(platform, f"quiet-{token}")
    names = {t: topic_name(t) for t in READERS}
    valid = {t: _valid(t) for t in READERS}
    sent: dict[str, dict[bytes, bytes]] = defaultdict(dict)  # topic -> key -> value
    records = []
    for i in range(flood):
        topic = list(READERS)[i % len(READERS)]
        value, headers = malformed(i, topic, valid[topic])
        key = FLOOD_KEY + f"{token}-{i}".encode()
        sent[names[topic]][key] = value
        records.append(OutgoingRecord(names[topic], key, value, headers))

    begun = time.monotonic()
    async with EventPublisher(
        platform.bootstrap, settings=ProducerSettings(linger_ms=20, max_request_size=4 << 20)
    ) as bus:
        flooding = asyncio.create_task(bus.publish_many(records))
        # The real work: submitted while the flood is written and its dead letters are, measured end to end.
        loaded = await real_job_latency(platform, f"flooded-{token}")
        await flooding
    published_s = time.monotonic() - begun

    dlqs = [f"{t}.dlq" for t in sent]
    by_reader: dict[tuple[str, str], set[bytes]] = defaultdict(set)
    async with TopicReader(platform.bootstrap, *dlqs) as reader:

        async def all_dead_lettered() -> bool:
            by_reader.clear()
            for c in await reader.poll():
                if flood_letter(c):
                    by_reader[
                        (
                            c.headers[h.DLQ_ORIGINAL_TOPIC].decode(),
                            reader_kind(c.headers[h.DLQ_CONSUMER].decode()),
                        )
                    ].add(c.key or b"")
            return all(
                len(by_reader[(names[t], r)]) >= len(sent[names[t]])
                for t, readers in READERS.items()
                for r in readers
            )

        await until(all_dead_lettered, 150, "every malformed record dead-lettered by each reader", every=1.0)
        drained_s = time.monotonic() - begun
        letters = [c for c in reader.records if flood_letter(c)]

    # One dead letter per record and reader, in the record's own topic's DLQ, value intact, reason given.
    per_reader = Counter(
        (c.topic, c.headers[h.DLQ_ORIGINAL_TOPIC].decode(), reader_kind(c.headers[h.DLQ_CONSUMER].decode()))
        for c in letters
    )
    assert per_reader == Counter(
        {
            (f"{names[t]}.dlq", names[t], r): len(sent[names[t]])
            for t, readers in READERS.items()
            for r in readers
        }
    )
    for c in letters:
        original = c.headers[h.DLQ_ORIGINAL_TOPIC].decode()
        assert c.value == sent[original][c.key or b""]
        assert (
            c.headers[h.DLQ_REASON] == b"decode"
            and c.headers[h.DLQ_ERROR_CLASS]
            and c.headers[h.DLQ_ERROR_MESSAGE]
        )
    assert platform.stack.supervisor.failed() == []
    after = await real_job_latency(platform, f"after-{token}")
    print(
        f"flood of {flood} malformed records over {len(READERS)} topics: published in {published_s:.1f}s, "
        f"{len(letters)} dead letters written within {drained_s:.1f}s; a 1 s job submit->running / "
        f"succeeded / charged: quiet {_marks(quiet)}, flooded {_marks(loaded)}, after {_marks(after)}"
    )
    # Generous: the real work is served during the flood, not after it (the figures are in BENCHMARKS.md).
    assert loaded["charged"] < 120


def _marks(marks: dict[str, float]) -> str:
    return " / ".join(f"{marks[k]:.2f}s" for k in ("running", "succeeded", "charged"))


# -- the broker restarted empty (last: every topic and committed offset is gone after it) --------------


async def test_after_the_broker_restarts_empty_jobs_are_billed_exactly_and_no_node_is_lost(
    platform: Platform,
) -> None:
    token = secrets.token_hex(3)
    stack = platform.stack
    assert stack.broker is not None
    port = stack.broker.port
    # Running across the restart: their placement and start are on the old broker only, and in metering's
    # tables (their changelogs are gone too); their ends and every job after it on the new broker.
    # Metering and billing hold positions far past the new broker's ends when it comes back (the
    # positions a stale commit would carry into it, docs/bus.md), and every service finds its topics
    # gone while work is in flight.
    across = await submit_all(platform, "across-restart", token, 4, duration_s=12.0)
    await until(lambda: all_running(platform, across), 60, "the jobs across the restart running")
    task_ids = {t.task_id for j in across for t in (await platform.get_job(j.id) or j).tasks}

    def started(records: list[Consumed]) -> bool:
        return task_ids <= {c.record["task_id"] for c in records if c.name == "TaskStarted"}

    earlier = distinct(await read_topics(platform.bootstrap, FACTS, started, timeout=60))
    stopped_at = time.time()
    await asyncio.to_thread(stack.broker.stop)
    stack.broker = BrokerProcess(log_path=platform.home / "logs" / "tansu-restarted.log", port=port)
    await asyncio.to_thread(stack.broker.start)
    after = await submit_all(platform, "after-restart", token, 4, duration_s=2.0)
    await assert_charged_as_without_faults(platform, [*across, *after], earlier=earlier)
    assert await lost_since(platform, stopped_at) == []
    assert platform.stack.supervisor.failed() == []
