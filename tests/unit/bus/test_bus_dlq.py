"""The pure part of the dead-letter tooling: headers read out, selection, summaries, replays, marks."""

from __future__ import annotations

import uuid

import pytest

from suanli.bus import AvroCodec
from suanli.bus.dlq import (
    DeadLetter,
    NotReplayable,
    Selection,
    bytes_summary,
    decode_value,
    dlq_name,
    dlq_topics,
    marks_after,
    replay_of,
    summarise,
)
from suanli.bus.headers import DLQ_HEADERS, DLQ_REPLAYED_FROM, DLQ_REPLAYS, dead_letter_headers, header
from suanli.contracts import default_registry, sample_records


def letter(
    offset: int,
    *,
    error: Exception | None = None,
    reason: str = "handler",
    attempts: int = 1,
    stamp_ms: int = 1_000,
    value: bytes | None = b"\x00",
    original: list[tuple[str, bytes]] | None = None,
) -> DeadLetter:
    headers = dead_letter_headers(
        original if original is not None else [("event-id", b"e-%d" % offset), ("traceparent", b"00-t-s-01")],
        error=error or ValueError(f"bad {offset}"),
        topic="jobs.events",
        partition=2,
        offset=100 + offset,
        attempts=attempts,
        reason=reason,
        consumer="billing",
    )
    return DeadLetter("jobs.events.dlq", 0, offset, stamp_ms, b"job-%d" % offset, value, tuple(headers))


def test_a_dead_letter_says_why_and_where_it_came_from() -> None:
    dl = letter(3, error=KeyError("tenant"), reason="handler", attempts=5)
    assert (dl.reason, dl.consumer) == ("handler", "billing")
    assert dl.error_class == "builtins.KeyError"
    assert dl.error_message == "'tenant'"
    assert (dl.source_topic, dl.source_partition, dl.source_offset) == ("jobs.events", 2, 103)
    assert dl.source == "jobs.events[2]@103"
    assert dl.attempts == 5
    assert dl.event_id == "e-3"
    assert dl.address == "jobs.events.dlq/0/3"
    assert dl.replays == 0 and dl.replayed_from is None


def test_records_without_a_reason_header_are_read_by_their_attempts() -> None:
    bare = [(n, v) for n, v in letter(0, attempts=0).headers if n != "dlq-reason"]
    assert DeadLetter("t.dlq", 0, 0, 0, None, b"", tuple(bare)).reason == "decode"
    bare = [(n, v) for n, v in letter(0, attempts=3).headers if n != "dlq-reason"]
    assert DeadLetter("t.dlq", 0, 0, 0, None, b"", tuple(bare)).reason == "handler"


def test_selection_by_reason_error_class_age_and_limit() -> None:
    letters = [
        letter(0, reason="decode", attempts=0, stamp_ms=1_000),
        letter(1, error=TimeoutError("db"), reason="retries-exhausted", stamp_ms=2_000),
        letter(2, error=KeyError("x"), stamp_ms=3_000),
        letter(3, error=KeyError("y"), stamp_ms=4_000),
    ]
    assert [d.offset for d in Selection(reason="decode").apply(letters)] == [0]
    assert [d.offset for d in Selection(reason="KeyError").apply(letters)] == [2, 3]
    assert [d.offset for d in Selection(reason="builtins.TimeoutError").apply(letters)] == [1]
    assert [d.offset for d in Selection(since_ms=2_500).apply(letters)] == [2, 3]
    assert [d.offset for d in Selection(limit=2).apply(letters)] == [0, 1]
    assert [d.offset for d in Selection(reason="KeyError", limit=1).apply(letters)] == [2]
    assert not Selection(limit=3).narrows and Selection(reason="decode").narrows


def test_summary_counts_by_reason_and_replays_that_failed_again() -> None:
    again = letter(2, original=[("event-id", b"e-2"), (DLQ_REPLAYS, b"1")])
    letters = [letter(0, reason="decode", attempts=0, stamp_ms=5), letter(1, stamp_ms=9), again]
    summary = summarise("jobs.events.dlq", letters, purged=4)
    assert summary.count == 3 and summary.purged == 4
    assert dict(summary.by_reason) == {"decode": 1, "handler": 2}
    assert summary.replayed_again == 1
    assert (summary.oldest_ms, summary.newest_ms) == (5, 1_000)
    empty = summarise("x.dlq", [])
    assert (empty.count, empty.oldest_ms, dict(empty.by_reason)) == (0, None, {})


