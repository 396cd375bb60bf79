"""Per-task metering state: facts about a task come in any order and any number of times; windows go out once.

An attempt is metered from its start to its end (the earliest of finished, failed or preempted). While it
runs, windows are emitted only up to the last *evidence* that it still held its resources (a node snapshot
listing it, a usage sample), floored to a window boundary, so a closed window is never charged on the
strength of the wall clock alone. ``metered_through_ms`` only moves forward, which is what makes a
repeated fact harmless: it can never produce a window that was already emitted.

Records are pruned (`prunable`) once nothing of them can be charged any more and a retention has passed,
so the table does not grow with history. A pruned record's ``metered_through_ms`` is gone, so what made a
repeat harmless is gone with it: `late` names the facts that must then be refused. Only a ``Started``
makes an attempt chargeable, and a pruned attempt's start lies before the horizon it was pruned at, so
refusing timed facts from before the horizon about attempts the record does not hold as started means a
pruned attempt is never charged again, whatever arrives later.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from suanli.metering.domain.usage import Allocation, Charge, UsageWindow, window_start, windows


@dataclass(frozen=True, slots=True)
class JobKnown:
    task_id: str
    job_id: str
    tenant: str
    queue: str


@dataclass(frozen=True, slots=True)
class Placed:
    task_id: str
    job_id: str
    attempt: int
    allocation: Allocation


@dataclass(frozen=True, slots=True)
class Started:
    task_id: str
    job_id: str
    attempt: int
    node_id: str
    at_ms: int
    # The TaskStarted's trace context (the job's trace), opaque to the core: the entrypoint fills it.
    trace_context: str = ""


@dataclass(frozen=True, slots=True)
class Ended:
    task_id: str
    attempt: int
    at_ms: int
    cause: str  # finished | failed | preempted


@dataclass(frozen=True, slots=True)
class Seen:
    """The node reported the task among those it runs (snapshots carry no attempt number)."""

    task_id: str
    node_id: str
    at_ms: int


@dataclass(frozen=True, slots=True)
class Sampled:
    task_id: str
    attempt: int
    at_ms: int
    interval_ms: int
    gpu_utilisation_pct: float  # of whole devices, mean over the task's devices
    device_count: int
    cpu_milli: int


TaskFact = JobKnown | Placed | Started | Ended | Seen | Sampled


@dataclass(frozen=True, slots=True)
class UtilSum:
    """Interval-weighted sums of samples falling in one window."""

    window_start_ms: int
    gpu_device_milli_ms: float  # utilisation x devices x 1000 x interval
    cpu_milli_ms: int
    covered_ms: int


@dataclass(frozen=True, slots=True)
class AttemptState:
    attempt: int
    job_id: str = ""
    node_id: str = ""
    allocation: Allocation | None = None
    started_ms: int | None = None
    ended_ms: int | None = None
    end_cause: str = ""
    seen_through_ms: int | None = None
    metered_through_ms: int | None = None
    util: tuple[UtilSum, ...] = ()
    # From the attempt's Started (the first that had one): every window of the attempt carries it.
    trace_context: str = ""

    @property
    def complete(self) -> bool:
        return (
            self.ended_ms is not None
            and self.metered_through_ms is not None
            and self.metered_through_ms >= self.ended_ms
        )


@dataclass(frozen=True, slots=True)
class MeteredTask:
    """Metering's record of one task: who it is charged to and how far each attempt has been metered.

    Not the task's lifecycle state (scheduling owns that): only the facts that price its usage.
    """

    task_id: str
    job_id: str = ""
    tenant: str | None = None
    queue: str | None = None
    attempts: tuple[AttemptState, ...] = ()
    # Metering's time when a fact was last applied (None in records written before it was kept).
    last_fact_ms: int | None = None

    def attempt(self, number: int) -> AttemptState | None:
        return next((a for a in self.attempts if a.attempt == number), None)


def _put(state: MeteredTask, updated: AttemptState) -> MeteredTask:
    others = [a for a in state.attempts if a.attempt != updated.attempt]
    return replace(state, attempts=tuple(sorted([*others, updated], key=lambda a: a.attempt)))


def _attempt(state: MeteredTask, number: int) -> AttemptState:
    return state.attempt(number) or AttemptState(number)


def _later(current: int | None, at_ms: int) -> int:
    return at_ms if current is None else max(current, at_ms)


def _add_sample(attempt: AttemptState, fact: Sampled) -> AttemptState:
    # A sample covers the interval ending at at_ms; it is filed under the window that interval ends in.
    start = window_start(fact.at_ms - 1)
    if attempt.metered_through_ms is not None and start < window_start(attempt.metered_through_ms):
        return attempt  # its window is already out; efficiency is indicative, charges are unaffected
    sums = {u.window_start_ms: u for u in attempt.util}
    prev = sums.get(start, UtilSum(start, 0.0, 0, 0))
    sums[start] = UtilSum(
        start,
        prev.gpu_device_milli_ms
        + fact.gpu_utilisation_pct / 100 * fact.device_count * 1000 * fact.interval_ms,
        prev.cpu_milli_ms + fact.cpu_milli * fact.interval_ms,
        prev.covered_ms + fact.interval_ms,
    )
    return replace(attempt, util=tuple(sorted(sums.values(), key=lambda u: u.window_start_ms)))


def apply(state: MeteredTask | None, fact: TaskFact) -> MeteredTask:
    """Fold one fact into the task's state. Order-independent for everything that is charged."""
    state = state or MeteredTask(fact.task_id)
    match fact:
        case JobKnown():
            return replace(state, job_id=fact.job_id, tenant=fact.tenant, queue=fact.queue)
        case Placed():
            a = _attempt(state, fact.attempt)
            return _put(
                replace(state, job_id=state.job_id or fact.job_id),
                replace(a, job_id=fact.job_id, node_id=fact.allocation.node_id, allocation=fact.allocation),
            )
        case Started():
            a = _attempt(state, fact.attempt)
            started = fact.at_ms if a.started_ms is None else min(a.started_ms, fact.at_ms)
            return _put(
                replace(state, job_id=state.job_id or fact.job_id),
                replace(
                    a,
                    job_id=a.job_id or fact.job_id,
                    node_id=a.node_id or fact.node_id,
                    started_ms=started,
                    trace_context=a.trace_context or fact.trace_context,
                ),
            )
        case Ended():
            a = _attempt(state, fact.attempt)
            ended = fact.at_ms if a.ended_ms is None else min(a.ended_ms, fact.at_ms)
            cause = fact.cause if a.ended_ms is None or fact.at_ms < a.ended_ms else a.end_cause
            return _put(state, replace(a, ended_ms=ended, end_cause=cause))
        case Seen():
            running = [a for a in state.attempts if a.node_id == fact.node_id and a.ended_ms is None]
            if not running:
                return state
            a = running[-1]
            return _put(state, replace(a, seen_through_ms=_later(a.seen_through_ms, fact.at_ms)))
        case Sampled():
            a = _attempt(state, fact.attempt)
            a = replace(a, seen_through_ms=_later(a.seen_through_ms, fact.at_ms))
            return _put(state, _add_sample(a, fact))
    raise TypeError(f"not a task fact: {fact!r}")


