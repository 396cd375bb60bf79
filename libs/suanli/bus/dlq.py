"""Dead letters as an operator handles them: read, select, summarise, replay and purge (the pure part).

The records are those `suanli.bus.deadletter` writes to ``<topic>.dlq``: the original key, value and
headers plus ``dlq-*`` headers saying why. Nothing here talks to a broker; `suanli.bus.dlq_kafka` reads
and writes the topics and the purge marks, and ``suanli dlq`` is the command line over both.

Purging: Kafka cannot delete chosen records, and the development broker cannot even truncate a topic
(no ``delete_records``), so a purge is a *mark*: per dead-letter partition, the offset of the first record
still wanted, kept as the committed offset of the consumer group `PURGE_GROUP`. Readers skip what lies
before it. The storage itself is reclaimed by the topic's retention (30 days) on Apache Kafka.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from suanli.bus.codec import Codec
from suanli.bus.headers import (
    DLQ_ATTEMPTS,
    DLQ_CONSUMER,
    DLQ_ERROR_CLASS,
    DLQ_ERROR_MESSAGE,
    DLQ_HEADERS,
    DLQ_ORIGINAL_OFFSET,
    DLQ_ORIGINAL_PARTITION,
    DLQ_ORIGINAL_TOPIC,
    DLQ_REASON,
    DLQ_REPLAYED_FROM,
    DLQ_REPLAYS,
    DLQ_VALUE_DROPPED,
    EVENT_ID,
    EVENT_NAME,
    Headers,
    header,
    set_headers,
)
from suanli.bus.records import StoredRecord
from suanli.bus.topics import DLQ_SUFFIX

PURGE_GROUP: Final = "suanli-dlq-purged"
"""The consumer group whose committed offset per dead-letter partition is that partition's purge mark."""

PurgeMarks = Mapping[int, int]
"""Per partition of a dead-letter topic, the offset of the first record not purged (absent: none purged)."""


class NotReplayable(ValueError):
    """A dead-letter record that cannot be replayed from the letter itself.

    It names no source topic (it was not written by the bus), or it holds no value because the record
    was too large to copy (``dlq-value-dropped``).
    """


