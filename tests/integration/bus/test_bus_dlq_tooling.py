"""`suanli dlq` against the real broker: records dead-lettered by a real consumer are listed by reason,
shown decoded (or as bytes), replayed to their source topic with their key and headers, and purged by a
durable mark that list, show and replay respect."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
from collections.abc import Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from bus_testkit import FAST_CONSUMER, FAST_RETRY, BusTopics, read_topic, sample_event, wait_until
from click.testing import Result
from pagekit import assert_pages, assert_refuses_garbage, follow
from typer.testing import CliRunner

from suanli.bus import (
    ConsumedEvent,
    EventConsumer,
    EventPublisher,
    OutgoingRecord,
    ProducerSettings,
    RetriableError,
)
from suanli.bus.dlq import PURGE_GROUP
from suanli.bus.dlq_kafka import DeadLetterTopics
from suanli.bus.headers import (
    DLQ_HEADERS,
    DLQ_REPLAYED_FROM,
    DLQ_REPLAYS,
    EVENT_ID,
    dead_letter_headers,
    header,
)
from suanli.cli.main import app


class QuotaRejected(Exception):
    """A business error: retrying the same record cannot help."""


async def dlq(topics: BusTopics, *args: str, answer: str | None = None) -> Result:
    """Run ``suanli dlq ARGS`` the way a person would (off the event loop, a loop of its own)."""
    argv = ["dlq", *args, "--bootstrap", topics.bootstrap, "--prefix", topics.prefix]
    # A wide terminal: the test topics' names are long, and a narrow table would wrap the cells.
    return await asyncio.to_thread(CliRunner().invoke, app, argv, input=answer, env={"COLUMNS": "300"})


async def dlq_json(topics: BusTopics, *args: str) -> Any:
    result = await dlq(topics, *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


async def committed_mark(bootstrap: str, topic: str) -> int | None:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=PURGE_GROUP, enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(TopicPartition(topic, 0))
    finally:
        await consumer.stop()


async def test_dead_letters_are_listed_shown_replayed_and_purged(
    bus_topics: BusTopics, publisher: EventPublisher
) -> None:
    garbage = os.urandom(64)
    await publisher.publish_raw(bus_topics.events, b"node-1", garbage, [("origin", b"fuzzer")])
    rejected = [sample_event("JobCancelled", index=i) for i in range(3)]
    for i, record in enumerate(rejected):
        await publisher.publish(bus_topics.events, f"job-{i}", "JobCancelled", record)
    stuck = sample_event("JobCancelled")
    await publisher.publish(bus_topics.events, "job-stuck", "JobCancelled", stuck)
    bad_ids = {r["event_id"] for r in rejected}
    fixed = {"quota": False}
    handled: list[ConsumedEvent] = []

    async def handle(event: ConsumedEvent) -> None:
        if event.event_id == stuck["event_id"]:
            raise RetriableError("database restarting")
        if event.event_id in bad_ids and not fixed["quota"]:
            raise QuotaRejected(f"{event.key_str}: over quota")
        handled.append(event)

    group = f"g-{secrets.token_hex(3)}"
    consumer = EventConsumer(
        bus_topics.bootstrap, group, [bus_topics.events], handle, settings=FAST_CONSUMER, retry=FAST_RETRY
    )
    async with consumer:
        await read_topic(bus_topics.bootstrap, bus_topics.dlq, 5)

        listed = await dlq_json(bus_topics, "list")
        assert listed["topics"] == [
            {
                "topic": bus_topics.dlq,
                "records": 5,
                "purged": 0,
                "replayed_again": 0,
                "by_reason": {"decode": 1, "handler": 3, "retries-exhausted": 1},
                "oldest": listed["topics"][0]["oldest"],
                "newest": listed["topics"][0]["newest"],
            }
        ]
        table = await dlq(bus_topics, "list", "--by-reason")
        assert table.exit_code == 0 and "retries-exhausted" in table.stdout

        every = (await dlq_json(bus_topics, "show", "events"))["records"]
        # newest first
        assert [r["address"] for r in every] == [f"{bus_topics.dlq}/0/{i}" for i in reversed(range(5))]
        shown = (await dlq_json(bus_topics, "show", "events", "--reason", "QuotaRejected"))["records"]
        assert {r["event_id"] for r in shown} == bad_ids
        first = next(r for r in shown if r["key"] == "job-0")
        assert first["reason"] == "handler" and first["attempts"] == 1
        assert (
            first["error_class"].endswith("QuotaRejected") and first["error_message"] == "job-0: over quota"
        )
        assert first["source"]["topic"] == bus_topics.events
        assert first["event_name"] == "JobCancelled" and first["record"]["job_id"] == rejected[0]["job_id"]
        (undecodable,) = (await dlq_json(bus_topics, "show", "events", "--reason", "decode"))["records"]
        assert undecodable["record"] is None and undecodable["decode_error"]
        assert undecodable["value"].startswith("64 bytes, sha256 ")
        assert undecodable["headers"]["origin"] == "fuzzer"
        panels = await dlq(bus_topics, "show", bus_topics.dlq, "--limit", "5")
        assert (
            panels.exit_code == 0 and "JobCancelled" in panels.stdout and "does not decode" in panels.stdout
        )

        # The quota is fixed: replay what the handler refused; the records come back as they were sent.
        fixed["quota"] = True
        dry = await dlq(bus_topics, "replay", "events", "--reason", "handler", "--dry-run")
        assert dry.exit_code == 0 and "would replay 3 record(s)" in dry.stdout
        replayed = await dlq(bus_topics, "replay", "events", "--reason", "handler", "--yes")
        assert replayed.exit_code == 0 and "replayed 3 record(s)" in replayed.stdout, replayed.output
        await wait_until(lambda: len(handled) == 3, what="the three replayed records handled")
    assert sorted((e.key, e.event_id) for e in handled) == [
        (f"job-{i}".encode(), r["event_id"]) for i, r in enumerate(rejected)
    ]
    for event in handled:
        assert header(event.headers, DLQ_REPLAYS) == "1"
        assert (header(event.headers, DLQ_REPLAYED_FROM) or "").startswith(f"{bus_topics.dlq}/0/")
        assert not {name for name, _ in event.headers} & set(DLQ_HEADERS)
        assert header(event.headers, EVENT_ID) == event.record["event_id"]

    recent = (await dlq_json(bus_topics, "show", "events", "--since", "1h"))["records"]
    assert len(recent) == 5
    assert (await dlq_json(bus_topics, "show", "events", "--since", "2999-01-01T00:00Z"))["records"] == []
    declined = await dlq(bus_topics, "purge", "events", answer="n\n")
    assert declined.exit_code == 1 and await committed_mark(bus_topics.bootstrap, bus_topics.dlq) is None

    # Purge the two oldest: a durable mark (the purge group's committed offset) that readers respect.
    purged = await dlq(bus_topics, "purge", "events", "--limit", "2", "--yes")
    assert purged.exit_code == 0 and "purged 2 record(s)" in purged.stdout, purged.output
    assert await committed_mark(bus_topics.bootstrap, bus_topics.dlq) == 2
    (summary,) = (await dlq_json(bus_topics, "list"))["topics"]
    assert (summary["records"], summary["purged"]) == (3, 2)
    assert sum(summary["by_reason"].values()) == 3
    remaining = (await dlq_json(bus_topics, "show", "events"))["records"]
    assert remaining == every[:3]

    refused = await dlq(bus_topics, "replay", "events", "--reason", "handler", "--purge", "--yes")
    assert refused.exit_code == 2 and "--purge cannot be combined" in refused.output
    unknown = await dlq(bus_topics, "show", "nosuch.topic")
    assert unknown.exit_code == 2 and "no dead-letter topic" in unknown.output

    everything = await dlq(bus_topics, "purge", bus_topics.dlq, "--yes")
    assert everything.exit_code == 0 and "purged 3 record(s)" in everything.stdout
    (summary,) = (await dlq_json(bus_topics, "list"))["topics"]
    assert (summary["records"], summary["purged"]) == (0, 5)
    assert (await dlq_json(bus_topics, "list", "--nonempty"))["topics"] == []
    nothing = await dlq(bus_topics, "replay", "events", "--yes")
    assert nothing.exit_code == 0 and "replayed 0 record(s)" in nothing.stdout


def dead_letters(topics: BusTopics, count: int) -> list[OutgoingRecord]:
    """``count`` records as a consumer dead-letters them (values v0, v1, ...)."""
    return [
        OutgoingRecord(
            topics.dlq,
            b"k",
            b"v%d" % i,
            dead_letter_headers(
                [],
                error=ValueError(i),
                topic=topics.events,
                partition=0,
                offset=i,
                attempts=1,
                reason="handler",
                consumer="billing",
            ),
        )
        for i in range(count)
    ]


async def test_records_past_a_short_end_offset_are_read(bus_topics: BusTopics) -> None:
    """Five dead letters stored as one batch: Tansu's end offset stops at the batch's base + 1, and a
    purge mark inside the batch must hide only the records before it."""
    async with EventPublisher(bus_topics.bootstrap, settings=ProducerSettings(linger_ms=50)) as batching:
        await batching.publish_many(dead_letters(bus_topics, 5))
    async with DeadLetterTopics(bus_topics.bootstrap) as dlqs:
        assert [d.value for d in await dlqs.read(bus_topics.dlq)] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
        assert await dlqs.purge(bus_topics.dlq, (await dlqs.read(bus_topics.dlq))[:2]) == {0: 2}
        assert [d.value for d in await dlqs.read(bus_topics.dlq)] == [b"v2", b"v3", b"v4"]
        summary = await dlqs.summary(bus_topics.dlq)
        assert (summary.count, summary.purged) == (3, 2)
        # A mark never moves back.
        assert await dlqs.purge(bus_topics.dlq, (await dlqs.read(bus_topics.dlq, marks={}))[:1]) == {0: 2}


async def test_show_pages_newest_first(bus_topics: BusTopics) -> None:
    async with EventPublisher(bus_topics.bootstrap, settings=ProducerSettings(linger_ms=50)) as batching:
        await batching.publish_many(dead_letters(bus_topics, 7))
    argv = ["dlq", "show", "events", "-o", "json", "--bootstrap", bus_topics.bootstrap]
    argv += ["--prefix", bus_topics.prefix]

    def run(extra: Sequence[str]) -> Result:
        return CliRunner().invoke(app, [*argv, *extra])

    def parse(stdout: str) -> list[tuple[str, int]]:
        return [(r["dead_lettered_at"], r["source"]["offset"]) for r in json.loads(stdout)["records"]]

    everything = parse((await asyncio.to_thread(run, ["--limit", "0"])).stdout)
    assert [offset for _, offset in everything] == list(reversed(range(7)))
    pages = await asyncio.to_thread(follow, run, parse, 3)
    assert_pages(pages, everything, newest=lambda row: row[0])
    await asyncio.to_thread(assert_refuses_garbage, run)
