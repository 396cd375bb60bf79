"""Shared pieces of the end-to-end tests: a platform (Stack) per module, a gRPC client that follows the
leader, topic readers, deadline polling, and the device-accounting check over the placements topic.

Everything runs as real processes (Tansu, PostgreSQL, `suanli serve ...`, `suanli agent ...`); the tests
only talk to them the way clients and operators do: gRPC, Kafka topics, signals.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import os
import re
import secrets
import signal
import urllib.request
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from aiokafka import AIOKafkaConsumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from suanli.api.billing.v1 import billing_pb2 as bpb
from suanli.api.billing.v1 import billing_pb2_grpc as bpb_grpc
from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.cli.config import aio_bearer_channel
from suanli.contracts import decode
from suanli.data import data_path
from suanli.infra.polling import until
from suanli.infra.postgres import PostgresMode
from suanli.platform.stack import Stack, StackConfig
from suanli.platform.supervisor import RunningService, ServiceSpec, suanli_argv

T = TypeVar("T")

E2E_DIR = Path(__file__).resolve().parent
QUEUES = E2E_DIR / "queues.yaml"
QUEUE = "e2e"
SMALL_FLEET = data_path("deploy/fleets/small.yaml")
FINAL = (pb.JOB_STATE_SUCCEEDED, pb.JOB_STATE_FAILED, pb.JOB_STATE_CANCELLED)
END_EVENTS = ("TaskFinished", "TaskFailed")


def stack_config(home: Path, **overrides: Any) -> StackConfig:
    """A stack on the shared PostgreSQL when one listens on :5432 (fast), in a database of its own."""
    values: dict[str, Any] = {
        "home": home,
        "fleet": SMALL_FLEET,
        "queues": QUEUES,
        "pg_mode": PostgresMode.AUTO,
        "database": f"suanli_e2e_{secrets.token_hex(4)}",
        "snapshot_interval_s": 1.0,
        "scheduling_interval_s": 0.2,
        # No trace store unless a test asks for one (test_e2e_traces): exporting costs CPU on 2 cores.
        "traces": False,
    }
    return StackConfig(**(values | overrides))


@dataclass
class Platform:
    """A started Stack plus the address writes currently go to (the leader moves in the HA tests)."""

    stack: Stack
    scheduler_addr: str
    _channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return self.stack.bootstrap

    @property
    def home(self) -> Path:
        return self.stack.config.home

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = aio_bearer_channel(
                address, self.stack.admin_token, self.stack.ca
            )
        return channel

    def api(self, address: str | None = None) -> pb_grpc.SchedulerStub:
        return pb_grpc.SchedulerStub(self._channel(address or self.scheduler_addr))

    def billing(self) -> bpb_grpc.BillingStub:
        return bpb_grpc.BillingStub(self._channel(self.stack.billing_addr))

    async def charges(self, tenant: str) -> list[bpb.Charge] | None:
        """Every charge billing holds for ``tenant`` (all periods); None while billing does not answer."""
        out: list[bpb.Charge] = []
        token = ""
        while True:
            try:
                page = await self.billing().ListCharges(
                    bpb.ListChargesRequest(tenant=tenant, page_size=1000, page_token=token), timeout=5
                )
            except grpc.aio.AioRpcError as exc:
                # NOT_FOUND: billing has not heard of the tenant yet (its first job is still in flight).
                if exc.code() in (
                    grpc.StatusCode.UNAVAILABLE,
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    grpc.StatusCode.NOT_FOUND,
                ):
                    return None
                raise
            out.extend(page.charges)
            if not page.next_page_token:
                return out
            token = page.next_page_token

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()

    def start(self, spec: ServiceSpec) -> RunningService:
        return self.stack.supervisor.start(spec)

    def service(self, name: str) -> RunningService:
        return next(s for s in reversed(self.stack.supervisor.services) if s.spec.name == name)

    def log(self, name: str) -> str:
        return (self.home / "logs" / f"{name}.log").read_text(errors="replace")

    def kill(self, running: RunningService) -> None:
        """SIGKILL the service's whole process group: a crash, nothing gets to clean up."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.pid, signal.SIGKILL)
        running.process.wait(timeout=10)
        self.stack.supervisor.services.remove(running)

    def crash_and_restart(self, name: str) -> RunningService:
        """SIGKILL service ``name`` and start it again with the same command line (ready when it is)."""
        running = self.service(name)
        self.kill(running)
        return self.start(running.spec)

    def fleet_spec(self, name: str, fleet: Path) -> ServiceSpec:
        cfg = self.stack.config
        return ServiceSpec(
            name,
            suanli_argv(
                "agent",
                "--simulate",
                str(fleet),
                "--interval",
                str(cfg.snapshot_interval_s),
                "--sim-duration",
                str(cfg.sim_duration_s),
            ),
            env=self.stack.fencing_env(),
        )

    # -- gRPC -------------------------------------------------------------------------------------------

    async def submit(self, spec: pb.JobSpec, request_id: str, timeout: float = 60.0) -> pb.Job:
        """SubmitJob, retried with the same request id while no leader answers (idempotent by design)."""

        async def attempt() -> pb.Job | None:
            try:
                return (
                    await self.api().SubmitJob(
                        pb.SubmitJobRequest(spec=spec, request_id=request_id), timeout=5
                    )
                ).job
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    return None
                raise

        return await until(attempt, timeout, f"SubmitJob {request_id} accepted", every=0.3)

    async def get_job(self, job_id: str) -> pb.Job | None:
        try:
            return await self.api().GetJob(pb.GetJobRequest(job_id=job_id), timeout=5)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return None
            raise

    async def wait_final(self, job_ids: Iterable[str], timeout: float) -> dict[str, pb.Job]:
        """Every job in a final state (SUCCEEDED, FAILED or CANCELLED); their last GetJob answers."""
        pending = set(job_ids)
        done: dict[str, pb.Job] = {}

        async def probe() -> bool:
            for job_id in sorted(pending):
                job = await self.get_job(job_id)
                if job is not None and job.state in FINAL:
                    done[job_id] = job
                    pending.discard(job_id)
            return not pending

        try:
            await until(probe, timeout, "every job to reach a final state", every=0.5)
        except AssertionError:
            # Enough to tell a job the cycle never saw (no reason, no task placed) from one placed but
            # never started (tasks PLACED), and whose projection said so.
            states = {
                j: (
                    f"{pb.JobState.Name(x.state)} ({x.pending_reason.code}: {x.pending_reason.message})"
                    f" tasks {[(t.state, t.attempt, t.node_id, t.reason) for t in x.tasks]}"
                )
                for j in sorted(pending)
                if (x := await self.get_job(j))
            }
            raise AssertionError(
                f"jobs not final after {timeout:.0f}s (answered by {self.scheduler_addr}; leading by"
                f" their logs: {self.leaders() or 'none'}): {states}"
            ) from None
        return done

    def leaders(self) -> list[str]:
        """The running scheduler instances whose last election line says they lead, with the epoch."""
        out = []
        for running in self.stack.supervisor.services:
            name = running.spec.name
            if not name.startswith("scheduling"):
                continue
            terms = re.findall(r"elected leader \(epoch (\d+)|(stepped down as leader)", self.log(name))
            if terms and terms[-1][0]:
                out.append(f"{name} (epoch {terms[-1][0]})")
        return out

    async def ready_nodes(self, count: int, timeout: float = 60.0, region: str = "") -> list[pb.Node]:
        """Wait until ``count`` nodes are READY in the scheduler's view (with their devices known)."""

        async def probe() -> list[pb.Node] | None:
            try:
                nodes = (
                    await self.api().ListNodes(pb.ListNodesRequest(region=region, page_size=500), timeout=5)
                ).nodes
            except grpc.aio.AioRpcError:
                return None
            ready = [n for n in nodes if n.status == "READY"]
            return ready if len(ready) >= count else None

        return await until(probe, timeout, f"{count} READY nodes")


