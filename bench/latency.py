"""Platform latency (not a test): the whole stack with 200 simulated nodes, jobs submitted over gRPC.

- submit -> placement: the client's clock just before SubmitJob against (a) the TaskPlaced event's
  occurred_at (the scheduler's decision, same machine clock) and (b) the moment this process consumed it
  from ``placements`` (delivered, after the outbox relay and the broker);
- capacity-view freshness: a NodeCapacityChanged's arrival on ``capacity.nodes`` against the occurred_at of
  the newest NodeSnapshot of that node at that moment (exact while metering keeps up within one interval);
- with ``--network``, network-view freshness: a probe round's occurred_at (``last_probe_at`` of the
  NetworkLinkChanged it caused) against (a) the view event's occurred_at (routing's fold) and (b) the moment
  this process consumed it from ``network.links``. The fleet probes every ``--probe-interval`` s and a faults
  file toggles degraded links every ``--fault-every`` s, so rounds keep changing the view; only records that
  changed a link meaningfully (status, or RTT by >= 10 % and >= 1 ms) count, since an unchanged state is
  republished on a timer (docs/routing.md) and its age says nothing about the fold.

    .venv/bin/python bench/latency.py                       # 50 jobs/s for 60 s, deploy/fleets/bench-200.yaml
    .venv/bin/python bench/latency.py --rate 20 --seconds 30
    .venv/bin/python bench/latency.py --duration 30 --duration-spread 0   # saturated: measures queueing
    .venv/bin/python bench/latency.py --network             # + probe -> network view freshness
    .venv/bin/python bench/latency.py --dump jobs.csv --logs logs/   # per-job latencies, service logs
    .venv/bin/python bench/latency.py --pause billing,serving  # a diagnosis: the figures without them
    .venv/bin/python bench/latency.py --nice scheduling:-5,fleet:10  # a diagnosis: CPU priorities
    .venv/bin/python bench/latency.py --profile prof/          # py-spy per service; bench/stacks_top.py

The default load stays well below the fleet: 50 jobs/s x 2-4 s x (1 or 0.5 GPU) keeps ~125 of the 960 GPUs
busy (T4, the smallest pool, ~35 %), and quota (bench/latency-queues.yaml) is far above the fleet, so the
figure is the scheduler's latency when room and quota exist. A run whose offered occupancy (printed) is
>= 100 % of a pool measures queueing behind a full cluster instead, and is labelled so.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import os
import platform
import random
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import grpc
import psutil
from aiokafka import AIOKafkaConsumer

from suanli.api.scheduler.v1 import scheduler_pb2 as pb
from suanli.api.scheduler.v1 import scheduler_pb2_grpc as pb_grpc
from suanli.bus import topic_name, topics
from suanli.cli.config import aio_bearer_channel
from suanli.contracts import decode
from suanli.data import data_path
from suanli.infra.postgres import PostgresMode
from suanli.platform.stack import Stack, StackConfig

FLEET = data_path("deploy/fleets/bench-200.yaml")
# Quota far above the fleet on every model, so no job waits on quota: latency, not admission, is measured.
QUEUES = Path(__file__).with_name("latency-queues.yaml")
MODELS = ["A100 80GB SXM", "L40S", "T4"]
POOL_GPUS = {"A100 80GB SXM": 560, "L40S": 280, "T4": 120}  # deploy/fleets/bench-200.yaml
# Links of bench-200's three regions degraded and healed in turn by --network: each flip moves the EWMA
# RTT by far more than the view's publish threshold for several rounds.
FAULTS = (
    "faults:\n"
    "  - {kind: degrade, link: [washington-dc, frankfurt], rtt_ms: 400}\n"
    "  - {kind: degrade, link: [frankfurt, tokyo], rtt_ms: 600}\n"
)


def calibration_s(steps: int = 10_000_000) -> float:
    """Seconds a fixed pure-Python loop takes here now, before the stack starts.

    On 2026-12-06 the same idle 2-core machine ran a 20-million-step loop of this kind in 3.4 s and,
    minutes later, in 2.3 s; that afternoon this one took 0.22-0.24 s. The speed moves under the
    benchmark, so runs compare only at similar calibration values.
    """
    started = time.perf_counter()
    total = 0
    for i in range(steps):
        total += i
    return time.perf_counter() - started


def job_shape(i: int, duration_s: float, spread_s: float) -> tuple[str, int, float]:
    """Model, milli-GPUs and duration of job i: models round-robin, every third job half a GPU,
    duration uniform in duration +- spread (seeded, so runs offer the same load)."""
    rng = random.Random(f"bench|{i}")
    return MODELS[i % 3], 500 if i % 3 == 0 else 1000, max(0.1, duration_s + rng.uniform(-spread_s, spread_s))


def offered_occupancy(args: argparse.Namespace) -> dict[str, float]:
    """Steady-state share of each pool the offered load holds (rate x mean GPU-seconds per job / GPUs)."""
    total = max(1, int(args.rate * args.seconds))
    gpu_s: dict[str, float] = defaultdict(float)
    for i in range(total):
        model, milli, duration = job_shape(i, args.duration, args.duration_spread)
        gpu_s[model] += milli / 1000 * duration
    return {m: args.rate * gpu_s[m] / total / POOL_GPUS[m] for m in MODELS}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def summary(name: str, values_s: list[float]) -> str:
    if not values_s:
        return f"{name}: no samples"
    ms = [v * 1000 for v in values_s]
    return (
        f"{name}: n={len(ms)} p50={pct(ms, 50):.1f} ms p99={pct(ms, 99):.1f} ms "
        f"max={max(ms):.1f} ms mean={statistics.fmean(ms):.1f} ms"
    )


# The fetch wait of the reader whose consumption times are the delivered and freshness figures. Tansu
# picks a record up about a quarter of the wait after it arrives (docs/BENCHMARKS.md, "What a fetch costs
# Tansu": 27 ms at the median, 53 ms at p99, with 100 ms), and that delay is in every figure read here, so
# a longer wait only makes them larger. At 10 ms this reader alone took 0.15 of the stack's 2 cores
# (Tansu 0.08, this process 0.07; "Platform latency"), CPU the platform under test never has to share
# with it in production.
READER_WAIT_MS = 100


class Recorder:
    """Reads topics from the start; remembers each record with the wall-clock time it was consumed.

    Two consumers: ``timely`` topics, whose arrival here is a figure, are fetched with ``timely_wait_ms``
    (`READER_WAIT_MS`); ``archive`` topics, of which only the records' own fields are used, with a 500 ms
    wait. On Tansu a parked fetch costs CPU in proportion to the batches stored in the partitions it reads
    (bench/tansu_fetch.py), so reading ``node.snapshots``, a busy topic, every 10 ms took broker CPU from
    the stack being measured. Snapshots are matched after the run by their own ``occurred_at``, so when
    they were read does not matter (one not read by the end could only make a capacity record's age look
    larger)."""

    def __init__(self, bootstrap: str, timely: list[str], archive: list[str], timely_wait_ms: int) -> None:
        self.consumers = [
            AIOKafkaConsumer(
                *names,
                bootstrap_servers=bootstrap,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                fetch_max_wait_ms=wait_ms,
            )
            for names, wait_ms in ((timely, timely_wait_ms), (archive, 500))
            if names
        ]
        self.seen: list[tuple[float, str, str, dict]] = []
        self.broker_ms: dict[str, int] = {}  # event id -> the record's Kafka timestamp (the producer's send)

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._read(consumer, stop) for consumer in self.consumers))

    async def _read(self, consumer: AIOKafkaConsumer, stop: asyncio.Event) -> None:
        await consumer.start()
        try:
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=50)
                now = time.time()
                for records in batches.values():
                    for r in records:
                        try:
                            name, record = decode(r.value)
                        except Exception:
                            continue
                        self.seen.append((now, r.topic, name, record))
                        self.broker_ms[record["event_id"]] = r.timestamp
        finally:
            await consumer.stop()


def service_processes(stack: Stack, name: str) -> list[psutil.Process]:
    """The processes of one service of the stack (its own and its children)."""
    for running in stack.supervisor.services:
        if running.spec.name == name:
            root = psutil.Process(running.pid)
            return [root, *root.children(recursive=True)]
    known = ", ".join(r.spec.name for r in stack.supervisor.services)
    raise SystemExit(f"no service {name!r} in the stack (it runs {known})")


@contextlib.contextmanager
def paused(stack: Stack, names: list[str]) -> Iterator[None]:
    """The named services stopped (SIGSTOP) within the block, continued after it. A diagnosis, not a
    configuration: what the figures are without the CPU those services take (docs/BENCHMARKS.md)."""
    processes = [p for name in names for p in service_processes(stack, name)]
    for process in processes:
        process.suspend()
    try:
        yield
    finally:
        for process in processes:
            with contextlib.suppress(psutil.Error):
                process.resume()


def reniced(stack: Stack, levels: dict[str, int]) -> None:
    """Every thread of the named process groups (as `stack_cpu_s` groups them: a service with its
    children, ``tansu``, ``postgres``, ``bench``) at the given nice level. A diagnosis, like ``--pause``:
    whether the figures move when some processes get the cores first (docs/BENCHMARKS.md)."""
    pids: dict[str, list[int]] = defaultdict(list)
    for group, pid in stack_cpu_s(stack):
        pids[group].append(pid)
    for group, level in levels.items():
        if group not in pids:
            raise SystemExit(f"no process group {group!r} (there are {', '.join(sorted(pids))})")
        for pid in pids[group]:
            with contextlib.suppress(OSError):  # a process or thread that ended meanwhile
                for tid in os.listdir(f"/proc/{pid}/task"):
                    os.setpriority(os.PRIO_PROCESS, int(tid), level)


def profile(stack: Stack, out: Path, seconds: float) -> list[subprocess.Popen[bytes]]:
    """py-spy on every service of the stack for ``seconds``, collapsed stacks to ``out/<service>.txt``
    (read them with bench/stacks_top.py)."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    out.mkdir(parents=True, exist_ok=True)
    return [
        subprocess.Popen(
            [
                spy,
                "record",
                "-r",
                "25",
                "-d",
                str(max(1, int(seconds))),
                "-p",
                str(running.pid),
                "-f",
                "raw",
                "-o",
                str(out / f"{running.spec.name}.txt"),
                "--nonblocking",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for running in stack.supervisor.services
    ]


def stack_cpu_s(stack: Stack) -> dict[tuple[str, int], float]:
    """CPU seconds used so far by each process of the stack, keyed (group, pid): a service with its
    children, the broker, PostgreSQL (every backend: the server is this machine's, idle but for the
    stack) and this bench. Per process, so one that ends or starts within a window cannot skew its
    group's difference (`cpu_used`)."""
    groups: dict[str, list[psutil.Process]] = {"bench": [psutil.Process()]}
    if stack.broker is not None:
        groups["tansu"] = [psutil.Process(stack.broker.pid)]
    for running in stack.supervisor.services:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(running.pid)
            groups[running.spec.name] = [root, *root.children(recursive=True)]
    groups["postgres"] = [
        p
        for p in psutil.process_iter(["cmdline"])
        if " ".join(p.info["cmdline"] or []).startswith("postgres")
    ]
    used: dict[tuple[str, int], float] = {}
    for name, processes in groups.items():
        for process in processes:
            with contextlib.suppress(psutil.Error):
                times = process.cpu_times()
                used[(name, process.pid)] = times.user + times.system
    return used


def cpu_used(before: dict[tuple[str, int], float], after: dict[tuple[str, int], float]) -> dict[str, float]:
    """CPU seconds per group between two `stack_cpu_s` snapshots (a process new since ``before`` counts
    from its start; one gone by ``after`` is left out, its last seconds unknown)."""
    used: dict[str, float] = {}
    for (name, pid), cpu in after.items():
        used[name] = used.get(name, 0.0) + cpu - before.get((name, pid), 0.0)
    return used


async def load(
    api: pb_grpc.SchedulerStub,
    rate: float,
    seconds: float,
    duration_s: float,
    spread_s: float,
    submitted: dict[str, float],
) -> Counter[str]:
    """Submit at a fixed rate (each RPC in its own task, so a slow answer does not slow the schedule)."""
    token = secrets.token_hex(3)
    total = int(rate * seconds)
    start = time.monotonic()
    errors: Counter[str] = Counter()

    async def one(i: int) -> None:
        model, milli, duration = job_shape(i, duration_s, spread_s)
        spec = pb.JobSpec(
            name=f"bench-{i}",
            queue="bench",
            priority_class="batch",
            tasks=[
                pb.TaskSpec(
                    name="w",
                    command="python serve.py",
                    duration_s=duration,
                    resources=pb.ResourceRequest(
                        cpu_milli=1000, memory_mib=2048, gpu_count=1, gpu_milli=milli, gpu_models=[model]
                    ),
                )
            ],
        )
        at = time.time()
        try:
            request = pb.SubmitJobRequest(spec=spec, request_id=f"{token}-{i}")
            job = (await api.SubmitJob(request, timeout=30)).job
        except grpc.aio.AioRpcError as exc:
            errors[exc.code().name] += 1
            return
        submitted[job.id] = at

    tasks = []
    for i in range(total):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    return errors


# A benchmark script read top to bottom: wait, load, drain, then compute and print each figure.
async def measure(stack: Stack, args: argparse.Namespace) -> None:  # noqa: C901
    placements_t = topic_name(topics.PLACEMENTS.name)
    snapshots_t = topic_name(topics.NODE_SNAPSHOTS.name)
    capacity_t = topic_name(topics.CAPACITY_NODES.name)
    links_t = topic_name(topics.NETWORK_LINKS.name)
    stop = asyncio.Event()
    recorder = Recorder(
        stack.bootstrap,
        timely=[placements_t, capacity_t] + ([links_t] if args.network else []),
        archive=[snapshots_t],
        timely_wait_ms=args.reader_wait_ms,
    )
    reading = asyncio.create_task(recorder.run(stop))
    flipping = asyncio.create_task(flip_faults(stack.config.faults, args.fault_every, stop))
    # The stack runs with tokens on: the bench submits as its platform admin.
    async with aio_bearer_channel(stack.scheduler_addr, stack.admin_token, stack.ca) as channel:
        api = pb_grpc.SchedulerStub(channel)
        deadline = time.monotonic() + 120
        while True:  # the whole fleet READY in the scheduler's view before the clock starts
            nodes = (await api.ListNodes(pb.ListNodesRequest(page_size=500))).nodes
            if sum(n.status == "READY" and len(n.devices) > 0 for n in nodes) >= args.nodes:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(nodes)} nodes after 120 s")
            await asyncio.sleep(0.5)
        submitted: dict[str, float] = {}
        reniced(stack, args.nice)
        with paused(stack, args.pause):
            spies = profile(stack, args.profile, args.seconds) if args.profile is not None else []
            started = time.time()
            cpu_before = stack_cpu_s(stack)
            errors = await load(api, args.rate, args.seconds, args.duration, args.duration_spread, submitted)
            elapsed = time.time() - started
            cpu_after = stack_cpu_s(stack)
            drain = time.monotonic() + 30
            while time.monotonic() < drain:
                placed = {r["job_id"] for _, t, n, r in recorder.seen if n == "TaskPlaced"}
                if set(submitted) <= placed:
                    break
                await asyncio.sleep(0.5)
            for spy in spies:
                await asyncio.to_thread(spy.wait)
    stop.set()
    await reading
    await flipping

    decided: list[float] = []
    delivered: list[float] = []
    first: dict[str, tuple[float, float]] = {}
    for consumed_at, topic, name, record in recorder.seen:
        if topic == placements_t and name == "TaskPlaced" and record["job_id"] in submitted:
            first.setdefault(record["job_id"], (record["occurred_at"].timestamp(), consumed_at))
    for job_id, (occurred, consumed_at) in first.items():
        decided.append(occurred - submitted[job_id])
        delivered.append(consumed_at - submitted[job_id])
    if args.dump is not None:
        with args.dump.open("w") as out:  # per job: submitted at (s since the load began), decided, delivered
            out.write("submitted_s,decided_ms,delivered_ms\n")
            for job_id, (occurred, consumed_at) in sorted(first.items(), key=lambda kv: submitted[kv[0]]):
                at = submitted[job_id]
                decided_ms, delivered_ms = (occurred - at) * 1000, (consumed_at - at) * 1000
                out.write(f"{at - started:.3f},{decided_ms:.1f},{delivered_ms:.1f}\n")

    snapshots: dict[str, list[float]] = defaultdict(list)
    for _, topic, name, record in recorder.seen:
        if topic == snapshots_t and name == "NodeSnapshot":
            snapshots[record["node_id"]].append(record["occurred_at"].timestamp())
    fresh: list[float] = []
    for consumed_at, topic, name, record in recorder.seen:
        if topic != capacity_t or name != "NodeCapacityChanged" or consumed_at < started:
            continue
        times = sorted(snapshots[record["node_id"]])
        i = bisect.bisect_right(times, consumed_at)
        if i:
            fresh.append(consumed_at - times[i - 1])

    print(
        f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"Python {sys.version.split()[0]}; fleet {args.fleet.name} ({args.nodes} nodes); "
        f"calibration loop {args.calibration_s:.2f} s before the stack started; "
        f"this reader's fetch wait {args.reader_wait_ms} ms"
        + (f"; PAUSED during the load: {', '.join(args.pause)}" if args.pause else "")
        + (f"; NICE: {', '.join(f'{g} {lv}' for g, lv in args.nice.items())}" if args.nice else "")
    )
    occupancy = offered_occupancy(args)
    saturated = max(occupancy.values()) >= 1.0
    print(
        "offered occupancy: "
        + ", ".join(f"{m} {o:.0%}" for m, o in occupancy.items())
        + f"; snapshot interval {args.interval:g} s"
    )
    print(
        "== SATURATED: the figures below are queueing behind a full pool, not decision latency =="
        if saturated
        else "== non-saturating: room and quota exist; the figures are the scheduler's latency =="
    )
    failed = ", ".join(f"{n} {code}" for code, n in errors.most_common()) or "0"
    print(
        f"load: {len(submitted)} jobs accepted in {elapsed:.1f} s "
        f"({len(submitted) / elapsed:.1f}/s), {failed} errors; {len(first)} placed, "
        f"{len(submitted) - len(first)} not placed by the end of the 30 s drain"
    )
    used = sorted(((u, n) for n, u in cpu_used(cpu_before, cpu_after).items()), reverse=True)
    print(
        f"CPU during the load (cores): {sum(u for u, _ in used) / elapsed:.2f} in all; "
        + ", ".join(f"{n} {u / elapsed:.2f}" for u, n in used)
    )
    print(summary("submit -> TaskPlaced decided (occurred_at)", decided))
    print(summary("submit -> TaskPlaced delivered (consumed from placements)", delivered))
    print(summary("capacity view freshness (snapshot occurred_at -> capacity.nodes arrival)", fresh))
    for name, values in capacity_hops(recorder, snapshots_t, capacity_t, started).items():
        print(summary(f"  capacity hop: {name}", values))
    if args.network:
        folded, received = network_freshness(recorder.seen, links_t, started)
        print(
            f"network: probe interval {args.probe_interval:g} s, "
            f"degraded links flipped every {args.fault_every:g} s"
        )
        print(summary("network view fold (last_probe_at -> NetworkLinkChanged occurred_at)", folded))
        print(summary("network view freshness (last_probe_at -> network.links arrival)", received))


def capacity_hops(
    recorder: Recorder, snapshots_t: str, capacity_t: str, since: float
) -> dict[str, list[float]]:
    """Where a capacity record's age comes from, per record and its own snapshot (same node and occurred_at):
    the agent (stamp -> its producer's send), metering (the snapshot sent -> the capacity record sent: the
    broker's delivery to metering, its queue and its work), and the capacity record's delivery to this
    process."""
    snapshots: dict[tuple[str, float], str] = {}
    for _, topic, name, record in recorder.seen:
        if topic == snapshots_t and name == "NodeSnapshot":
            key = (record["node_id"], record["occurred_at"].timestamp())
            snapshots[key] = record["event_id"]
    hops: dict[str, list[float]] = defaultdict(list)
    for consumed_at, topic, name, record in recorder.seen:
        if topic != capacity_t or name != "NodeCapacityChanged" or consumed_at < since:
            continue
        stamped = record["occurred_at"].timestamp()
        snapshot_id = snapshots.get((record["node_id"], stamped))
        if snapshot_id is None:
            continue
        snapshot_sent = recorder.broker_ms[snapshot_id] / 1000
        capacity_sent = recorder.broker_ms[record["event_id"]] / 1000
        hops["own snapshot stamped -> arrival"].append(consumed_at - stamped)
        hops["agent: stamped -> snapshot sent"].append(snapshot_sent - stamped)
        hops["metering: snapshot sent -> capacity sent"].append(capacity_sent - snapshot_sent)
        hops["delivery: capacity sent -> arrival"].append(consumed_at - capacity_sent)
    return hops


async def flip_faults(path: Path | None, every_s: float, stop: asyncio.Event) -> None:
    """Degrade the FAULTS links, heal them, degrade them again ... until stopped (no faults file: idle)."""
    degraded = False
    while path is not None and not stop.is_set():
        degraded = not degraded
        path.write_text(FAULTS if degraded else "faults: []\n")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)