def _efficiency(attempt: AttemptState, allocation: Allocation) -> dict[int, float]:
    out = {}
    for u in attempt.util:
        if not u.covered_ms:
            continue
        if allocation.gpu_milli:
            out[u.window_start_ms] = u.gpu_device_milli_ms / u.covered_ms / allocation.gpu_milli
        elif allocation.cpu_milli:
            out[u.window_start_ms] = u.cpu_milli_ms / u.covered_ms / allocation.cpu_milli
    return out


def _charge(state: MeteredTask, a: AttemptState) -> Charge:
    assert state.tenant is not None and state.queue is not None
    return Charge(state.task_id, a.attempt, a.job_id or state.job_id, state.tenant, state.queue)


def _meter_attempt(state: MeteredTask, a: AttemptState) -> tuple[AttemptState, list[UsageWindow]]:
    if a.allocation is None or a.started_ms is None or state.tenant is None or state.queue is None:
        return a, []  # not yet chargeable: the facts still missing will arrive and complete it
    start = a.metered_through_ms if a.metered_through_ms is not None else a.started_ms
    if a.ended_ms is not None:
        target = a.ended_ms
    elif a.seen_through_ms is not None:
        target = window_start(a.seen_through_ms)
    else:
        return a, []
    if target <= start:
        return a, []
    out = windows(
        _charge(state, a),
        a.allocation,
        started_ms=a.started_ms,
        from_ms=start,
        to_ms=target,
        efficiency=_efficiency(a, a.allocation),
        trace_context=a.trace_context,
    )
    util = tuple(u for u in a.util if u.window_start_ms >= window_start(target))
    return replace(a, metered_through_ms=target, util=util), out


