"""What a scheduler standby costs to start on a store with a long history (issue 11, "Bounded state").

    .venv/bin/python bench/takeover.py [--jobs 1000000] [--recent 10000] [--active 1000] [--tail 200]
                                       [--max-finished N] [--full-replay] [--keep]

A throw-away schema is filled, in commit order, with:

1. queue configuration and one job that runs and succeeds, written by the real service layer
   (`assemble` over `PostgresEventStore`: SubmitJob, a cycle that places it, TaskStarted and TaskFinished
   reports, the JobSucceeded that follows) — the template;
2. ``--jobs`` finished jobs spread over the 29 days after it, then ``--recent`` finished in the last
   hour: each a copy of the template's rows (same event names, versions, metadata keys, Avro encoder)
   with its own job and task ids (the id a request_id ``bench-<n>`` gets), event ids, ``seq`` and
   times, bulk-loaded with COPY (the real path would take hours);
3. ``--active`` jobs submitted by the real service layer that stay PENDING (no room for them);
4. a snapshot of the projection, written as the leader writes it (`Snapshotter`), under the default
   retention (the settings' defaults): it holds the active and the recent jobs;
5. ``--tail`` more submissions after the snapshot, which a starting scheduler folds from the store.

Then a new process runs the scheduler's own `bootstrap` (connect and migrate, load the latest snapshot,
fold the tail, load pending reasons: everything a standby does before it can take the lead) and reports
the time from process start to ready, the time of `bootstrap` alone and its resident memory. With
``--full-replay`` the same is measured with the snapshots hidden (a fold from position 0). The outbox
rows of the copied jobs are not written: published rows are pruned (bench/pruning.py) and a start never
reads the outbox. PostgreSQL: the one on 127.0.0.1:5432 if it answers, else an embedded one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from suanli.clock import ManualClock, uuid4_factory
from suanli.contracts import encode, new_envelope
from suanli.eventstore import PostgresEventStore, PostgresSnapshots, StoredEvent
from suanli.infra.testing import PostgresMode, resolve_postgres
from suanli.scheduling.adapters.framework_placer import DEFAULT_TYPICAL, FrameworkPlacer
from suanli.scheduling.adapters.pending import PostgresPendingReasons
from suanli.scheduling.adapters.store import StoreWriter, Unfenced
from suanli.scheduling.domain.jobs import AcceptedSpec, AcceptedTask, Phase
from suanli.scheduling.domain.queueing import PriorityClass, QueueSpec, ResourceQuota
from suanli.scheduling.entrypoints.settings import SchedulingSettings
from suanli.scheduling.service_layer.assembly import Scheduling, assemble
from suanli.scheduling.service_layer.capacity import CapacityView
from suanli.scheduling.service_layer.commands import RecordTaskReport, SeedQueues, SubmitJob
from suanli.scheduling.service_layer.job_commands import job_id_for
from suanli.scheduling.service_layer.projection import (
    Projection,
    Retention,
    decode_payload,
    fold_job,
    job_stream,
)
from suanli.scheduling.service_layer.projection_snapshot import Snapshotter
from suanli.scheduling.service_layer.queues_config import QueueConfig

SCHEMA = "bench_takeover"
TENANT = "acme"
HISTORY = timedelta(days=29)
COPY_BATCH = 50_000
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
TEMPLATE_REQUEST = "bench-template"  # as long as the copies' bench-<8 digits>
COLUMNS = ("stream", "version", "event_id", "event_name", "payload", "metadata", "recorded_at")

Row = tuple[str, int, uuid.UUID, str, bytes, str, datetime]


def _spec(request_id: str) -> AcceptedSpec:
    task = AcceptedTask("", "worker", cpu_milli=4000, memory_mib=16384, gpu_count=1, argv=("train.py",))
    return AcceptedSpec(name="train", queue=TENANT, tasks=(task,), min_available=1, request_id=request_id)


def _service(writer: StoreWriter, clock: ManualClock, retention: Retention) -> tuple[Scheduling, Projection]:
    """The service layer as `bootstrap` wires it (one node with one A100) over ``writer``, under
    ``retention``."""
    projection, capacity = Projection(retention), CapacityView(clock)
    capacity.on_capacity(
        {
            "node_id": "n1",
            "region": "r",
            "zone": "z",
            "site": "s",
            "allocatable": {"cpu_milli": 64000, "memory_mib": 262144},
            "devices": [{"index": 0, "model": "A100", "memory_total_mib": 81920}],
        }
    )
    scheduler = assemble(
        writer,
        projection,
        capacity,
        lambda requests, cycle: FrameworkPlacer.for_policy("fgdb", DEFAULT_TYPICAL),
        clock=clock,
        ids=uuid4_factory,
    )
    return scheduler, projection


def _report(
    name: str, projection: Projection, job_id: str, clock: ManualClock, **extra: Any
) -> RecordTaskReport:
    task = projection.jobs[job_id].tasks[0]
    at = {"event_id": uuid.uuid4(), "occurred_at": clock.now()}
    report = {"task_id": task.task_id, "job_id": job_id, "node_id": task.node_id, "attempt": task.attempt}
    record = {**new_envelope("agent/n1", task.task_id, **at), **report, **extra}
    return RecordTaskReport(name, record, record["event_id"])


async def run_template(scheduler: Scheduling, projection: Projection, clock: ManualClock) -> str:
    """One job through the real path: submitted, placed, started, finished (the JobSucceeded follows)."""
    quota = (ResourceQuota("gpu:A100", 1000),)
    await scheduler.commands.handle(
        SeedQueues(QueueConfig((QueueSpec(TENANT, quota),), (PriorityClass("high", 10),)))
    )
    job = await scheduler.commands.handle(SubmitJob(_spec(TEMPLATE_REQUEST)))
    clock.advance(timedelta(seconds=1))
    await scheduler.cycles.run()
    clock.advance(timedelta(seconds=2))
    await scheduler.commands.handle(
        _report("TaskStarted", projection, job.id, clock, device_indices=[0], pid=4242)
    )
    clock.advance(timedelta(seconds=2))
    await scheduler.commands.handle(_report("TaskFinished", projection, job.id, clock, exit_code=0))
    assert projection.jobs[job.id].phase is Phase.SUCCEEDED
    return str(job.id)


def _swap(value: Any, old_id: str, new_id: str, ids: dict[str, str], shift: timedelta) -> Any:
    """``value`` with the template's job id (in job and task ids) and event ids replaced, times shifted."""
    if isinstance(value, str):
        return ids.get(value) or value.replace(old_id, new_id)
    if isinstance(value, datetime):
        return value + shift
    if isinstance(value, dict):
        return {k: _swap(v, old_id, new_id, ids, shift) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old_id, new_id, ids, shift) for v in value]
    return value