@contextlib.asynccontextmanager
async def ready_platform(stack: Stack, nodes: int, timeout: float = 90.0) -> AsyncIterator[Platform]:
    """The module's `Platform` once ``nodes`` nodes are READY in the scheduler's view; closed after."""
    platform = Platform(stack, stack.scheduler_addr)
    await platform.ready_nodes(nodes, timeout=timeout)
    try:
        yield platform
    finally:
        await platform.close()


def gpu_task(
    name: str,
    *,
    replicas: int = 1,
    gpu_milli: int = 1000,
    duration_s: float = 2.0,
    gpu_models: Sequence[str] = (),
    regions: Sequence[str] = (),
) -> pb.TaskSpec:
    return pb.TaskSpec(
        name=name,
        replicas=replicas,
        command="python train.py",
        duration_s=duration_s,
        resources=pb.ResourceRequest(
            cpu_milli=1000,
            memory_mib=2048,
            gpu_count=1,
            gpu_milli=gpu_milli,
            gpu_models=list(gpu_models),
            regions=list(regions),
        ),
    )


def job_spec(name: str, *tasks: pb.TaskSpec, max_retries: int = 0) -> pb.JobSpec:
    return pb.JobSpec(
        name=name, queue=QUEUE, priority_class="batch", tasks=list(tasks), max_retries=max_retries
    )


