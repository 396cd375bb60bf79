"""Metering's CPU per node snapshot (not a test): the worker alone against a simulated fleet.

    .venv/bin/python bench/metering.py [--fleet deploy/fleets/demo-3regions.yaml] [--interval 1]
        [--tasks 100] [--warmup 15] [--seconds 60] [--backlog 0] [--profile out.svg]

Tansu, `suanli serve metering` and `suanli agent --simulate` (the 100-node demo fleet, snapshots every
``--interval`` s) run as processes; no scheduler: once metering has published every node's capacity the
bench places ``--tasks`` one-GPU tasks itself (JobSubmitted + TaskPlaced, a GPU each, round-robin over
the GPU nodes), so the agents run them and report usage samples every interval, as under the soak. After
``--warmup`` s it reads the worker's CPU time (utime + stime, /proc) and the input topics' end offsets,
and again ``--seconds`` later. Printed: snapshots and usage samples produced meanwhile, metering's CPU
seconds, CPU ms per snapshot, its consumer lag at the end, and the LOST transitions in its log.
``--backlog N``: then the worker is stopped (SIGSTOP) for N s and resumed; printed: the records queued,
how long it takes to catch up, its CPU per record meanwhile, and the LOST transitions it emitted (its
own backlog must not look like silence). ``--profile``: py-spy records the worker over the measured
window (py-spy must be installed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, TopicPartition

from suanli.bus import EventPublisher, ensure_topics
from suanli.bus.topics import CATALOGUE, topic_name
from suanli.contracts import decode
from suanli.data import data_path
from suanli.infra.broker import BrokerProcess
from suanli.metering.testing import job_submitted, task_placed
from suanli.platform.supervisor import RunningService, ServiceSpec, Supervisor, suanli_argv

FLEET = data_path("deploy/fleets/demo-3regions.yaml")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class Offsets:
    """End offsets of topics, and what metering's group has committed on them."""

    def __init__(self, bootstrap: str, group: str) -> None:
        self._ends = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        self._group = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)

    async def start(self) -> None:
        await self._ends.start()
        await self._group.start()

    async def stop(self) -> None:
        await self._ends.stop()
        await self._group.stop()

    async def _partitions(self, topic: str) -> list[TopicPartition]:
        await self._ends.topics()
        return [TopicPartition(topic, p) for p in sorted(self._ends.partitions_for_topic(topic) or ())]

    async def end(self, topic: str) -> int:
        ends = await self._ends.end_offsets(await self._partitions(topic))
        return sum(ends.values())

    async def lag(self, topic: str) -> int:
        parts = await self._partitions(topic)
        ends = await self._ends.end_offsets(parts)
        committed = [await self._group.committed(tp) or 0 for tp in parts]
        return sum(ends.values()) - sum(committed)


