"""Shared pieces of the end-to-end tests: a platform (Stack) per module, a gRPC client that follows the
leader, topic readers, deadline polling, and the device-accounting check over the placements topic.

Everything runs as real processes (Tansu, PostgreSQL, `suanli serve ...`, `suanli agent ...`); the tests
only talk to them the way clients and operators do: gRPC, Kafka topics, signals.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import signal
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from aiokafka import AIOKafkaConsumer
from prometheus_client.parser import text_string_to_metric_families

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

    def api(self, address: str | None = None) -> pb_grpc.SchedulerStub:
        address = address or self.scheduler_addr
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = aio_bearer_channel(
                address, self.stack.admin_token, self.stack.ca
            )
        return pb_grpc.SchedulerStub(channel)

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
            states = {
                j: f"{pb.JobState.Name(x.state)} ({x.pending_reason.code}: {x.pending_reason.message})"
                for j in pending
                if (x := await self.get_job(j))
            }
            raise AssertionError(f"jobs not final after {timeout:.0f}s: {states}") from None
        return done

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
                self.records.append(Consumed(r.topic, r.offset, name, record, headers, r.value))
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