# -- topics ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Consumed:
    topic: str
    offset: int
    name: str
    record: dict[str, Any]
    headers: dict[str, bytes]
    value: bytes
    partition: int = 0
    key: bytes | None = None


class TopicReader:
    """Reads topics from the beginning with no consumer group, decoding what decodes."""

    def __init__(self, bootstrap: str, *topics: str) -> None:
        self._consumer = AIOKafkaConsumer(
            *topics,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            fetch_max_wait_ms=100,
        )
        self.records: list[Consumed] = []

    async def __aenter__(self) -> TopicReader:
        await self._consumer.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    async def poll(self) -> list[Consumed]:
        batches = await self._consumer.getmany(timeout_ms=200)
        for records in batches.values():
            for r in records:
                try:
                    name, record = decode(r.value)
                except Exception:
                    name, record = "<undecodable>", {}
                headers = {k: v for k, v in r.headers or ()}
                self.records.append(
                    Consumed(r.topic, r.offset, name, record, headers, r.value, r.partition, r.key)
                )
        return self.records

    async def wait_for(
        self, match: Callable[[Consumed], bool], count: int = 1, timeout: float = 30.0, what: str = "records"
    ) -> list[Consumed]:
        async def probe() -> list[Consumed] | None:
            found = [c for c in await self.poll() if match(c)]
            return found if len(found) >= count else None

        return await until(probe, timeout, f"{count} x {what}", every=0.05)

    def named(self, *names: str) -> list[Consumed]:
        return [c for c in self.records if c.name in names]


async def read_topics(
    bootstrap: str, topics: Sequence[str], done: Callable[[list[Consumed]], bool], timeout: float = 30.0
) -> list[Consumed]:
    """Everything on ``topics`` from the start, read until ``done`` holds for what was read."""
    async with TopicReader(bootstrap, *topics) as reader:
        await until(lambda: _holds(reader, done), timeout, f"records on {', '.join(topics)}", every=0.05)
        return list(reader.records)


async def _holds(reader: TopicReader, done: Callable[[list[Consumed]], bool]) -> bool:
    return done(await reader.poll())


# -- accounting -------------------------------------------------------------------------------------------


def _ms(value: Any) -> float:
    return value.timestamp() if isinstance(value, dt.datetime) else float(value) / 1000.0


