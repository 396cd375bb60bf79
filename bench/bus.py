"""Bus throughput: Avro events published and consumed through a real broker (not a test).

One EventPublisher (this process) and one EventConsumer (its own group, a second process) running
concurrently: the figure is events/s from the first publish to the last event handled, so it covers Avro
encode, trace headers, produce (acks=all), fetch, Avro decode and the consumer's dispatch and commits.

    .venv/bin/python bench/bus.py                      # starts its own Tansu
    .venv/bin/python bench/bus.py --count 100000 --partitions 4 --bootstrap 127.0.0.1:9092
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import multiprocessing
import os
import platform
import secrets
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from suanli.bus import (
    AvroCodec,
    ConsumedEvent,
    ConsumerSettings,
    EventConsumer,
    EventPublisher,
    ProducerSettings,
    TopicSpec,
    ensure_topics,
)
from suanli.contracts import encode
from suanli.infra.broker import BrokerProcess

EVENT = "TaskPlaced"
TARGET_EVENTS_PER_S = 20_000


def placement(n: int, nodes: int) -> dict[str, Any]:
    node = f"node-{n % nodes:04d}"
    task = str(uuid.uuid4())
    return {
        "event_id": str(uuid.uuid4()),
        "occurred_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=n),
        "producer": "scheduling/sched-0",
        "subject_id": node,
        "job_id": f"job-{n // 8:07d}",
        "task_id": task,
        "node_id": node,
        "region": "cn-east",
        "site": "sh-dc2",
        "devices": [{"index": 0, "milli": 500}, {"index": 1, "milli": 1000}],
        "requests": {
            "cpu_milli": 8000,
            "memory_mib": 65536,
            "gpu_count": 2,
            "gpu_milli": 1500,
            "gpu_memory_mib": 40960,
            "gpu_model": "NVIDIA-A100-SXM4-80GB",
        },
        "attempt": 1,
        "cycle": n // 100,
        "command": ["python", "-m", "train", "--config", "configs/llm-7b.yaml"],
        "env": {"NCCL_DEBUG": "WARN", "RUN_ID": task[:8]},
    }


async def consume(bootstrap: str, topic: str, group: str, count: int, ready: Any, results: Any) -> None:
    """The consumer side; reports (first, last) handled times on CLOCK_MONOTONIC, shared by processes."""
    handled = 0
    first = 0.0
    done = asyncio.Event()

    async def handle(event: ConsumedEvent) -> None:
        nonlocal handled, first
        if handled == 0:
            first = time.monotonic()
        handled += 1
        if handled >= count:
            done.set()

    settings = ConsumerSettings(fetch_max_wait_ms=100, poll_timeout_ms=100, max_poll_records=5000)
    async with EventConsumer(bootstrap, group, [topic], handle, settings=settings) as consumer:
        # Join first, so the figure measures the pipeline and not Tansu's group-join delay.
        await consumer.wait_assigned(60)
        ready.put(True)
        await asyncio.wait_for(done.wait(), timeout=max(120.0, count / 1000))
        results.put((first, time.monotonic()))


def consumer_process(bootstrap: str, topic: str, group: str, count: int, ready: Any, results: Any) -> None:
    asyncio.run(consume(bootstrap, topic, group, count, ready, results))


async def publish(
    bootstrap: str, topic: str, records: list[dict[str, Any]], chunk: int, linger_ms: int
) -> float:
    """Publish everything (encode included) in ``publish_many`` chunks; returns the end time."""
    async with EventPublisher(bootstrap, settings=ProducerSettings(linger_ms=linger_ms)) as publisher:
        for i in range(0, len(records), chunk):
            await publisher.publish_many(
                [publisher.encode(topic, r["node_id"], EVENT, r) for r in records[i : i + chunk]]
            )
    return time.monotonic()


def codec_cost_us(records: list[dict[str, Any]]) -> tuple[float, float]:
    """Per-event Avro encode and decode time: the CPU floor of each side of the pipeline."""
    codec = AvroCodec()
    t0 = time.perf_counter()
    data = [codec.encode(EVENT, r) for r in records]
    t1 = time.perf_counter()
    for value in data:
        codec.decode(value)
    t2 = time.perf_counter()
    return (t1 - t0) / len(records) * 1e6, (t2 - t1) / len(records) * 1e6


def run(bootstrap: str, count: int, partitions: int, chunk: int, linger_ms: int) -> dict[str, float]:
    prefix = f"bench-{secrets.token_hex(3)}"
    spec = TopicSpec("bus", partitions, "node id")
    asyncio.run(ensure_topics(bootstrap, [spec], prefix=prefix))
    topic = spec.prefixed(prefix).name
    records = [placement(n, nodes=256) for n in range(count)]
    size = len(encode(EVENT, records[0]))
    encode_us, decode_us = codec_cost_us(records[:2000])

    # Producer and consumer are separate services in production; here they are separate processes too,
    # so each gets a core's worth of Python and the figure is the pipeline's, not one interpreter's.
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    worker = ctx.Process(
        target=consumer_process, args=(bootstrap, topic, f"{prefix}-g", count, ready, results), daemon=True
    )
    worker.start()
    try:
        ready.get(timeout=120)
        start = time.monotonic()
        published = asyncio.run(publish(bootstrap, topic, records, chunk, linger_ms))
        first, last = results.get(timeout=max(300.0, count / 500))
    finally:
        worker.join(timeout=30)
        if worker.is_alive():
            worker.terminate()
    return {
        "count": count,
        "bytes": size,
        "encode_us": encode_us,
        "decode_us": decode_us,
        "publish_s": published - start,
        "total_s": last - start,
        "publish_per_s": count / (published - start),
        "consume_per_s": count / (last - first),
        "end_to_end_per_s": count / (last - start),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=2_000, help="records per publish_many call")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    args = parser.parse_args(argv)

    broker: BrokerProcess | None = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = BrokerProcess(log_path=Path(tempfile.mkdtemp(prefix="suanli-bench-")) / "tansu.log")
        bootstrap = broker.start()
    try:
        result = run(bootstrap, args.count, args.partitions, args.chunk, args.linger_ms)
    finally:
        if broker is not None:
            broker.stop()
    print(
        f"bus: {result['count']} {EVENT} events of {result['bytes']} B, {args.partitions} partitions, "
        f"{os.cpu_count()} cores, {platform.python_implementation()} {platform.python_version()}"
    )
    for label, rate, secs in (
        ("publish (acked)", "publish_per_s", "publish_s"),
        ("consume (1st to last)", "consume_per_s", None),
        ("publish+consume", "end_to_end_per_s", "total_s"),
    ):
        took = f"  ({result[secs]:.2f} s)" if secs else ""
        print(f"  {label:<22}{result[rate]:>10,.0f} events/s{took}")
    print(f"  Avro codec per event: encode {result['encode_us']:.0f} us, decode {result['decode_us']:.0f} us")
    ok = result["end_to_end_per_s"] >= TARGET_EVENTS_PER_S
    print(f"  target >= {TARGET_EVENTS_PER_S:,} events/s publish+consume: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