async def fleet_nodes(bootstrap: str, topic: str, count: int, timeout_s: float) -> dict[str, int]:
    """GPU count by node id, once metering has published a capacity view of ``count`` nodes."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    await consumer.start()
    nodes: dict[str, int] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(nodes) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"metering published {len(nodes)} of {count} nodes in {timeout_s:.0f} s")
            for messages in (await consumer.getmany(timeout_ms=500)).values():
                for m in messages:
                    _, record = decode(m.value)
                    nodes[record["node_id"]] = len(record["devices"])
    finally:
        await consumer.stop()
    return nodes


async def place(bootstrap: str, prefix: str, nodes: dict[str, int], tasks: int) -> None:
    """``tasks`` one-GPU tasks, one job each, round-robin over the GPUs of the fleet."""
    gpus = [(node, i) for i in range(max(nodes.values(), default=0)) for node, n in nodes.items() if i < n]
    now = time.time_ns() // 1_000_000
    async with EventPublisher(bootstrap) as bus:
        for t, (node, index) in enumerate(gpus[:tasks]):
            job, task = f"bench-job-{t}", f"bench-task-{t}"
            jobs = topic_name("jobs.events", prefix)
            await bus.publish(jobs, job, "JobSubmitted", job_submitted(job, [task], now))
            placed = task_placed(task, node, now, job_id=job, devices=((index, 1000),), cpu_milli=1000)
            await bus.publish(topic_name("placements", prefix), node, "TaskPlaced", placed)


async def catch_up(
    args: argparse.Namespace, worker: RunningService, offsets: Offsets, snapshots: str, samples: str
) -> None:
    """The worker stopped (SIGSTOP) for ``--backlog`` s, then resumed: how fast, and at what CPU per
    record, it works through what queued meanwhile, and whether it took its own backlog for silence."""
    before = worker.log_path.read_text(errors="replace").count("-> LOST")
    os.kill(worker.pid, signal.SIGSTOP)
    await asyncio.sleep(args.backlog)
    queued = await offsets.lag(snapshots) + await offsets.lag(samples)
    cpu0, t0 = cpu_s(worker.pid), time.monotonic()
    os.kill(worker.pid, signal.SIGCONT)
    deadline = t0 + 10 * args.backlog + 60
    # Caught up: committed within one interval's records of the ends (faust commits every 2.8 s).
    while await offsets.lag(snapshots) + await offsets.lag(samples) > 3 * args.nodes / args.interval:
        if time.monotonic() > deadline:
            print(f"not caught up {deadline - t0:.0f} s after resuming")
            break
        await asyncio.sleep(0.5)
    cpu, took = cpu_s(worker.pid) - cpu0, time.monotonic() - t0
    produced = took * 2 * args.nodes / args.interval  # snapshots and samples that arrived meanwhile
    lost = worker.log_path.read_text(errors="replace").count("-> LOST") - before
    print(
        f"stopped {args.backlog:g} s: {queued} records queued; caught up {took:.1f} s after resuming, "
        f"{cpu:.2f} s of CPU = {1000 * cpu / max(1.0, queued + produced):.2f} ms per record handled "
        f"(queued + ~{produced:.0f} arrived meanwhile); LOST transitions meanwhile: {lost}"
    )


async def measure(args: argparse.Namespace, bootstrap: str, prefix: str, worker: RunningService) -> None:
    nodes = await fleet_nodes(bootstrap, topic_name("capacity.nodes", prefix), args.nodes, 180.0)
    await place(bootstrap, prefix, nodes, args.tasks)
    offsets = Offsets(bootstrap, f"{prefix}.suanli-metering")
    await offsets.start()
    snapshots, samples = topic_name("node.snapshots", prefix), topic_name("usage.samples", prefix)
    group = f"{prefix}.suanli-metering"
    # What metering writes: its outputs, its internal facts topic and its tables' changelogs.
    written = [
        topic_name(t, prefix)
        for t in ("capacity.nodes", "nodes.status", "usage.metered", "metering.task-facts")
    ]
    written += [f"{group}-nodes-changelog", f"{group}-tasks-changelog"]
    try:
        await asyncio.sleep(args.warmup)
        profiler = None
        if args.profile:
            profiler = subprocess.Popen(
                [
                    shutil.which("py-spy", path=Path(sys.executable).parent) or "py-spy",
                    "record",
                    "-p",
                    str(worker.pid),
                    "-d",
                    str(int(args.seconds)),
                    "-o",
                    args.profile,
                ]
                + (["--format", "raw"] if args.profile.endswith(".txt") else []),
                stdout=subprocess.DEVNULL,
            )
        out0 = [await offsets.end(t) for t in written]
        cpu0, snap0, samp0, t0 = (
            cpu_s(worker.pid),
            await offsets.end(snapshots),
            await offsets.end(samples),
            time.monotonic(),
        )
        await asyncio.sleep(args.seconds)
        cpu1, snap1, samp1, t1 = (
            cpu_s(worker.pid),
            await offsets.end(snapshots),
            await offsets.end(samples),
            time.monotonic(),
        )
        out1 = [await offsets.end(t) for t in written]
        lag_snap, lag_samp = await offsets.lag(snapshots), await offsets.lag(samples)
        if profiler is not None:
            profiler.wait()
        lost = worker.log_path.read_text(errors="replace").count("-> LOST")
        if args.backlog:
            await catch_up(args, worker, offsets, snapshots, samples)
    finally:
        await offsets.stop()
    cpu, n_snap, n_samp = cpu1 - cpu0, snap1 - snap0, samp1 - samp0
    print(
        f"{len(nodes)} nodes, interval {args.interval:g} s, {args.tasks} tasks placed; "
        f"measured {t1 - t0:.1f} s after a {args.warmup:g} s warm-up (load average {os.getloadavg()[0]:.1f})"
    )
    print(f"produced: {n_snap} snapshots ({n_snap / (t1 - t0):.0f}/s), {n_samp} usage samples")
    print(
        f"metering CPU: {cpu:.2f} s = {cpu / (t1 - t0):.2f} of a core; "
        f"{1000 * cpu / max(1, n_snap):.2f} s per 1,000 snapshots (with their usage samples)"
    )
    # Tansu's end offset is the last batch's base offset + 1: exact for one record per batch, a lower
    # bound (batches) otherwise.
    print(
        "written per snapshot: "
        + ", ".join(
            f"{t.removeprefix(prefix + '.').removeprefix(group + '-')} {(b - a) / max(1, n_snap):.2f}"
            for t, a, b in zip(written, out0, out1, strict=True)
        )
    )
    print(f"metering lag at the end: node.snapshots {lag_snap}, usage.samples {lag_samp}")
    print(f"LOST transitions in metering's log: {lost}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interval", type=float, default=1.0, help="agent snapshot interval (s)")
    parser.add_argument("--tasks", type=int, default=100, help="one-GPU tasks placed on the fleet")
    parser.add_argument("--fleet", type=Path, default=FLEET)
    parser.add_argument("--nodes", type=int, default=100, help="nodes metering must show before the load")
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument(
        "--backlog", type=float, default=0.0, help="then stop the worker this long (s) and time its catch-up"
    )
    parser.add_argument(
        "--profile", default="", help="py-spy output (.svg flame graph, .txt collapsed stacks)"
    )
    args = parser.parse_args()
    prefix = f"bench-metering-{secrets.token_hex(3)}"
    with tempfile.TemporaryDirectory(prefix="suanli-metering-") as tmp:
        home = Path(tmp)
        broker = BrokerProcess(log_path=home / "tansu.log")
        bootstrap = broker.start()
        try:
            asyncio.run(ensure_topics(bootstrap, CATALOGUE, prefix=prefix))
            env = {
                **os.environ,
                "SUANLI_KAFKA_BOOTSTRAP": bootstrap,
                "SUANLI_TOPIC_PREFIX": prefix,
                "SUANLI_METRICS_PORT": "0",
                "OTEL_SDK_DISABLED": "true",
            }
            with Supervisor(home / "logs", env) as supervisor:
                worker = supervisor.start(
                    ServiceSpec("metering", suanli_argv("serve", "metering")), wait=False
                )
                fleet = ServiceSpec(
                    "fleet",
                    suanli_argv(
                        "agent",
                        "--simulate",
                        str(args.fleet),
                        "--interval",
                        str(args.interval),
                        "--sim-duration",
                        "3600",
                    ),
                )
                supervisor.start(fleet, wait=False)
                asyncio.run(measure(args, bootstrap, prefix, worker))
                if supervisor.failed():
                    print(f"exited early: {supervisor.failed()}", file=sys.stderr)
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