def _times(value: Any) -> Iterator[datetime]:
    if isinstance(value, datetime):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _times(v)
    elif isinstance(value, list):
        for v in value:
            yield from _times(v)


def _micros(when: datetime | timedelta) -> int:
    span = when if isinstance(when, timedelta) else when - EPOCH
    return (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds


def _varint(value: int) -> bytes:
    """Avro's zig-zag varint of a long (how timestamp-millis and -micros are written)."""
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _places(payload: bytes, needle: bytes) -> list[int]:
    found, at = [], payload.find(needle)
    while at >= 0:
        found.append(at)
        at = payload.find(needle, at + 1)
    return found


class Stamp:
    """One template event's Avro payload and where a copy's values go in it: the job id's hex (in job
    and task ids), event ids, the request id (copies' have the template's length) and times (zig-zag
    varints, the same length within the bench's range). A copy is the payload with those bytes replaced;
    `copies` checks stamped payloads against the real encoder, byte for byte."""

    def __init__(
        self, event: StoredEvent, record: dict[str, Any], old_hex: str, event_ids: Sequence[str]
    ) -> None:
        self.payload = event.payload
        self.jobs = _places(event.payload, old_hex.encode())
        self.events = [(i, at) for i, e in enumerate(event_ids) for at in _places(event.payload, e.encode())]
        self.requests = _places(event.payload, TEMPLATE_REQUEST.encode())
        self.times: list[tuple[int, int, int]] = []  # (offset, value, scale)
        for when in set(_times(record)):
            micros = _micros(when)
            for scale in (1000, 1):
                for at in _places(event.payload, _varint(micros // scale)):
                    self.times.append((at, micros // scale, scale))

    def stamp(
        self, new_hex: bytes, event_ids: Sequence[bytes], request: bytes, shift_us: int
    ) -> bytes | None:
        out = bytearray(self.payload)
        for at in self.jobs:
            out[at : at + len(new_hex)] = new_hex
        for i, at in self.events:
            out[at : at + 36] = event_ids[i]
        for at in self.requests:
            out[at : at + len(request)] = request
        for at, value, scale in self.times:
            old, new = _varint(value), _varint(value + shift_us // scale)
            if len(new) != len(old):
                return None  # out of the template's varint width: the caller encodes it
            out[at : at + len(old)] = new
        return bytes(out)


def copies(
    template: Sequence[StoredEvent], first: int, count: int, start: datetime, step: timedelta
) -> Iterator[Row]:
    """``count`` copies of the template job, numbered from ``first``, the n-th begun at ``start + n *
    step``; each row is what the real writer would have written for that job (checked: the first copy
    and every 10,000th are also encoded by `suanli.contracts.encode` and must be byte-identical)."""
    old_id = template[0].stream[len("job-") :]
    records = [decode_payload(e) for e in template]
    template_ids = [str(e.event_id) for e in template]
    stamps = [
        Stamp(e, r, old_id.removeprefix("job-"), template_ids) for e, r in zip(template, records, strict=True)
    ]
    began = template[0].recorded_at
    step_ms = max(1, int(step / timedelta(milliseconds=1)))  # whole milliseconds, as Avro keeps times
    for n in range(first, first + count):
        request_id = f"bench-{n:08d}"
        new_id = job_id_for(TENANT, request_id, uuid4_factory)
        shift = start + timedelta(milliseconds=(n - first) * step_ms) - began
        shift_us = _micros(shift)
        new_ids = [str(uuid.uuid4()) for _ in template]
        encoded_ids = [i.encode() for i in new_ids]
        checked = n == first or n % 10_000 == 0
        for k, (event, record, stamp) in enumerate(zip(template, records, stamps, strict=True)):
            payload = stamp.stamp(
                new_id.removeprefix("job-").encode(), encoded_ids, request_id.encode(), shift_us
            )
            if payload is None or checked:
                ids = dict(zip(template_ids, new_ids, strict=True)) | {TEMPLATE_REQUEST: request_id}
                fields = _swap(record, old_id, new_id, ids, shift)
                real = encode(event.event_name, fields)
                if payload is not None and payload != real:
                    raise AssertionError(f"copy {n}: stamped {event.event_name} differs from the encoder's")
                payload = real
            metadata = dict(event.metadata)
            if "seq" in metadata:  # the template is number 1 in the queues' FIFO, its copies follow it
                metadata["seq"] = type(metadata["seq"])(int(metadata["seq"]) + 1 + n)
            yield (
                job_stream(new_id),
                event.version,
                uuid.UUID(new_ids[k]),
                event.event_name,
                payload,
                json.dumps(metadata),
                event.recorded_at + shift,
            )


async def bulk_copy(pool: asyncpg.Pool, rows: Iterator[Row]) -> int:
    total = 0
    async with pool.acquire() as conn:
        while True:
            batch = [row for _, row in zip(range(COPY_BATCH), rows, strict=False)]
            if not batch:
                return total
            await conn.copy_records_to_table("events", schema_name=SCHEMA, columns=COLUMNS, records=batch)
            total += len(batch)


def _settings(dsn: str, max_finished: int | None) -> SchedulingSettings:
    """The scheduler's default settings on the bench's schema; ``max_finished``: another cap of finished
    jobs kept (None: the default)."""
    return SchedulingSettings.load(
        {}, dsn=dsn, bootstrap="127.0.0.1:9", store_schema=SCHEMA, max_finished_jobs=max_finished
    )


async def fill(
    dsn: str, jobs: int, recent: int, active: int, tail: int, max_finished: int | None
) -> dict[str, Any]:
    now = datetime.now(UTC).replace(microsecond=0)
    origin = now - HISTORY - timedelta(days=1)
    clock = ManualClock(origin)
    admin = await asyncpg.connect(dsn)
    await admin.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    await admin.close()
    store = await PostgresEventStore.connect(dsn, schema=SCHEMA, clock=clock)
    figures: dict[str, Any] = {}
    try:
        settings = _settings(dsn, max_finished)
        writer = StoreWriter(store, PostgresPendingReasons(store.pool, store.schema), Unfenced())
        scheduler, projection = _service(writer, clock, settings.retention())
        await writer.setup()
        template_id = await run_template(scheduler, projection, clock)
        template = [e for e in await store.read(job_stream(template_id))]
        print(f"template job {template_id}: {[e.event_name for e in template]}", flush=True)

        began = time.perf_counter()
        step = HISTORY / max(jobs, 1)
        written = await bulk_copy(store.pool, copies(template, 0, jobs, origin + timedelta(minutes=1), step))
        written += await bulk_copy(
            store.pool,
            copies(
                template, jobs, recent, now - timedelta(minutes=50), timedelta(minutes=45) / max(recent, 1)
            ),
        )
        figures["copy_s"] = time.perf_counter() - began
        figures["rows"] = written + len(template)
        print(f"copied {written:,} rows ({jobs + recent:,} jobs) in {figures['copy_s']:.0f} s", flush=True)
        sample = job_id_for(TENANT, "bench-00000000", uuid4_factory)
        copied = fold_job(await store.read(job_stream(sample)))
        original = fold_job(template)
        assert copied is not None and original is not None
        assert (copied.phase, copied.version, copied.message) == (
            original.phase,
            original.version,
            original.message,
        )

        # The service's own projection folds the copies (as a leader's would) before its next decision.
        began = time.perf_counter()
        await scheduler.write_lock.refresh()
        figures["fold_in_process_s"] = time.perf_counter() - began
        clock.set(now)
        for n in range(active):
            await scheduler.commands.handle(SubmitJob(_spec(f"bench-active-{n}")))
        snapshots = PostgresSnapshots(store.pool, SCHEMA)
        began = time.perf_counter()
        await Snapshotter(projection, snapshots).take()
        figures["snapshot_write_s"] = time.perf_counter() - began
        figures["snapshot_jobs"] = len(projection.jobs)
        figures["snapshot_bytes"] = await store.pool.fetchval(
            f"SELECT octet_length(state) FROM {SCHEMA}.snapshots ORDER BY position DESC LIMIT 1"
        )
        for n in range(tail):
            await scheduler.commands.handle(SubmitJob(_spec(f"bench-tail-{n}")))
        figures["events"] = await store.pool.fetchval(f"SELECT count(*) FROM {SCHEMA}.events")
        figures["table_bytes"] = await store.pool.fetchval(
            f"SELECT pg_total_relation_size('{SCHEMA}.events')"
        )
        print(
            f"snapshot: {figures['snapshot_jobs']:,} jobs, {figures['snapshot_bytes']:,} bytes, written in "
            f"{figures['snapshot_write_s']:.2f} s (after a fold of the store in this process: "
            f"{figures['fold_in_process_s']:.0f} s)",
            flush=True,
        )
    finally:
        await store.close()
    return figures


def measure(dsn: str, max_finished: int | None) -> dict[str, Any]:
    """Start the scheduler's state in a new process, as a standby does; its figures."""
    cap = [] if max_finished is None else ["--max-finished", str(max_finished)]
    out = subprocess.run(
        [sys.executable, __file__, "--measure", dsn, *cap], check=True, capture_output=True, text=True
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def _child(dsn: str, max_finished: int | None) -> None:
    import resource

    import psutil

    from suanli.scheduling.bootstrap import bootstrap

    async def start() -> dict[str, Any]:
        settings = _settings(dsn, max_finished)
        began, cpu = time.perf_counter(), time.process_time()
        components = await bootstrap(settings)
        spent = time.perf_counter() - began
        projection = components.projection
        figures = {
            "bootstrap_s": spent,
            "bootstrap_cpu_s": time.process_time() - cpu,  # this process's share, whatever the load
            "ready_s": time.time() - psutil.Process().create_time(),
            "rss_mib": psutil.Process().memory_info().rss / 2**20,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "jobs_in_memory": len(projection.jobs),
            "position": projection.position,
        }
        await components.store.close()
        return figures

    print(json.dumps(asyncio.run(start())))


async def _hide_snapshots(dsn: str, hidden: bool) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        # Another format is what an upgraded reader sees: the snapshot is ignored and the store folded.
        if hidden:
            await conn.execute(f"UPDATE {SCHEMA}.snapshots SET format = 'hidden-' || format")
        else:
            await conn.execute(
                f"UPDATE {SCHEMA}.snapshots SET format = substr(format, 8) WHERE format LIKE 'hidden-%'"
            )
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--recent", type=int, default=10_000)
    parser.add_argument("--active", type=int, default=1_000)
    parser.add_argument("--tail", type=int, default=200)
    parser.add_argument("--full-replay", action="store_true", help="also start with the snapshots hidden")
    parser.add_argument("--keep", action="store_true", help="keep the schema (default: dropped at the end)")
    parser.add_argument(
        "--max-finished", type=int, help="cap of finished jobs kept (default: the scheduler's default)"
    )
    parser.add_argument("--measure", metavar="DSN", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        _child(args.measure, args.max_finished)
        return
    endpoint = resolve_postgres(PostgresMode.AUTO, data_dir=Path(tempfile.mkdtemp()) / "pg")
    try:
        machine = platform.processor() or platform.machine()
        print(f"{machine}, {os.cpu_count()} cores, Python {platform.python_version()}")
        figures = asyncio.run(
            fill(endpoint.dsn, args.jobs, args.recent, args.active, args.tail, args.max_finished)
        )
        print(f"store: {figures['events']:,} events, events table {figures['table_bytes'] / 2**30:.2f} GiB")
        for run in range(2):
            started = measure(endpoint.dsn, args.max_finished)
            print(f"from the snapshot (start {run + 1}): {json.dumps(started)}", flush=True)
        if args.full_replay:
            asyncio.run(_hide_snapshots(endpoint.dsn, True))
            print(f"full replay: {json.dumps(measure(endpoint.dsn, args.max_finished))}", flush=True)
            asyncio.run(_hide_snapshots(endpoint.dsn, False))
        if not args.keep:
            asyncio.run(_drop(endpoint.dsn))
    finally:
        endpoint.stop()


async def _drop(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    finally:
        await conn.close()


if __name__ == "__main__":
    main()