def over_allocations(
    placements: Sequence[Consumed], lifecycle: Sequence[Consumed], statuses: Sequence[Consumed] = ()
) -> list[str]:
    """Devices booked past 1000 milli by tasks live at the same time; [] when there are none.

    A (task, attempt) holds its devices from its TaskPlaced until its end: the agent's TaskFinished or
    TaskFailed on ``tasks.lifecycle``, or its node going LOST on ``nodes.status`` (the scheduler then ends
    it without an event on a topic). A TaskStopRequested or TaskPreempted frees nothing: the scheduler
    holds the room until the end is reported. Times are the events' occurred_at, all from this machine's
    clock; an end is always reported before the scheduler can hand its room to someone else.
    """
    placed: dict[tuple[str, int], dict[str, Any]] = {}
    for c in placements:
        if c.name == "TaskPlaced":
            # A re-sent placement (reconciliation) repeats the same node and devices: keep the first.
            placed.setdefault((c.record["task_id"], c.record["attempt"]), c.record)
    ends: dict[tuple[str, int], float] = {}
    for c in lifecycle:
        if c.name in END_EVENTS:
            key = (c.record["task_id"], c.record["attempt"])
            ends[key] = min(ends.get(key, float("inf")), _ms(c.record["occurred_at"]))
    lost: dict[str, list[float]] = defaultdict(list)
    for c in statuses:
        if c.name == "NodeStatusChanged" and c.record.get("status") == "LOST":
            lost[c.record["node_id"]].append(_ms(c.record["occurred_at"]))

    intervals: dict[tuple[str, int], list[tuple[float, float, int, str]]] = defaultdict(list)
    for key, r in placed.items():
        start = _ms(r["occurred_at"])
        end = min([ends.get(key, float("inf")), *(t for t in lost[r["node_id"]] if t >= start)])
        for d in r["devices"]:
            intervals[(r["node_id"], d["index"])].append((start, end, d["milli"], f"{key[0]}#{key[1]}"))

    problems = []
    for device, spans in intervals.items():
        for start, _end, _milli, _who in spans:
            live = [(m, w) for s, e, m, w in spans if s <= start < e]
            total = sum(m for m, _ in live)
            if total > 1000:
                problems.append(f"{device}: {total} milli at {start:.3f} by {sorted(w for _, w in live)}")
    return problems