def test_a_replay_is_the_original_record_marked_as_a_replay() -> None:
    dl = letter(7)
    replay = replay_of(dl)
    assert (replay.topic, replay.key, replay.value) == ("jobs.events", b"job-7", b"\x00")
    names = [name for name, _ in replay.headers]
    assert not set(names) & set(DLQ_HEADERS)
    assert header(replay.headers, "event-id") == "e-7"  # consumers de-duplicate by it
    assert header(replay.headers, "traceparent") == "00-t-s-01"
    assert header(replay.headers, DLQ_REPLAYED_FROM) == "jobs.events.dlq/0/7"
    assert header(replay.headers, DLQ_REPLAYS) == "1"


def test_a_replay_that_fails_again_counts_its_replays() -> None:
    first = replay_of(letter(1))
    # The consumer dead-letters the replayed record again: its headers are kept, dlq-* added anew.
    again = DeadLetter(
        "jobs.events.dlq",
        0,
        9,
        0,
        first.key,
        first.value,
        tuple(
            dead_letter_headers(
                first.headers,
                error=ValueError("still bad"),
                topic="jobs.events",
                partition=2,
                offset=555,
                attempts=1,
                reason="handler",
                consumer="billing",
            )
        ),
    )
    assert again.replays == 1 and again.replayed_from == "jobs.events.dlq/0/1"
    assert again.source_offset == 555
    second = replay_of(again)
    assert header(second.headers, DLQ_REPLAYS) == "2"
    assert [n for n, _ in second.headers].count(DLQ_REPLAYS) == 1


def test_a_record_without_source_headers_cannot_be_replayed() -> None:
    with pytest.raises(NotReplayable, match="no source topic"):
        replay_of(DeadLetter("odd.dlq", 0, 4, 0, None, b"x", (("event-id", b"e"),)))


def test_purge_marks_lie_after_the_last_record_of_each_partition() -> None:
    letters = [
        DeadLetter("t.dlq", 0, 4, 0, None, b""),
        DeadLetter("t.dlq", 1, 9, 0, None, b""),
        DeadLetter("t.dlq", 0, 7, 0, None, b""),
    ]
    assert marks_after(letters) == {0: 8, 1: 10}
    assert marks_after([]) == {}


def test_values_decode_when_they_can_and_are_summarised_when_not() -> None:
    codec = AvroCodec()
    record = {**sample_records(default_registry().current("JobCancelled"))[0], "event_id": str(uuid.uuid4())}
    good = DeadLetter("jobs.events.dlq", 0, 0, 0, None, codec.encode("JobCancelled", record))
    decoded = decode_value(good, codec)
    assert decoded.event_name == "JobCancelled" and decoded.error is None
    assert decoded.record is not None and decoded.record["event_id"] == record["event_id"]

    garbage = DeadLetter("jobs.events.dlq", 0, 1, 0, None, b"\xc3\x01 not avro at all, really")
    failed = decode_value(garbage, codec)
    assert failed.record is None and failed.error
    assert failed.summary.startswith("26 bytes, sha256 ") and "starts c3 01 20" in failed.summary
    assert decode_value(DeadLetter("t.dlq", 0, 2, 0, None, None), codec).summary == "null (tombstone)"
    assert bytes_summary(b"ab").endswith("starts 61 62")


def test_topic_names_an_operator_may_type() -> None:
    assert dlq_name("jobs.events") == "jobs.events.dlq"
    assert dlq_name("jobs.events.dlq") == "jobs.events.dlq"
    assert dlq_name("jobs.events", "staging") == "staging.jobs.events.dlq"
    assert dlq_name("staging.jobs.events.dlq", "staging") == "staging.jobs.events.dlq"
    names = ["b.dlq", "a", "staging.a.dlq", "a.dlq", "staging.a"]
    assert dlq_topics(names) == ["a.dlq", "b.dlq", "staging.a.dlq"]
    assert dlq_topics(names, "staging") == ["staging.a.dlq"]