def network_freshness(
    seen: list[tuple[float, str, str, dict]], links_t: str, since: float
) -> tuple[list[float], list[float]]:
    """Ages of the view events a probe round caused: (fold, received), in seconds."""
    previous: dict[str, dict] = {}
    folded: list[float] = []
    received: list[float] = []
    for consumed_at, topic, name, record in seen:
        if topic != links_t or name != "NetworkLinkChanged":
            continue
        before = previous.get(record["link_id"])
        previous[record["link_id"]] = record
        if before is None or consumed_at < since or not changed(before, record):
            continue
        probe = record["last_probe_at"].timestamp()
        folded.append(record["occurred_at"].timestamp() - probe)
        received.append(consumed_at - probe)
    return folded, received


def changed(before: dict, after: dict) -> bool:
    """A change the view publishes at once (docs/routing.md, "Events out"), not a timed republish."""
    if after["last_probe_at"] <= before["last_probe_at"]:
        return False
    step = abs(after["rtt_ms"] - before["rtt_ms"])
    return after["status"] != before["status"] or (step >= 1.0 and step >= 0.1 * before["rtt_ms"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--fleet", type=Path, default=FLEET)
    parser.add_argument("--nodes", type=int, default=200, help="nodes to wait for before the load")
    parser.add_argument("--rate", type=float, default=50.0, help="jobs per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--duration", type=float, default=3.0, help="mean seconds a task holds its GPU")
    parser.add_argument(
        "--duration-spread", type=float, default=1.0, help="durations are uniform in duration +- spread (s)"
    )
    parser.add_argument(
        "--interval", type=float, default=5.0, help="agent snapshot interval (s); 5 s is the agent's default"
    )
    parser.add_argument(
        "--dump", type=Path, default=None, help="write each job's submit time and latencies to this CSV"
    )
    parser.add_argument(
        "--logs", type=Path, default=None, help="copy the stack's service logs here when the run ends"
    )
    parser.add_argument(
        "--reader-wait-ms",
        type=int,
        default=READER_WAIT_MS,
        help="fetch wait of this process's reader of placements and capacity views (see READER_WAIT_MS)",
    )
    parser.add_argument(
        "--pause",
        type=lambda v: [n for n in v.split(",") if n],
        default=[],
        help="services to stop (SIGSTOP) during the load, e.g. billing,serving: a diagnosis of what the "
        "figures are without them, not a configuration",
    )
    parser.add_argument(
        "--nice",
        type=lambda v: {g: int(lv) for g, _, lv in (x.partition(":") for x in v.split(",") if x)},
        default={},
        help="GROUP:LEVEL,... nice levels for every thread of those process groups once the fleet is up "
        "(e.g. scheduling:-5,fleet:10; negative levels need root): a diagnosis, not a configuration",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="py-spy every service during the load into this folder (bench/stacks_top.py reads it)",
    )
    parser.add_argument("--network", action="store_true", help="also measure network-view freshness")
    parser.add_argument(
        "--probe-interval", type=float, default=5.0, help="fleet probe interval with --network (s)"
    )
    parser.add_argument(
        "--fault-every", type=float, default=10.0, help="seconds between fault flips with --network"
    )
    args = parser.parse_args()
    args.calibration_s = calibration_s()
    with tempfile.TemporaryDirectory(prefix="suanli-latency-") as tmp:
        home = Path(tmp)
        network = (
            {"probe_interval_s": args.probe_interval, "faults": home / "faults.yaml"} if args.network else {}
        )
        config = StackConfig(
            home=home,
            fleet=args.fleet,
            queues=QUEUES,
            pg_mode=PostgresMode.AUTO,
            database=f"suanli_bench_{secrets.token_hex(4)}",
            snapshot_interval_s=args.interval,
            scheduling_interval_s=0.2,
            # Measured as before the trace store existed (docs/BENCHMARKS.md): no span export.
            traces=False,
            **network,
        )
        with Stack(config) as stack:
            asyncio.run(measure(stack, args))
        if args.logs is not None:  # e.g. the scheduler's "cycle N: admitted …, X ms" lines
            shutil.copytree(home / "logs", args.logs, dirs_exist_ok=True)


if __name__ == "__main__":
    main()
