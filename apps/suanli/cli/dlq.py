"""`suanli dlq list|show|replay|purge`: the dead-letter topics from the shell.

Thin over the kernel: `suanli.bus.dlq` decides (selection, replay records, purge marks),
`suanli.bus.dlq_kafka` talks to the broker; this module parses options and prints.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

import typer
from aiokafka.errors import KafkaError
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from suanli.bus.dlq import DeadLetter, NotReplayable, Selection, TopicSummary, decode_value, dlq_name
from suanli.bus.dlq_kafka import DeadLetterTopics, UnknownDeadLetterTopic, replay
from suanli.bus.publisher import EventPublisher, ProducerSettings
from suanli.cli import paging
from suanli.cli.client import EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE, Failure, fail
from suanli.cli.output import (
    TABLE,
    NoHeadersOption,
    OutputOption,
    Rows,
    SortByOption,
    emit,
    emit_rows,
    stdout,
)
from suanli.settings import KAFKA_BOOTSTRAP_ENV, TOPIC_PREFIX_ENV

T = TypeVar("T")

app = typer.Typer(
    help="Inspect, replay and purge dead-letter topics (<topic>.dlq).",
    no_args_is_help=True,
)

Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap",
        envvar=KAFKA_BOOTSTRAP_ENV,
        metavar="HOST:PORT",
        help=f"Kafka bootstrap servers (env {KAFKA_BOOTSTRAP_ENV}).",
    ),
]
Prefix = Annotated[
    str,
    typer.Option(
        "--prefix",
        envvar=TOPIC_PREFIX_ENV,
        help=f"Topic namespace of the deployment (env {TOPIC_PREFIX_ENV}).",
    ),
]
TopicArg = Annotated[
    str,
    typer.Argument(help="A dead-letter topic (jobs.events.dlq) or the topic it belongs to (jobs.events)."),
]
ReasonOpt = Annotated[
    str | None,
    typer.Option(
        "--reason",
        help="Only this reason (decode, handler, retries-exhausted) or error class (full or short).",
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since",
        help="Only records dead-lettered since: an ISO time (2026-12-01T10:00Z) or an age (30m, 2h, 1d).",
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="At most this many, oldest first.")]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
_AGE = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime) -> int:
    """``--since`` as a broker timestamp (ms): an age before ``now`` or an ISO time (UTC unless it says)."""
    age = _AGE.match(text.strip())
    if age:
        moment = now - timedelta(**{_UNITS[age.group(2)]: int(age.group(1))})
    else:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise typer.BadParameter(
                f"{text!r} is neither an ISO time nor an age like 30m", param_hint="--since"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _selection(reason: str | None, since: str | None, limit: int | None) -> Selection:
    since_ms = None if since is None else parse_since(since, datetime.now(UTC))
    return Selection(reason=reason, since_ms=since_ms, limit=limit)


def _run(bootstrap: str, work: Callable[[DeadLetterTopics], Awaitable[T]]) -> T:
    """Run ``work`` against the broker; its failures become one line and an exit code."""

    async def main() -> T:
        async with DeadLetterTopics(bootstrap) as topics:
            return await work(topics)

    try:
        return asyncio.run(main())
    except UnknownDeadLetterTopic as exc:
        raise fail(Failure(str(exc), EXIT_USAGE)) from None
    except NotReplayable as exc:
        raise fail(Failure(f"cannot replay: {exc}", EXIT_REFUSED)) from None
    except (KafkaError, TimeoutError, OSError) as exc:
        raise fail(Failure(f"broker at {bootstrap}: {exc!r}", EXIT_UNREACHABLE)) from None


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _summary_data(s: TopicSummary) -> dict[str, Any]:
    return {
        "topic": s.topic,
        "records": s.count,
        "purged": s.purged,
        "replayed_again": s.replayed_again,
        "by_reason": dict(s.by_reason),
        "oldest": _when(s.oldest_ms),
        "newest": _when(s.newest_ms),
    }


def summaries_rows(summaries: Sequence[TopicSummary], by_reason: bool) -> Rows:
    """``suanli dlq list``: one row per topic, or per topic and reason (the topic's cells on its first)."""
    columns = ("topic", *(("reason",) if by_reason else ()), "records", "purged", "replayed_again")
    rows: list[tuple[str, ...]] = []
    names: list[str] = []
    items: list[dict[str, Any]] = []
    for s in summaries:
        data = _summary_data(s)
        tail = (_when(s.oldest_ms), _when(s.newest_ms))
        counts = [(str(s.count),)] if not by_reason else [("-", str(s.count))]
        if by_reason and s.by_reason:
            counts = [(reason, str(count)) for reason, count in s.by_reason.items()]
        for head in counts:
            rows.append((s.topic, *head, str(s.purged), str(s.replayed_again), *tail))
            names.append(s.topic)
            items.append(data)
    return Rows(
        (*columns, "oldest", "newest"),
        rows,
        title="dead-letter topics",
        right=frozenset({"records", "purged", "replayed_again"}),
        kind="topic",
        names=names,
        items=items,
        key="topics",
        group=1,
    )


@app.command("list")
def list_topics(
    by_reason: Annotated[bool, typer.Option("--by-reason", help="One row per topic and reason.")] = False,
    nonempty: Annotated[bool, typer.Option("--nonempty", help="Only topics holding records.")] = False,
    output: OutputOption = TABLE,
    no_headers: NoHeadersOption = False,
    sort_by: SortByOption = "",
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    prefix: Prefix = "",
) -> None:
    """Every dead-letter topic: records past the purge mark, purged ones, replays that failed again."""

    async def work(topics: DeadLetterTopics) -> list[TopicSummary]:
        return await topics.summaries(await topics.topics(prefix))

    summaries = [s for s in _run(bootstrap, work) if s.count or not nonempty]
    rows = summaries_rows(summaries, by_reason)
    data = {"topics": [_summary_data(s) for s in summaries]}
    emit_rows(output, data, rows, no_headers=no_headers, sort_by=sort_by)


def _scalar(value: Any) -> Any:
    """Avro values JSON and YAML cannot hold (timestamps, bytes, decimals, uuids) as text."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _plain(record: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if record is None else json.loads(json.dumps(record, default=_scalar))


def _letter_data(letter: DeadLetter) -> dict[str, Any]:
    from suanli.bus.codec import default_codec

    decoded = decode_value(letter, default_codec())
    return {
        "address": letter.address,
        "dead_lettered_at": _when(letter.timestamp_ms),
        "reason": letter.reason,
        "consumer": letter.consumer,
        "error_class": letter.error_class,
        "error_message": letter.error_message,
        "attempts": letter.attempts,
        "source": {
            "topic": letter.source_topic,
            "partition": letter.source_partition,
            "offset": letter.source_offset,
        },
        "key": None if letter.key is None else letter.key.decode("utf-8", errors="replace"),
        "event_id": letter.event_id,
        "replays": letter.replays,
        "replayed_from": letter.replayed_from,
        "headers": {name: value.decode("utf-8", errors="replace") for name, value in letter.headers},
        "event_name": decoded.event_name,
        "record": _plain(decoded.record),
        "decode_error": decoded.error,
        "value": decoded.summary,
    }


def _letter_panel(data: dict[str, Any]) -> Panel:
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    source = data["source"]
    rows = [
        ("reason", data["reason"]),
        ("consumer", str(data["consumer"])),
        ("error", f"{data['error_class']}: {data['error_message']}"),
        ("source", f"{source['topic']}[{source['partition']}]@{source['offset']}"),
        ("attempts", str(data["attempts"])),
        ("key", str(data["key"])),
        ("event id", str(data["event_id"])),
        ("dead-lettered", data["dead_lettered_at"]),
    ]
    if data["replays"]:
        rows.append(("replays", f"{data['replays']} (last from {data['replayed_from']})"))
    for name, value in rows:
        facts.add_row(name, Text(value))
    body: list[RenderableType] = [facts]
    if data["record"] is not None:
        body.append(Text(f"{data['event_name']}:", style="bold"))
        body.append(Text(json.dumps(data["record"], indent=2, ensure_ascii=False)))
    else:
        body.append(Text(f"does not decode ({data['decode_error']}): {data['value']}", style="yellow"))
    return Panel(Group(*body), title=data["address"], title_align="left")


async def _selected(topics: DeadLetterTopics, topic: str, selection: Selection) -> list[DeadLetter]:
    return selection.apply(await topics.read(topic))


@app.command()
def show(
    topic: TopicArg,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=0, help="At most this many records (0: all).")
    ] = 20,
    continue_token: paging.ContinueOption = "",
    output: OutputOption = TABLE,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    prefix: Prefix = "",
) -> None:
    """Records of a dead-letter topic, newest first: why, where from, the event when it decodes (else a
    bytes summary).

    When more are left, stderr says how to go on: --continue TOKEN shows the next ones.
    """
    name = dlq_name(topic, prefix)
    selection = _selection(reason, since, None)
    matching = _run(bootstrap, lambda topics: _selected(topics, name, selection))
    letters, token = paging.newest_first(matching, _dead_lettered, limit=limit, token=continue_token)
    data = [_letter_data(letter) for letter in letters]
    panels: list[RenderableType] = [_letter_panel(d) for d in data] or [Text(f"{name}: no records")]
    emit(output, {"topic": name, "records": data}, Group(*panels))
    paging.more(len(letters), token)


def _dead_lettered(letter: DeadLetter) -> paging.Key:
    # The broker's time orders partitions against each other; the offset orders records of one instant.
    return letter.timestamp_ms, letter.partition, letter.offset


def _confirm(question: str, yes: bool) -> None:
    if not yes and not typer.confirm(question):
        raise typer.Exit(1)


@app.command("replay")
def replay_topic(
    topic: TopicArg,
    reason: ReasonOpt = None,
    since: SinceOpt = None,
    limit: LimitOpt = None,
    purge: Annotated[
        bool,
        typer.Option("--purge", help="Then purge what was replayed (not with --reason/--since)."),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be replayed; send nothing.")
    ] = False,
    yes: YesOpt = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    prefix: Prefix = "",
) -> None:
    """Republish records to their source topics, original key and headers kept (consumers de-duplicate).

    Each replayed record carries dlq-replayed-from and dlq-replays headers, so one that fails again shows
    up in this dead-letter topic as a replay. Replaying twice is harmless for consumers, but adds to the
    dead-letter topic whatever fails again: --purge marks the replayed records purged once acknowledged.
    """
    name = dlq_name(topic, prefix)
    selection = _selection(reason, since, limit)
    if purge and selection.narrows:
        # A purge mark hides everything before it, so it cannot skip the records a filter left out.
        raise fail(Failure("--purge cannot be combined with --reason or --since", EXIT_USAGE))

    async def work(topics: DeadLetterTopics) -> tuple[int, dict[int, int] | None]:
        letters = await _selected(topics, name, selection)
        if dry_run or not letters:
            return len(letters), None
        _confirm(f"replay {len(letters)} record(s) of {name} to their source topics?", yes)
        settings = ProducerSettings(client_id="suanli-dlq-replay")
        async with EventPublisher(bootstrap, settings=settings) as publisher:
            sent = await replay(letters, publisher)
        marks = await topics.purge(name, letters) if purge else None
        return sent, marks

    count, marks = _run(bootstrap, work)
    verb = "would replay" if dry_run else "replayed"
    stdout.print(f"{verb} {count} record(s) of {name}")
    if marks is not None:
        stdout.print(f"purged up to {_marks_text(marks)}")


def _marks_text(marks: dict[int, int]) -> str:
    return ", ".join(f"partition {p} offset {o}" for p, o in sorted(marks.items())) or "nothing"


@app.command("purge")
def purge_topic(
    topic: TopicArg,
    limit: LimitOpt = None,
    yes: YesOpt = False,
    bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
    prefix: Prefix = "",
) -> None:
    """Mark records of a dead-letter topic purged (all, or the oldest --limit); list, show, replay skip them.

    Kafka cannot delete chosen records, so the mark is the committed offset of the consumer group
    suanli-dlq-purged per partition; the broker reclaims the storage by the topic's retention (30 days).
    """
    name = dlq_name(topic, prefix)

    async def work(topics: DeadLetterTopics) -> tuple[int, dict[int, int]]:
        letters = Selection(limit=limit).apply(await topics.read(name))
        if not letters:
            return 0, await topics.marks(name)
        _confirm(f"purge {len(letters)} record(s) of {name}?", yes)
        return len(letters), await topics.purge(name, letters)

    count, marks = _run(bootstrap, work)
    stdout.print(f"purged {count} record(s) of {name}; marks: {_marks_text(marks)}")
