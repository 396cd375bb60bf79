"""What a consumer's fetches cost the embedded broker (not a test): Tansu's CPU against fetch wait,
stored batches and partitions.

One Tansu, one topic; a producer sends ``--rate`` records/s round-robin over its partitions, one record
per batch (as metering's faust producer does), after ``--stored`` batches were written up front. For each
case, consumers in their own groups read the new records with ``fetch_max_wait_ms``; over a 10 s window
the script prints the broker's CPU (% of a core, from /proc through psutil), this process's, the fetch
requests sent per second, and each record's delivery (its Kafka timestamp -> consumed) p50 / p99.

    .venv/bin/python bench/tansu_fetch.py                       # the default grid
    .venv/bin/python bench/tansu_fetch.py --wait 10 --stored 16000 --consumers 1
    .venv/bin/python bench/tansu_fetch.py --wait 100 --stored 0 --other 20000   # another topic's batches

The platform's fetches are these: every consumer of every service fetches all the partitions assigned
to it, so a topic's partition count and a consumer's wait multiply (docs/BENCHMARKS.md, "What a fetch
costs Tansu").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient

from suanli.infra.broker import BrokerProcess

TOPIC = "fetch-cost"
OTHER = "fetch-cost-other"  # a topic no consumer reads: do its batches cost the fetches of TOPIC?
WINDOW_S = 10.0
WARMUP_S = 4.0
# (fetch wait ms, stored batches, consumers): wait and history for one consumer, then several consumers.
GRID = [(10, 0, 1), (10, 16000, 1), (50, 16000, 1), (250, 16000, 1), (100, 16000, 4), (250, 16000, 4)]

requests: Counter[str] = Counter()


def count_requests() -> None:
    """Count the requests every client of this process sends, by request type."""
    send = AIOKafkaClient.send

    async def counted(self: AIOKafkaClient, node_id: int, request: Any, *args: Any, **kwargs: Any) -> Any:
        requests[type(request).__name__] += 1
        return await send(self, node_id, request, *args, **kwargs)

    AIOKafkaClient.send = counted  # type: ignore[method-assign]


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


async def case(
    wait_ms: int, stored: int, consumers: int, rate: float, partitions: int, other: int = 0
) -> str:
    with tempfile.TemporaryDirectory(prefix="suanli-fetch-") as home:
        broker = BrokerProcess(Path(home) / "tansu.log")
        bootstrap = broker.start()
        try:
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
            await admin.start()
            await admin.create_topics([NewTopic(TOPIC, partitions, 1), NewTopic(OTHER, partitions, 1)])
            await admin.close()
            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap, enable_idempotence=False, linger_ms=0, max_batch_size=1
            )
            await producer.start()
            sent = [await producer.send(TOPIC, b"x" * 300, partition=i % partitions) for i in range(stored)]
            sent += [await producer.send(OTHER, b"x" * 300, partition=i % partitions) for i in range(other)]
            await asyncio.gather(*sent)
            readers = [
                AIOKafkaConsumer(
                    TOPIC,
                    bootstrap_servers=bootstrap,
                    group_id=f"reader-{i}",
                    fetch_max_wait_ms=wait_ms,
                    auto_offset_reset="latest",
                    enable_auto_commit=False,
                )
                for i in range(consumers)
            ]
            for reader in readers:
                await reader.start()
            delivered: list[float] = []

            async def produce() -> None:
                i = 0
                while True:
                    await producer.send(TOPIC, b"x" * 300, partition=i % partitions)
                    i += 1
                    await asyncio.sleep(1 / rate)

            async def read(reader: AIOKafkaConsumer) -> None:
                while True:
                    batches = await reader.getmany(timeout_ms=1000)
                    now_ms = time.time() * 1000
                    delivered.extend(now_ms - r.timestamp for rs in batches.values() for r in rs)

            running = [asyncio.create_task(produce())] + [asyncio.create_task(read(r)) for r in readers]
            await asyncio.sleep(WARMUP_S)
            tansu, me = psutil.Process(broker.pid), psutil.Process()
            tansu_before, me_before = cpu_s(tansu), cpu_s(me)
            requests.clear()
            delivered.clear()
            await asyncio.sleep(WINDOW_S)
            tansu_pct = 100 * (cpu_s(tansu) - tansu_before) / WINDOW_S
            me_pct = 100 * (cpu_s(me) - me_before) / WINDOW_S
            fetches = requests["FetchRequest"] / WINDOW_S
            for task in running:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for reader in readers:
                await reader.stop()
            await producer.stop()
        finally:
            broker.stop()
    return (
        f"wait {wait_ms:>4} ms, stored {stored:>6} batches (+{other} on another topic), "
        f"{consumers} consumer(s): "
        f"Tansu {tansu_pct:5.1f} %, "
        f"this process {me_pct:5.1f} %, fetches {fetches:5.1f}/s, "
        f"delivered p50 {pct(delivered, 50):6.1f} ms p99 {pct(delivered, 99):6.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--wait", type=int, help="fetch_max_wait_ms (with --stored and --consumers: one case)"
    )
    parser.add_argument("--stored", type=int, default=16000, help="batches written before the window")
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--other", type=int, default=0, help="batches written to a topic nobody reads")
    parser.add_argument("--rate", type=float, default=50.0, help="records per second during the window")
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    count_requests()
    grid = GRID if args.wait is None else [(args.wait, args.stored, args.consumers)]
    print(
        f"{args.partitions} partitions, {args.rate:g} records/s, one record per batch; window {WINDOW_S:g} s"
    )
    for wait_ms, stored, consumers in grid:
        print(
            asyncio.run(case(wait_ms, stored, consumers, args.rate, args.partitions, args.other)), flush=True
        )


if __name__ == "__main__":
    main()
