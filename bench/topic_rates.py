"""Records per second on every topic of a running broker (not a test): end offsets read twice, apart.

Used for metering's input and output volumes under `bench/latency.py` (docs/BENCHMARKS.md, "Where capacity
freshness went"): start the bench, and during its load point this at the stack's broker (the address is in
the `tansu broker --listener-url` of `ps`).

    .venv/bin/python bench/topic_rates.py 127.0.0.1:PORT [--seconds 10]

On Tansu an end offset is short by part of the last stored batch (ARCHITECTURE.md §3), so a topic written
in multi-record batches reads a little low; metering's own outputs are one record per batch.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition


async def end_offsets(bootstrap: str) -> dict[str, int]:
    """The sum of every partition's end offset, per topic."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await consumer.start()
    try:
        partitions = [
            TopicPartition(topic, p)
            for topic in await consumer.topics()
            for p in consumer.partitions_for_topic(topic) or ()
        ]
        totals: dict[str, int] = {}
        for tp, offset in (await consumer.end_offsets(partitions)).items():
            totals[tp.topic] = totals.get(tp.topic, 0) + offset
        return totals
    finally:
        await consumer.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("bootstrap", help="the broker, HOST:PORT")
    parser.add_argument("--seconds", type=float, default=10.0, help="between the two readings (10)")
    args = parser.parse_args()
    before, started = await end_offsets(args.bootstrap), time.monotonic()
    await asyncio.sleep(args.seconds)
    after, elapsed = await end_offsets(args.bootstrap), time.monotonic() - started
    rates = {topic: (n - before.get(topic, 0)) / elapsed for topic, n in after.items()}
    print("| topic | records/s |\n|---|---|")
    for topic, rate in sorted(rates.items(), key=lambda item: -item[1]):
        if rate > 0.1:
            print(f"| {topic} | {rate:.1f} |")


if __name__ == "__main__":
    asyncio.run(main())