def placements_by_task_attempt(placements: Sequence[Consumed]) -> dict[tuple[str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for c in placements:
        if c.name == "TaskPlaced":
            out[(c.record["task_id"], c.record["attempt"])].append(c.record)
    return out


def where(record: dict[str, Any]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """A placement's node and devices: two TaskPlaced of one (task, attempt) must agree on it."""
    return record["node_id"], tuple((d["index"], d["milli"]) for d in record["devices"])


def assert_placed_once(placements: list[Consumed], task_ids: set[str]) -> None:
    """Each task has one attempt, and every TaskPlaced of it names the same node and devices (a re-send
    by reconciliation repeats the placement; it never moves or doubles it)."""
    by_key = placements_by_task_attempt(placements)
    attempts: dict[str, set[int]] = defaultdict(set)
    for (task_id, attempt), records in by_key.items():
        if task_id in task_ids:
            attempts[task_id].add(attempt)
            assert len({where(r) for r in records}) == 1, f"{task_id}#{attempt} placed twice: {records}"
    assert {t: sorted(a) for t, a in attempts.items()} == {t: [1] for t in task_ids}


# Labels the OpenTelemetry exporter adds to every sample, on top of the instrument's own.
SCOPE_LABELS = frozenset({"otel_scope_name", "otel_scope_version", "otel_scope_schema_url"})

Served = dict[str, set[frozenset[str]]]


def scrape(url: str, timeout: float = 5.0) -> Served:
    """One GET of a /metrics endpoint: each sample name and the label-name sets it is served with (the
    exporter's scope labels and a histogram's ``le`` left out)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    served: Served = defaultdict(set)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            served[sample.name].add(frozenset(sample.labels) - SCOPE_LABELS - {"le"})
    return dict(served)


# -- outcomes shared by the fault tests ------------------------------------------------------------------


async def dead_letters(
    bootstrap: str, ignore: Callable[[Consumed], bool] = lambda _: False
) -> dict[str, int]:
    """Every dead-letter topic that holds records ``ignore`` does not pass, with how many.

    Read to the end offsets: on Tansu these are short when a batch holds several records (ARCHITECTURE
    §3), so what lies past the last batch's first record is read by a last poll after them.
    """
    probe = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await probe.start()
    try:
        dlqs = sorted(t for t in await probe.topics() if t.endswith(".dlq"))
        ends = await probe.end_offsets(
            [TopicPartition(t, p) for t in dlqs for p in probe.partitions_for_topic(t) or ()]
        )
    finally:
        await probe.stop()
    wanted = {tp: end for tp, end in ends.items() if end > 0}
    if not wanted:
        return {}
    async with TopicReader(bootstrap, *sorted({tp.topic for tp in wanted})) as reader:

        async def read_to_the_end() -> bool:
            seen: dict[TopicPartition, int] = defaultdict(lambda: -1)
            for c in await reader.poll():
                tp = TopicPartition(c.topic, c.partition)
                seen[tp] = max(seen[tp], c.offset)
            return all(seen[tp] >= end - 1 for tp, end in wanted.items())

        await until(read_to_the_end, 120, "every dead-letter topic read to its end", every=0.05)
        await reader.poll()
        held: dict[str, int] = defaultdict(int)
        for c in reader.records:
            if not ignore(c):
                held[c.topic] += 1
        return dict(held)


def distinct(records: Iterable[Consumed]) -> list[Consumed]:
    """``records`` with repeats of one event (same event id: a producer's re-send after an acknowledgement
    it never got, at-least-once delivery) kept once, in their first place."""
    seen: set[tuple[str, str]] = set()
    out = []
    for c in records:
        key = (c.topic, str(c.record.get("event_id", f"{c.partition}@{c.offset}")))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def assert_no_overlapping_attempts(lifecycle: list[Consumed], snapshots: list[Consumed]) -> None:
    """Per task, the attempts' [started, ended] spans never overlap, and an attempt starts at most once.

    An attempt has ended at its TaskFinished/TaskFailed, or at the first snapshot of its node after its
    start that no longer lists the task (snapshots are full state: the node no longer holds it).
    """
    starts: dict[tuple[str, int], list[Consumed]] = defaultdict(list)
    ends: dict[tuple[str, int], float] = {}
    for c in lifecycle:
        key = (c.record.get("task_id"), c.record.get("attempt"))
        if c.name == "TaskStarted":
            starts[key].append(c)
        elif c.name in ("TaskFinished", "TaskFailed"):
            ends[key] = min(ends.get(key, float("inf")), c.record["occurred_at"].timestamp())
    by_node: dict[str, list[tuple[float, set[str]]]] = defaultdict(list)
    for c in snapshots:
        if c.name == "NodeSnapshot":
            at = c.record["occurred_at"].timestamp()
            by_node[c.record["node_id"]].append((at, set(c.record["task_ids"])))
    by_task: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for (task_id, attempt), started in starts.items():
        assert len(started) == 1, f"{task_id}#{attempt} started {len(started)} times"
        record = started[0].record
        begin = record["occurred_at"].timestamp()
        gone = min(
            (t for t, ids in by_node[record["node_id"]] if t > begin and task_id not in ids),
            default=float("inf"),
        )
        by_task[task_id].append((begin, min(ends.get((task_id, attempt), float("inf")), gone)))
    for task_id, spans in by_task.items():
        spans.sort()
        for (_, end), (begin, _) in itertools.pairwise(spans):
            assert begin >= end, f"{task_id}: two attempts ran at once: " + "; ".join(
                f"{c.name}#{c.record.get('attempt')}@{c.record.get('node_id')} "
                f"{c.record['occurred_at'].time()} {c.record.get('reason', '')}"
                for c in lifecycle
                if c.record.get("task_id") == task_id
            )
