"""The soak's samples and its pass criteria, as pure functions of a list of samples.

A soak passes when, over the loaded run after the warm-up:

- memory is flat: each process's resident memory at the end of the load is within a tolerance (10 %) of
  its memory just after the warm-up, each end being the median of `window` samples, so one sample taken
  during a collection does not decide;
- lag is bounded: each consumer group's largest lag in the second half is at most the first half's
  largest times `lag_factor`, or below `lag_floor` records (a few hundred records behind is one busy
  second of snapshots, not a trend);
- every job is final: every job `suanli up` submitted reached a final state before its drain ended.

The embedded broker and database (`infrastructure`) are reported, not judged: Tansu keeps every record in
memory with no retention (ARCHITECTURE.md §3), so its memory grows with the data by design, and the
PostgreSQL postmaster is not where a database's memory goes.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

LOAD_PHASE = "submitting"


@dataclass(frozen=True, slots=True)
class Sample:
    """What the soak saw at one instant, ``t_s`` seconds after the load began."""

    t_s: float
    phase: str  # suanli up's: starting (before its first progress line), submitting, draining, settling
    rss_mib: Mapping[str, float] = field(default_factory=dict)  # process name -> resident MiB
    # process name -> CPU used over the interval, in % of one core: who keeps up and who starves.
    cpu_pct: Mapping[str, float] = field(default_factory=dict)
    lag: Mapping[str, float] = field(default_factory=dict)  # consumer group -> records behind
    outbox: Mapping[str, float] = field(default_factory=dict)  # process name -> unpublished rows
    # Over the interval since the previous sample, in seconds (None: nothing observed in it).
    placement_p50_s: float | None = None
    placement_p99_s: float | None = None
    cycle_p50_s: float | None = None
    cycle_p99_s: float | None = None
    submitted: int = 0
    final: int = 0
    # The machine's 1-minute load average: on a shared machine, what the platform competed with.
    load1: float | None = None


@dataclass(frozen=True, slots=True)
class Criteria:
    warmup_s: float = 300.0
    memory_tolerance: float = 0.10
    lag_factor: float = 2.0
    lag_floor: float = 500.0
    window: int = 3
    infrastructure: tuple[str, ...] = ("tansu", "postgres")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the run ended: jobs submitted and those not final when `suanli up` stopped."""

    submitted: int
    unfinished: int
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    criterion: str
    passed: bool
    detail: str
    judged: bool = True  # False: reported only (see `Criteria.infrastructure`)


def steady(samples: Sequence[Sample], criteria: Criteria) -> list[Sample]:
    """The loaded samples after the warm-up, in time order."""
    return sorted(
        (s for s in samples if s.phase == LOAD_PHASE and s.t_s >= criteria.warmup_s), key=lambda s: s.t_s
    )


def memory_flat(samples: Sequence[Sample], criteria: Criteria) -> list[Verdict]:
    """One verdict per process seen in the steady samples."""
    loaded = steady(samples, criteria)
    verdicts = []
    for name in sorted({n for s in loaded for n in s.rss_mib}):
        series = [s.rss_mib[name] for s in loaded if name in s.rss_mib]
        if len(series) < 2 * criteria.window:
            verdicts.append(
                Verdict(f"memory {name}", False, f"{len(series)} samples after the warm-up, too few to judge")
            )
            continue
        start = statistics.median(series[: criteria.window])
        end = statistics.median(series[-criteria.window :])
        change = (end - start) / start if start else 0.0
        times = [s.t_s for s in loaded if name in s.rss_mib]
        minutes = (times[-1] - times[0]) / 60 or 1.0
        detail = (
            f"{start:.1f} -> {end:.1f} MiB ({change:+.1%}, limit ±{criteria.memory_tolerance:.0%}); "
            f"{(series[-1] - series[0]) / minutes:+.2f} MiB/min; peak {max(series):.1f} MiB"
        )
        judged = name not in criteria.infrastructure
        passed = abs(change) <= criteria.memory_tolerance or not judged
        verdicts.append(Verdict(f"memory {name}", passed, detail, judged))
    return verdicts


def lag_bounded(samples: Sequence[Sample], criteria: Criteria) -> list[Verdict]:
    """One verdict per consumer group; the halves split the steady samples' time span."""
    loaded = steady(samples, criteria)
    half = (loaded[0].t_s + loaded[-1].t_s) / 2 if loaded else 0.0
    verdicts = []
    for group in sorted({g for s in loaded for g in s.lag}):
        first = [s.lag[group] for s in loaded if group in s.lag and s.t_s < half]
        second = [s.lag[group] for s in loaded if group in s.lag and s.t_s >= half]
        if not first or not second:
            verdicts.append(Verdict(f"lag {group}", False, "not seen in both halves of the load"))
            continue
        bound = max(max(first) * criteria.lag_factor, criteria.lag_floor)
        passed = max(second) <= bound
        detail = (
            f"max {max(first):.0f} in the first half, {max(second):.0f} in the second "
            f"(bound {bound:.0f}: x{criteria.lag_factor:g} or {criteria.lag_floor:.0f})"
        )
        verdicts.append(Verdict(f"lag {group}", passed, detail))
    return verdicts


def jobs_final(outcome: Outcome) -> Verdict:
    detail = f"{outcome.submitted - outcome.unfinished} of {outcome.submitted} final after the drain"
    if outcome.submitted == 0:
        detail = "no job was submitted"
    passed = outcome.submitted > 0 and outcome.unfinished == 0
    if not passed and outcome.problems:
        detail += "; " + "; ".join(outcome.problems)
    return Verdict("jobs final", passed, detail)


def evaluate(samples: Sequence[Sample], outcome: Outcome, criteria: Criteria) -> list[Verdict]:
    """Every criterion's verdicts: memory per process, lag per group, then jobs."""
    return [*memory_flat(samples, criteria), *lag_bounded(samples, criteria), jobs_final(outcome)]


def failed(verdicts: Iterable[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if v.judged and not v.passed]
