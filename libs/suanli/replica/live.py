"""A replica taking requests as they come: the batch model with admission bounds, counters and reports.

Pure: times are arguments (seconds on the caller's monotonic clock, and the report's wall time);
`suanli.replica.server` drives it from an event loop.

Admission: a request is refused at once (not queued to time out) when its whole KV need (context +
generated tokens) exceeds the replica's KV cache (it could never be served: a client error), when
`max_queued` requests already wait, or when the queue has promised more than one whole KV cache beyond
what is free (the queue could not drain within the queue timeout anyway). A queued request that waits
longer than the queue timeout is dropped when it reaches the head (`ReplicaQueue`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from suanli.contracts.load import ReplicaLoad
from suanli.errors import InvalidArgument
from suanli.replica.batch import Outcome, ReplicaQueue, Request
from suanli.replica.service_time import ReplicaSpeed

DEFAULT_MAX_QUEUED = 256


class BadGenerate(InvalidArgument):
    """A /generate body that cannot be served as it is (answered 400 with this message)."""


class Overloaded(Exception):
    """The replica refuses a request it could not serve in time (answered 503 with this reason)."""


@dataclass(frozen=True, slots=True)
class GenerateAsk:
    """What a /generate body asks: its prompt's length in tokens and the tokens to generate."""

    context_tokens: int
    max_tokens: int


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    """Which replica this is and where it takes requests, as its load reports say."""

    service_id: str
    replica_id: str
    region: str
    address: str = ""


def _count(doc: Mapping[str, Any], name: str) -> int:
    value = doc.get(name)
    if value is None:
        raise BadGenerate(f"{name}: required (a whole number of tokens, 1 or more)")
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadGenerate(f"{name}: must be a whole number of tokens, got {value!r}")
    if value < 1:
        raise BadGenerate(f"{name}: must be 1 or more, got {value}")
    return value


def parse_generate(doc: Any) -> GenerateAsk:
    """The ask of a decoded JSON body; `BadGenerate` names the field that is wrong.

    Other fields (the prompt itself, sampling options) are accepted and ignored: a simulated replica
    only needs lengths.
    """
    if not isinstance(doc, dict):
        raise BadGenerate(f"the body must be a JSON object, got {type(doc).__name__}")
    return GenerateAsk(_count(doc, "context_tokens"), _count(doc, "max_tokens"))


@dataclass(frozen=True, slots=True)
class Served:
    """A request's answer: tokens generated, time to first token and end-to-end latency, seconds."""

    request_id: int
    generated_tokens: int
    ttft_s: float
    latency_s: float


@dataclass(frozen=True, slots=True)
class Dropped:
    """A request that waited past the queue timeout and was never served."""

    request_id: int
    reason: str


class LiveReplica:
    """`ReplicaQueue` plus admission bounds, counters since start and the interval's latencies."""

    def __init__(
        self,
        identity: ReplicaIdentity,
        speed: ReplicaSpeed,
        *,
        interval_s: float,
        queue_timeout_s: float = 30.0,
        max_queued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        if not math.isfinite(interval_s) or interval_s <= 0:
            raise InvalidArgument(f"interval_s: must be above 0 (got {interval_s})")
        if max_queued < 1:
            raise InvalidArgument(f"max_queued: must be 1 or more (got {max_queued})")
        self.identity = identity
        self.speed = speed
        self.interval_s = interval_s
        self.max_queued = max_queued
        self.queue = ReplicaQueue(speed, queue_timeout_s=queue_timeout_s)
        self._ids = itertools.count(1)
        self.arrived_total = 0
        self.finished_total = 0
        self.context_tokens_total = 0
        self.generated_tokens_total = 0
        self._latencies: list[float] = []
        self._last_latency_s = 0.0

    def submit(self, ask: GenerateAsk, now_s: float) -> tuple[int, list[Served | Dropped]]:
        """Queue `ask` at `now_s`: its request id and what finished on the way.

        Raises `BadGenerate` for a request larger than the KV cache and `Overloaded` when a bound is
        reached (nothing is queued then).
        """
        need = ask.context_tokens + ask.max_tokens
        capacity = self.speed.kv_capacity_tokens
        if need > capacity:
            raise BadGenerate(
                f"context_tokens + max_tokens = {need} exceeds the replica's KV cache of {capacity} tokens"
            )
        ended = self.advance(now_s)
        if len(self.queue.queue) >= self.max_queued:
            raise Overloaded(
                f"queue full: {len(self.queue.queue)} requests waiting (bound {self.max_queued})"
            )
        if need > self.queue.kv_free_tokens() + capacity:
            raise Overloaded(
                f"KV cache full: {capacity - self.queue.kv_free_tokens()} tokens held or promised to the "
                f"queue, {capacity} in the cache"
            )
        request = Request(next(self._ids), now_s, ask.context_tokens, ask.max_tokens)
        self.arrived_total += 1
        self.context_tokens_total += ask.context_tokens
        ended += self._ended(self.queue.submit(request, now_s), now_s)
        return request.request_id, ended

    def advance(self, now_s: float) -> list[Served | Dropped]:
        """Run the model up to `now_s`: the requests that finished or were dropped meanwhile."""
        return self._ended(self.queue.advance(now_s), now_s)

    def next_event_s(self) -> float:
        """When the next prefill or decode ends (inf when idle): when to call `advance` next."""
        return self.queue.next_event_s()

    def _ended(self, outcomes: list[Outcome], now_s: float) -> list[Served | Dropped]:
        ended: list[Served | Dropped] = []
        for outcome in outcomes:
            r = outcome.request
            if outcome.dropped:
                waited = now_s - r.arrival_s
                reason = (
                    f"waited {waited:.1f} s in the queue, over the queue timeout of "
                    f"{self.queue.queue_timeout_s:g} s"
                )
                ended.append(Dropped(r.request_id, reason))
                continue
            latency = r.done_s - r.arrival_s
            self.finished_total += 1
            self.generated_tokens_total += r.generated_tokens
            self._latencies.append(latency)
            ended.append(Served(r.request_id, r.generated_tokens, r.first_token_s - r.arrival_s, latency))
        return ended

    def report(self, now: datetime) -> ReplicaLoad:
        """The load report now; the next interval's latency mean starts.

        The latency is the mean of the requests finished since the last report, or the last such mean
        when none finished.
        """
        if self._latencies:
            self._last_latency_s = sum(self._latencies) / len(self._latencies)
            self._latencies.clear()
        q, me = self.queue, self.identity
        return ReplicaLoad(
            service_id=me.service_id,
            replica_id=me.replica_id,
            region=me.region,
            address=me.address,
            in_flight=q.in_flight,
            queued=len(q.queue),
            max_batch=self.speed.max_batch,
            prefill_tokens_per_s=self.speed.prefill_tokens_per_s,
            decode_step_s=q.step_s(),
            recent_latency_s=self._last_latency_s,
            prefill_backlog_s=q.prefill_backlog_s(),
            kv_free_tokens=max(0, q.kv_free_tokens()),
            interval_s=self.interval_s,
            reported_at=now,
            arrived_total=self.arrived_total,
            finished_total=self.finished_total,
            context_tokens_total=self.context_tokens_total,
            generated_tokens_total=self.generated_tokens_total,
        )
