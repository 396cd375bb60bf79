"""Run one outbox relay: `python -m suanli.eventstore.relay_main --dsn DSN --bootstrap HOST:PORT`.

SIGTERM / SIGINT stop it gracefully (the batch in flight is finished and marked). Several may run against
one schema: one publishes, the others wait on its lease as hot standbys.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
from collections.abc import Sequence

import asyncpg

from suanli.bus.publisher import EventPublisher
from suanli.eventstore.kafka_sink import RELAY_PRODUCER, KafkaOutboxSink
from suanli.eventstore.migrator import migrate
from suanli.eventstore.pg_feed import PostgresOutboxFeed
from suanli.eventstore.ports import OutboxSink
from suanli.eventstore.postgres import DEFAULT_SCHEMA
from suanli.eventstore.relay import OutboxRelay
from suanli.eventstore.values import OutboxRecord


class _KillAfterBatches:
    def __init__(self, inner: OutboxSink, batches: int) -> None:
        self._inner = inner
        self._left = batches

    async def publish_batch(self, records: Sequence[OutboxRecord]) -> None:
        await self._inner.publish_batch(records)
        self._left -= 1
        if self._left <= 0:
            os.kill(os.getpid(), signal.SIGKILL)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The relay's command line."""
    parser = argparse.ArgumentParser(prog="suanli-outbox-relay", description=__doc__)
    parser.add_argument("--dsn", required=True, help="PostgreSQL DSN (TCP or Unix-socket URI)")
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--schema", default=DEFAULT_SCHEMA)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument(
        "--poll-interval", type=float, default=1.0, help="seconds between polls when no NOTIFY arrives"
    )
    parser.add_argument("--log-level", default="INFO")
    # Failpoint for the crash tests: SIGKILL this process right after the Nth batch is acknowledged by
    # Kafka and before it is marked, the one moment that must produce duplicates and never a loss.
    parser.add_argument("--kill-after-batches", type=int, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    """Migrate the schema, then relay its outbox to Kafka until cancelled."""
    # The relay may start before the service that writes the outbox: migrating is idempotent and cheap.
    conn = await asyncpg.connect(args.dsn)
    try:
        await migrate(conn, args.schema)
    finally:
        await conn.close()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with EventPublisher(args.bootstrap, settings=RELAY_PRODUCER) as publisher:
        sink: OutboxSink = KafkaOutboxSink(publisher)
        if args.kill_after_batches is not None:
            sink = _KillAfterBatches(sink, args.kill_after_batches)
        relay = OutboxRelay(
            PostgresOutboxFeed(args.dsn, schema=args.schema),
            sink,
            batch_size=args.batch_size,
            poll_interval=args.poll_interval,
        )
        async with relay:
            await stop.wait()
        logging.getLogger(__name__).info("relay stopped after publishing %d records", relay.published)


def main(argv: list[str] | None = None) -> None:
    """Run the outbox relay as a process (``suanli-outbox-relay``)."""
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
