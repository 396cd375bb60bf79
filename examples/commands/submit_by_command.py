"""Submit a job the way an upstream system (a CMDB, a workflow engine) does: publish a
`JobSubmissionRequested` on `jobs.commands` with the bus publisher, then read the scheduler's
`JobCommandAnswered` for its request_id from `jobs.replies` (docs/commands.md).

    SUANLI_KAFKA_BOOTSTRAP=HOST:PORT python examples/commands/submit_by_command.py \
        examples/jobs/cpu-batch.yaml --tenant initech --request-id etl-2026-12-01

Sending it again with the same --request-id answers the same job. ``SUANLI_TOPIC_PREFIX`` applies as for
every service. Exits 0 when the command was carried out, 1 when it was refused (the reply says why).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer

from suanli.bus import EventPublisher, topic_name
from suanli.contracts import decode, new_envelope


async def submit_by_command(
    bootstrap: str,
    spec_text: str,
    *,
    tenant: str,
    request_id: str,
    principal: str = "example",
    prefix: str | None = None,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """Send the command and return the scheduler's reply to it (a decoded `JobCommandAnswered`)."""
    event_id = str(uuid.uuid4())
    command = {
        **new_envelope(
            "example/submit_by_command", request_id, event_id=event_id, occurred_at=datetime.now(UTC)
        ),
        "request_id": request_id,
        "tenant": tenant,
        "principal": principal,
        "spec": spec_text,
    }
    async with EventPublisher(bootstrap) as bus:  # keyed by request_id, as the catalogue says
        await bus.publish(topic_name("jobs.commands", prefix), request_id, "JobSubmissionRequested", command)
    return await _reply(bootstrap, topic_name("jobs.replies", prefix), event_id, timeout_s)


async def _reply(bootstrap: str, topic: str, command_event_id: str, timeout_s: float) -> dict[str, Any]:
    # No consumer group: read the topic from the start and keep the answer to this very command (a
    # long-lived producer would consume replies in its own group instead).
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    for record in records:
                        _, reply = decode(record.value)
                        if reply["command_event_id"] == command_event_id:
                            return reply
    finally:
        await consumer.stop()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("spec", type=Path, help="a job spec file (docs/jobspec.md)")
    parser.add_argument(
        "--tenant", required=True, help="the tenant the job is for (its queue's first segment)"
    )
    parser.add_argument(
        "--request-id", default=str(uuid.uuid4()), help="idempotency key (default: a new one)"
    )
    parser.add_argument("--principal", default="example", help="who asked, as the job records it")
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("SUANLI_KAFKA_BOOTSTRAP"),
        help="the brokers (default: SUANLI_KAFKA_BOOTSTRAP)",
    )
    args = parser.parse_args()
    if not args.bootstrap:
        parser.error("give --bootstrap or set SUANLI_KAFKA_BOOTSTRAP (the brokers the scheduler uses)")
    reply = asyncio.run(
        submit_by_command(
            args.bootstrap,
            args.spec.read_text(),
            tenant=args.tenant,
            request_id=args.request_id,
            principal=args.principal,
        )
    )
    print(f"{reply['code']}: job {reply['job_id'] or '-'} {reply['message']}")
    return 0 if reply["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
