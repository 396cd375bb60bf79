"""One replica's queue and batch, advanced in time by its caller (pure: times are arguments).

Continuous batching as vLLM's default scheduler does it, simplified: requests wait FIFO; the head is
admitted when the batch has room (`max_batch`) and its whole KV need (context + generated tokens) fits the
free cache; an admitted request is prefilled alone, and the batch's decoding stalls meanwhile (prefill
first, no chunking); then it joins the batch, which advances every member one token per step of
`ReplicaSpeed.step_s(n, k)`. The first token comes with the prefill. A request that waited longer than
`queue_timeout_s` when it reaches the head is dropped (the client has gone).

Between two events the step time is constant: a member's cached tokens are counted as context + half its
output (its mean over the decode), so members progress in lock-step and one counter of steps taken
(`_steps`) with a heap of the step count each member finishes at is the whole decode state.

Used by serving's simulator (time from the trace) and by sensing's simulated replicas (time from the event
loop, through `suanli.replica.server`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

from suanli.replica.service_time import ReplicaSpeed


@dataclass(slots=True)
class Request:
    """One request at the replica: its size, and when its first token and its end came (NaN: not yet)."""

    request_id: int
    arrival_s: float  # at the replica
    context_tokens: int
    generated_tokens: int
    first_token_s: float = math.nan
    done_s: float = math.nan


@dataclass(frozen=True, slots=True)
class Outcome:
    """A request that left the replica."""

    request: Request
    dropped: bool  # True: timed out in the queue, never served


@dataclass(frozen=True, slots=True)
class ReplicaLoad:
    """What a replica reports: requests in the batch, waiting, and its recent end-to-end latency."""

    in_flight: int
    queued: int
    recent_latency_s: float


@dataclass(slots=True)
class _Member:
    request: Request
    kv_tokens: float  # counted for the step time
    reserved: int  # KV cache held until it finishes


@dataclass
class ReplicaQueue:
    """One replica's FIFO queue and continuous batch (the module's model)."""

    speed: ReplicaSpeed
    queue_timeout_s: float = 30.0
    latency_smoothing: float = 0.1  # EWMA weight of each finished request in `recent_latency_s`
    queue: deque[Request] = field(default_factory=deque)
    _prefill: tuple[float, _Member] | None = None
    _members: list[tuple[float, int, _Member]] = field(default_factory=list)  # (finish step, seq, member)
    _steps: float = 0.0
    _kv_step: float = 0.0
    _kv_reserved: int = 0
    _clock_s: float = 0.0
    _seq: int = 0
    recent_latency_s: float = 0.0
    _step: float = 0.0
    _queued_context: int = 0
    _queued_need: int = 0

    def __post_init__(self) -> None:
        self._restep()

    @property
    def in_flight(self) -> int:
        """Requests prefilling or decoding."""
        return len(self._members) + (self._prefill is not None)

    @property
    def outstanding(self) -> int:
        """Requests in flight or queued."""
        return self.in_flight + len(self.queue)

    def step_s(self) -> float:
        """The decode step now (a batch of one at least): what a balancer estimates decode speed by."""
        return self._step

    def prefill_backlog_s(self) -> float:
        """Prefill work ahead of a new request: the rest of the current prefill and every queued one."""
        current = self._prefill[0] - self._clock_s if self._prefill is not None else 0.0
        return max(0.0, current) + self._queued_context / self.speed.prefill_tokens_per_s

    def kv_free_tokens(self) -> int:
        """KV cache neither held by the batch nor promised to the queue."""
        return self.speed.kv_capacity_tokens - self._kv_reserved - self._queued_need

    def load(self) -> ReplicaLoad:
        """In flight, queued and the recent latency (EWMA) now."""
        return ReplicaLoad(self.in_flight, len(self.queue), self.recent_latency_s)

    def submit(self, request: Request, now_s: float) -> list[Outcome]:
        """Queue `request` at `now_s` (after advancing to it); what finished on the way."""
        done = self.advance(now_s)
        self.queue.append(request)
        self._queued_context += request.context_tokens
        self._queued_need += request.context_tokens + request.generated_tokens
        done += self._admit()
        return done

    def next_event_s(self) -> float:
        """When the next prefill or decode finishes (inf when idle)."""
        if self._prefill is not None:
            return self._prefill[0]
        if not self._members:
            return math.inf
        return self._clock_s + max(0.0, self._members[0][0] - self._steps) * self._step_s()

    def advance(self, now_s: float) -> list[Outcome]:
        """Run the replica up to `now_s`; the requests that finished or were dropped meanwhile, in order."""
        done: list[Outcome] = []
        while (at := self.next_event_s()) <= now_s and at < math.inf:
            self._run_to(at)
            done += self._finish_at(at)
            done += self._admit()
        if now_s < math.inf:
            self._run_to(max(now_s, self._clock_s))
        return done

    def _step_s(self) -> float:
        return self._step

    def _restep(self) -> None:
        """The batch changed: its step time, kept until it changes again."""
        self._step = self.speed.step_s(max(1, len(self._members)), self._kv_step)

    def _run_to(self, t: float) -> None:
        if self._prefill is None and self._members:
            self._steps += (t - self._clock_s) / self._step_s()
        self._clock_s = t

    def _finish_at(self, t: float) -> list[Outcome]:
        """The event due at `t`: the prefill's end while prefilling (decoding is stalled), else a decode's."""
        done: list[Outcome] = []
        if self._prefill is not None:
            member = self._prefill[1]
            self._prefill = None
            member.request.first_token_s = t
            self._join(member, t, done)
            return done
        finish, _, member = heapq.heappop(self._members)
        self._steps = max(self._steps, finish)
        self._leave(member, t, done)
        # Members finishing at the same step (within rounding of the counter) finish with it.
        while self._members and self._members[0][0] <= self._steps + 1e-9 * max(1.0, self._steps):
            self._leave(heapq.heappop(self._members)[2], t, done)
        return done

    def _join(self, member: _Member, t: float, done: list[Outcome]) -> None:
        remaining = member.request.generated_tokens - 1
        if remaining <= 0:
            self._leave(member, t, done, joined=False)
            return
        self._seq += 1
        heapq.heappush(self._members, (self._steps + remaining, self._seq, member))
        self._kv_step += member.kv_tokens
        self._restep()

    def _leave(self, member: _Member, t: float, done: list[Outcome], joined: bool = True) -> None:
        if joined:
            self._kv_step -= member.kv_tokens
            self._restep()
        self._kv_reserved -= member.reserved
        request = member.request
        request.done_s = t
        latency = t - request.arrival_s
        w = self.latency_smoothing
        self.recent_latency_s = (
            latency if self.recent_latency_s == 0 else (1 - w) * self.recent_latency_s + w * latency
        )
        done.append(Outcome(request, dropped=False))

    def _dequeue(self) -> None:
        head = self.queue.popleft()
        self._queued_context -= head.context_tokens
        self._queued_need -= head.context_tokens + head.generated_tokens

    def _admit(self) -> list[Outcome]:
        """Start the head's prefill if nothing is prefilling and it fits; drop heads that waited too long."""
        dropped: list[Outcome] = []
        while self.queue and self._prefill is None and self.in_flight < self.speed.max_batch:
            head = self.queue[0]
            if self._clock_s - head.arrival_s > self.queue_timeout_s:
                self._dequeue()
                dropped.append(Outcome(head, dropped=True))
                continue
            need = head.context_tokens + head.generated_tokens
            # A request larger than the whole cache is admitted alone rather than never.
            if self._kv_reserved + need > self.speed.kv_capacity_tokens and self.in_flight > 0:
                break
            self._dequeue()
            member = _Member(head, head.context_tokens + head.generated_tokens / 2, need)
            self._kv_reserved += need
            self._prefill = (self._clock_s + self.speed.prefill_s(head.context_tokens), member)
        return dropped