def _int_or_none(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record of a dead-letter topic, with its ``dlq-*`` headers read out."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()

    @classmethod
    def from_record(cls, record: StoredRecord) -> DeadLetter:
        """The dead letter a consumed record holds."""
        return cls(
            record.topic,
            record.partition,
            record.offset,
            record.timestamp,
            record.key,
            record.value,
            tuple(record.headers or ()),
        )

    def _header(self, name: str) -> str | None:
        return header(self.headers, name)

    @property
    def attempts(self) -> int | None:
        """Handler attempts made before giving up (0: it never decoded)."""
        return _int_or_none(self._header(DLQ_ATTEMPTS))

    @property
    def reason(self) -> str:
        """The metric reason: ``decode``, ``handler`` or ``retries-exhausted``.

        Records written before the ``dlq-reason`` header existed say ``decode`` when they never decoded
        and ``handler`` otherwise.
        """
        return self._header(DLQ_REASON) or ("decode" if self.attempts == 0 else "handler")

    @property
    def consumer(self) -> str | None:
        """The consumer group (or faust app id) that gave up on it (None: written before the header)."""
        return self._header(DLQ_CONSUMER)

    @property
    def error_class(self) -> str:
        """The fully qualified class of the error that dead-lettered the record."""
        return self._header(DLQ_ERROR_CLASS) or ""

    @property
    def error_message(self) -> str:
        """The error's text (at most 2 KiB)."""
        return self._header(DLQ_ERROR_MESSAGE) or ""

    @property
    def source_topic(self) -> str | None:
        """The topic the record was consumed from."""
        return self._header(DLQ_ORIGINAL_TOPIC)

    @property
    def source_partition(self) -> int | None:
        """Its partition there."""
        return _int_or_none(self._header(DLQ_ORIGINAL_PARTITION))

    @property
    def source_offset(self) -> int | None:
        """Its offset there."""
        return _int_or_none(self._header(DLQ_ORIGINAL_OFFSET))

    @property
    def event_id(self) -> str | None:
        """The ``event-id`` header consumers de-duplicate by."""
        return self._header(EVENT_ID)

    @property
    def event_name(self) -> str | None:
        """The ``event-name`` header, when the producer set one."""
        return self._header(EVENT_NAME)

    @property
    def replays(self) -> int:
        """How often this record had been replayed before it was dead-lettered (0: a first failure)."""
        return _int_or_none(self._header(DLQ_REPLAYS)) or 0

    @property
    def replayed_from(self) -> str | None:
        """The dead letter (``topic/partition/offset``) its last replay was taken from."""
        return self._header(DLQ_REPLAYED_FROM)

    @property
    def address(self) -> str:
        """Where it lies: ``topic/partition/offset``, the form ``dlq-replayed-from`` names."""
        return f"{self.topic}/{self.partition}/{self.offset}"

    @property
    def source(self) -> str:
        """Where it came from, ``topic[partition]@offset``, or ``?`` without source headers."""
        if self.source_topic is None:
            return "?"
        return f"{self.source_topic}[{self.source_partition}]@{self.source_offset}"


def _short_class(name: str) -> str:
    return name.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class Selection:
    """Which dead letters a command acts on: by reason, by age, at most so many (oldest first)."""

    reason: str | None = None
    """A metric reason (``decode``) or an error class, fully qualified or by its last name."""
    since_ms: int | None = None
    """Only records dead-lettered at or after this broker timestamp (ms since the epoch)."""
    limit: int | None = None

    @property
    def narrows(self) -> bool:
        """True when records are left out by content or age, not only cut at ``limit``."""
        return self.reason is not None or self.since_ms is not None

    def matches(self, letter: DeadLetter) -> bool:
        """Whether ``letter`` passes the reason and age filters (``limit`` aside)."""
        if self.since_ms is not None and letter.timestamp_ms < self.since_ms:
            return False
        if self.reason is None:
            return True
        wanted = self.reason
        return wanted in (letter.reason, letter.error_class, _short_class(letter.error_class))

    def apply(self, letters: Iterable[DeadLetter]) -> list[DeadLetter]:
        """The matching letters in the order given, at most ``limit`` of them."""
        chosen: list[DeadLetter] = []
        for letter in letters:
            if self.limit is not None and len(chosen) >= self.limit:
                break
            if self.matches(letter):
                chosen.append(letter)
        return chosen


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """What ``suanli dlq list`` shows of one dead-letter topic."""

    topic: str
    count: int
    purged: int
    by_reason: Mapping[str, int] = field(default_factory=dict)
    replayed_again: int = 0
    oldest_ms: int | None = None
    newest_ms: int | None = None


def summarise(topic: str, letters: Sequence[DeadLetter], purged: int = 0) -> TopicSummary:
    """Counts of ``letters``, the records of ``topic`` past its purge marks, by reason."""
    reasons = Counter(letter.reason for letter in letters)
    stamps = [letter.timestamp_ms for letter in letters]
    return TopicSummary(
        topic=topic,
        count=len(letters),
        purged=purged,
        by_reason=dict(sorted(reasons.items())),
        replayed_again=sum(1 for letter in letters if letter.replays),
        oldest_ms=min(stamps, default=None),
        newest_ms=max(stamps, default=None),
    )


@dataclass(frozen=True, slots=True)
class Replay:
    """The record a replay republishes: the original key, value and headers, to the source topic."""

    topic: str
    key: bytes | None
    value: bytes
    headers: Headers


def replay_of(letter: DeadLetter) -> Replay:
    """The original record of ``letter``, ``dlq-*`` headers dropped, marked as a replay of it.

    ``event-id`` and the trace headers stay, so consumers de-duplicate the replay against the original
    and a trace continues; ``dlq-replays`` counts replays, so a record dead-lettered again shows it.
    """
    if letter.source_topic is None:
        raise NotReplayable(f"{letter.address} names no source topic ({DLQ_ORIGINAL_TOPIC} header)")
    dropped = letter._header(DLQ_VALUE_DROPPED)
    if dropped is not None:
        raise NotReplayable(
            f"{letter.address} holds no value: the {dropped}-byte record was too large to copy; "
            f"it is still at {letter.source}"
        )
    kept = [(name, value) for name, value in letter.headers if name not in DLQ_HEADERS]
    headers = set_headers(
        kept,
        {DLQ_REPLAYED_FROM: letter.address.encode(), DLQ_REPLAYS: str(letter.replays + 1).encode()},
    )
    return Replay(letter.source_topic, letter.key, letter.value or b"", headers)


def marks_after(letters: Iterable[DeadLetter]) -> dict[int, int]:
    """Purge marks that put every one of ``letters`` (and all before them) behind the mark."""
    marks: dict[int, int] = {}
    for letter in letters:
        marks[letter.partition] = max(marks.get(letter.partition, 0), letter.offset + 1)
    return marks


@dataclass(frozen=True, slots=True)
class Decoded:
    """A dead letter's value: the event when it decodes, otherwise why not and what the bytes look like."""

    event_name: str | None
    record: dict[str, Any] | None
    error: str | None
    summary: str


PREVIEW_BYTES: Final = 16


def bytes_summary(value: bytes | None) -> str:
    """Size, digest and first bytes of a value that does not decode (``null`` for a tombstone)."""
    if value is None:
        return "null (tombstone)"
    digest = hashlib.sha256(value).hexdigest()[:16]
    head = value[:PREVIEW_BYTES].hex(" ")
    more = " …" if len(value) > PREVIEW_BYTES else ""
    return f"{len(value)} bytes, sha256 {digest}, starts {head}{more}"


def decode_value(letter: DeadLetter, codec: Codec) -> Decoded:
    """Decode the value with ``codec`` (the repository's schemas); a failure is described, not raised."""
    summary = bytes_summary(letter.value)
    if letter.value is None:
        return Decoded(None, None, "no value", summary)
    try:
        name, record = codec.decode(letter.value)
    except Exception as exc:  # whatever the codec says, the operator wants to read it, not a traceback
        return Decoded(None, None, f"{type(exc).__name__}: {exc}", summary)
    return Decoded(name, record, None, summary)


def dlq_name(topic: str, prefix: str = "") -> str:
    """The dead-letter topic an operator means by ``topic``: itself if it ends in ``.dlq``, else its DLQ.

    A name without the deployment's ``prefix`` gets it, so ``jobs.events`` and
    ``staging.jobs.events.dlq`` both name ``staging.jobs.events.dlq`` under prefix ``staging``.
    """
    name = topic if topic.endswith(DLQ_SUFFIX) else f"{topic}{DLQ_SUFFIX}"
    if prefix and not name.startswith(f"{prefix}."):
        name = f"{prefix}.{name}"
    return name


def dlq_topics(names: Iterable[str], prefix: str = "") -> list[str]:
    """The dead-letter topics among ``names`` that belong to ``prefix`` (all of them without one), sorted."""
    wanted = f"{prefix}." if prefix else ""
    return sorted(n for n in names if n.endswith(DLQ_SUFFIX) and n.startswith(wanted))
