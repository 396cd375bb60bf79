"""Command-topic throughput and latency (not a test): JobSubmissionRequested commands on jobs.commands,
carried out by a real scheduling leader and answered on jobs.replies (docs/commands.md).

Starts Tansu and finds PostgreSQL (as bench/relay.py does), starts one scheduling service, publishes
`--commands` submissions with distinct request ids in one burst, then reads every reply. Reports the
throughput (first send to last reply received) and, per command, the latency from its occurred_at to the
moment its reply was received (same machine clock), p50 / p99. The tenant limits are off (with the
defaults, a burst past 100 is answered RESOURCE_EXHAUSTED, as over gRPC).

    .venv/bin/python bench/commands.py                  # 500 commands
    .venv/bin/python bench/commands.py --commands 2000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from suanli.bus import EventPublisher, OutgoingRecord, topic_name
from suanli.clock import to_ms
from suanli.contracts import decode, new_envelope
from suanli.infra.broker import BrokerProcess
from suanli.infra.polling import until
from suanli.infra.postgres import resolve_postgres
from suanli.scheduling.entrypoints.app import SchedulingApp
from suanli.scheduling.entrypoints.settings import SchedulingSettings

QUEUES = "queues:\n  - name: acme\n"
SPEC = """
name: bench
queue: acme
tasks:
  - name: w
    resources: {cpu: "1", memory: 1Gi}
    command: python etl.py
"""


async def run(dsn: str, bootstrap: str, commands: int, home: Path) -> tuple[float, list[float]]:
    prefix = f"bench-{secrets.token_hex(3)}"
    queues = home / "queues.yaml"
    queues.write_text(QUEUES)
    cfg = SchedulingSettings.load(
        {},
        dsn=dsn,
        bootstrap=bootstrap,
        queues_path=queues,
        store_schema=f"bench_{secrets.token_hex(4)}",
        topic_prefix=prefix,
        listen="127.0.0.1:0",
        instance="bench",
        # The tenant limits (50 submits/s, burst 100 by default) answer RESOURCE_EXHAUSTED to a burst, as
        # they do over gRPC; off here, so the figure is the command path's own capacity.
        submit_rate=0,
        max_pending_jobs=0,
    )
    app = SchedulingApp(cfg)
    await app.start()
    consumer = AIOKafkaConsumer(
        topic_name("jobs.replies", prefix),
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=100,
    )
    try:
        await until(lambda: _leads(app), 60, "leadership")
        await consumer.start()
        async with EventPublisher(bootstrap) as bus:
            # One command answered first: the leader's command consumer has joined its group, so the
            # figures below leave the group join out.
            await bus.publish_many([_command(bus, prefix, "warm-up", datetime.now(UTC))])
            await _replies(consumer, 1, {"warm-up": 0})
            sent: dict[str, int] = {}
            records = []
            started = time.perf_counter()
            for i in range(commands):
                at = datetime.now(UTC)
                sent[f"r-{i}"] = to_ms(at)
                records.append(_command(bus, prefix, f"r-{i}", at))
            await bus.publish_many(records)
            latencies = await _replies(consumer, commands, sent)
        elapsed = time.perf_counter() - started
        return commands / elapsed, latencies
    finally:
        await consumer.stop()
        await app.stop()


def _command(bus: EventPublisher, prefix: str, request_id: str, at: datetime) -> OutgoingRecord:
    command = {
        **new_envelope("bench", request_id, event_id=uuid.uuid4(), occurred_at=at),
        "request_id": request_id,
        "tenant": "acme",
        "principal": "bench",
        "spec": SPEC,
    }
    return bus.encode(topic_name("jobs.commands", prefix), request_id, "JobSubmissionRequested", command)


async def _replies(consumer: AIOKafkaConsumer, count: int, sent: dict[str, int]) -> list[float]:
    """Latency (ms) from each command's occurred_at to its reply's receipt, for ``count`` replies."""
    latencies: list[float] = []
    while len(latencies) < count:
        for batch in (await consumer.getmany(timeout_ms=500)).values():
            received = to_ms(datetime.now(UTC))
            for record in batch:
                _, reply = decode(record.value)
                assert reply["ok"], reply
                latencies.append(received - sent[reply["request_id"]])
    return latencies


async def _leads(app: SchedulingApp) -> bool:
    return app.is_leader and bool(app.c.projection.queues)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commands", type=int, default=500)
    parser.add_argument("--dsn", default=None, help="PostgreSQL (default: SUANLI_PG_DSN, :5432, embedded)")
    parser.add_argument("--bootstrap", default=None, help="Kafka bootstrap (default: start Tansu)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="suanli-bench-commands-") as tmp:
        endpoint = None
        dsn = args.dsn
        if dsn is None:
            endpoint = resolve_postgres(data_dir=Path(tmp) / "pg")
            dsn = endpoint.dsn
        broker = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            broker = BrokerProcess(log_path=Path(tmp) / "tansu.log")
            bootstrap = broker.start()
        try:
            rate, latencies = asyncio.run(run(dsn, bootstrap, args.commands, Path(tmp)))
        finally:
            if broker is not None:
                broker.stop()
            if endpoint is not None:
                endpoint.stop()
    cuts = statistics.quantiles(latencies, n=100)
    print(
        f"command topic: {args.commands} submissions, {rate:,.0f} commands/s answered; command -> reply "
        f"p50 {cuts[49]:.0f} ms, p99 {cuts[98]:.0f} ms; on {os.cpu_count()} cores, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