def meter(state: MeteredTask) -> tuple[MeteredTask, list[UsageWindow]]:
    """Windows that became chargeable, and the state that records them as emitted."""
    emitted: list[UsageWindow] = []
    attempts = []
    for a in state.attempts:
        a, out = _meter_attempt(state, a)
        attempts.append(a)
        emitted.extend(out)
    return replace(state, attempts=tuple(attempts)), emitted


def remeter(state: MeteredTask) -> tuple[MeteredTask, list[UsageWindow]]:
    """Every window already emitted, once more as first emitted, then those that became chargeable.

    For a broker that lost what it held: the windows published to it and not yet read by billing are
    gone, while the record says they were metered. A window's id and amount depend only on the attempt,
    its start, its allocation and the window's bounds, which always fall on window boundaries or the
    attempt's end, so each comes out as it first did; billing claims an id once and refuses the copies it
    has. Efficiency is not kept for emitted windows: the copies carry none (it is never charged).
    """
    again: list[UsageWindow] = []
    for a in state.attempts:
        if a.metered_through_ms is None or a.started_ms is None or a.allocation is None:
            continue
        again.extend(
            windows(
                _charge(state, a),
                a.allocation,
                started_ms=a.started_ms,
                from_ms=a.started_ms,
                to_ms=a.metered_through_ms,
                trace_context=a.trace_context,
            )
        )
    state, emitted = meter(state)
    return state, again + emitted


def step(state: MeteredTask | None, fact: TaskFact) -> tuple[MeteredTask, list[UsageWindow]]:
    return meter(apply(state, fact))


def _charged(state: MeteredTask) -> tuple[object, ...]:
    return (
        state.job_id,
        state.tenant,
        state.queue,
        tuple(
            (
                a.attempt,
                a.job_id,
                a.node_id,
                a.allocation,
                a.started_ms,
                a.ended_ms,
                a.end_cause,
                a.metered_through_ms,
                a.trace_context,
            )
            for a in state.attempts
        ),
    )


def material_task_change(before: MeteredTask | None, after: MeteredTask) -> bool:
    """Whether ``after`` differs from ``before`` in what its charges are computed from.

    Evidence that an attempt still runs (``seen_through_ms``), utilisation sums and the time of the last
    fact are not: lost in a restart, the next sample or snapshot brings the evidence again, the window's
    efficiency (indicative, never charged) is averaged over the samples kept, and pruning judges on a
    slightly older last fact. Everything a window's amount depends on, and how far it was metered, is.
    """
    return before is None or _charged(before) != _charged(after)


def prunable(state: MeteredTask, horizon_ms: int) -> bool:
    """Whether the record may be dropped at ``horizon_ms`` (now minus the retention).

    Every attempt that started is complete (ended and metered to its end), and its end as well as the
    last fact applied lie before the horizon. A record of attempts that never started holds only who pays
    (each placement says it again) and is dropped once no fact came for a retention; one whose last fact
    time is unknown is kept unless it has ended attempts to date it.
    """
    started = [a for a in state.attempts if a.started_ms is not None]
    if not all(a.complete for a in started):
        return False
    times = [a.ended_ms for a in started if a.ended_ms is not None]
    if state.last_fact_ms is not None:
        times.append(state.last_fact_ms)
    return bool(times) and max(times) < horizon_ms


def late(state: MeteredTask | None, fact: TaskFact, horizon_ms: int) -> bool:
    """Whether ``fact`` must be refused: from before the horizon, about an attempt not held as started.

    Such a fact can only concern a record pruned already (or a metering lag beyond the retention), and
    applying it could open a pruned attempt to be charged again.
    """
    match fact:
        case Started() | Ended() | Sampled():
            if fact.at_ms >= horizon_ms:
                return False
            held = state.attempt(fact.attempt) if state is not None else None
            return held is None or held.started_ms is None
        case Seen():
            return fact.at_ms < horizon_ms and state is None
    return False


def replay(facts: Iterable[TaskFact]) -> tuple[MeteredTask | None, list[UsageWindow]]:
    """All windows a sequence of facts yields (tests, audits)."""
    state: MeteredTask | None = None
    out: list[UsageWindow] = []
    for fact in facts:
        state, emitted = step(state, fact)
        out.extend(emitted)
    return state, out
