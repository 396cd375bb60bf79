"""What a replay of the trace through a gateway came to: SLO attainment, latency percentiles, rate, failures.

Pure and bounded: each request's `Outcome` is folded into `DriveStats` as it ends, so memory does not
grow with the trace. Latencies go into log-spaced buckets 1 % wide (`LatencyHistogram`), so a percentile
is exact to within 1 %; the recent request rate is counted per second over the last `RECENT_S` seconds.

A request meets the SLO when it was answered (HTTP 200) within its end-to-end target: the service's TTFT
target + its TPOT target x (generated tokens - 1), the same `e2e_target_s` the simulator and the
autoscaler use (docs/inference.md). A request that failed (503: no fresh replica, 502, a timeout, never
sent) misses it: attainment is over every request the trace asked for, not only the answered ones.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from suanli.serving.domain.spec import e2e_target_s

RECENT_S = 10  # the window of the live request rate and success share
OK = 200
# Bucket i holds latencies in [MIN_S * GROWTH**i, MIN_S * GROWTH**(i+1)): 0.1 ms to ~6 h in 1 % steps.
MIN_S = 1e-4
GROWTH = 1.01
BUCKETS = math.ceil(math.log(2e4 / MIN_S) / math.log(GROWTH))


@dataclass(frozen=True, slots=True)
class SloTarget:
    """The service's latency SLO, in seconds."""

    ttft_s: float
    tpot_s: float

    def e2e_s(self, generated_tokens: int) -> float:
        return float(e2e_target_s(self.ttft_s, self.tpot_s, np.asarray([generated_tokens]))[0])


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request of the trace as the client saw it.

    `status` is the HTTP status (0: no answer; then `reason` says why: a timeout, the gateway
    unreachable, not sent because too many were in flight). `generated_tokens` is what the replica says it
    generated, else what the trace asked for; `ttft_s` and `replica_latency_s` are the replica's own
    figures, when it gives them (a simulated replica's are its model's: the client's latency minus
    `replica_latency_s` is what the live path added, the gateway, HTTP and the replica server's loop).
    """

    ended_at_s: float  # on the driver's clock, from the replay's start
    status: int
    latency_s: float
    generated_tokens: int
    ttft_s: float | None = None
    reason: str = ""
    replica_latency_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def failure(self) -> str:
        """The failure's name in the summary: `http 503`, `timeout`, ...; empty when answered."""
        if self.ok:
            return ""
        return f"http {self.status}" if self.status else self.reason or "no answer"


@dataclass
class LatencyHistogram:
    """Counts of latencies in log-spaced buckets; quantiles exact to one bucket (1 %)."""

    counts: Counter[int] = field(default_factory=Counter)
    count: int = 0

    def add(self, seconds: float) -> None:
        index = 0 if seconds <= MIN_S else min(BUCKETS - 1, int(math.log(seconds / MIN_S) / math.log(GROWTH)))
        self.counts[index] += 1
        self.count += 1

    def quantile(self, q: float) -> float | None:
        """The upper edge of the bucket holding the q-quantile; None when empty."""
        if not self.count:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = 0
        for index in sorted(self.counts):
            seen += self.counts[index]
            if seen >= rank:
                return MIN_S * GROWTH ** (index + 1)
        raise AssertionError("unreachable: the counts add up to count")


@dataclass(frozen=True, slots=True)
class DriveSummary:
    """The figures of a replay so far (`suanli up`'s summary, `suanli service drive`'s report)."""

    requests: int  # ended: answered or failed
    answered: int
    slo_met: int
    failures: dict[str, int]
    latency_p50_s: float | None
    latency_p99_s: float | None
    ttft_p50_s: float | None
    ttft_p99_s: float | None
    requests_per_s: float  # ended per second of the replay
    recent_per_s: float  # ended per second over the last RECENT_S seconds
    elapsed_s: float
    # The client's latency minus the replica's own, of the answers that give it: the live path's cost.
    added_p50_s: float | None = None
    added_p99_s: float | None = None

    @property
    def slo_attainment(self) -> float | None:
        return self.slo_met / self.requests if self.requests else None


@dataclass
class DriveStats:
    """The running fold of every ended request's `Outcome`."""

    target: SloTarget
    requests: int = 0
    answered: int = 0
    slo_met: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    ttft: LatencyHistogram = field(default_factory=LatencyHistogram)
    added: LatencyHistogram = field(default_factory=LatencyHistogram)
    # whole second of the replay -> requests ended in it; only the last RECENT_S + 1 seconds are kept.
    per_second: dict[int, int] = field(default_factory=dict)

    def record(self, outcome: Outcome) -> None:
        self.requests += 1
        second = int(outcome.ended_at_s)
        self.per_second[second] = self.per_second.get(second, 0) + 1
        for old in [s for s in self.per_second if s < second - RECENT_S]:
            del self.per_second[old]
        if not outcome.ok:
            self.failures[outcome.failure] += 1
            return
        self.answered += 1
        self.latency.add(outcome.latency_s)
        if outcome.ttft_s is not None:
            self.ttft.add(outcome.ttft_s)
        if outcome.replica_latency_s is not None:
            self.added.add(max(0.0, outcome.latency_s - outcome.replica_latency_s))
        if outcome.latency_s <= self.target.e2e_s(outcome.generated_tokens):
            self.slo_met += 1

    def summary(self, elapsed_s: float) -> DriveSummary:
        """The figures at `elapsed_s` seconds into the replay."""
        # The last RECENT_S whole seconds: the current second is still filling.
        now = int(elapsed_s)
        recent = sum(n for s, n in self.per_second.items() if now - RECENT_S <= s < now)
        window = float(min(RECENT_S, now))
        return DriveSummary(
            requests=self.requests,
            answered=self.answered,
            slo_met=self.slo_met,
            failures=dict(self.failures.most_common()),
            latency_p50_s=self.latency.quantile(0.5),
            latency_p99_s=self.latency.quantile(0.99),
            ttft_p50_s=self.ttft.quantile(0.5),
            ttft_p99_s=self.ttft.quantile(0.99),
            requests_per_s=self.requests / elapsed_s if elapsed_s > 0 else 0.0,
            recent_per_s=recent / window if window > 0 else 0.0,
            elapsed_s=elapsed_s,
            added_p50_s=self.added.quantile(0.5),
            added_p99_s=self.added.quantile(0.99),
        )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s"


def figure_rows(s: DriveSummary) -> list[tuple[str, str]]:
    """The summary as (name, text) rows: `suanli service drive`'s report and `suanli up`'s summary."""
    attainment = s.slo_attainment
    failures = ", ".join(f"{reason} {n}" for reason, n in s.failures.items()) or "none"
    return [
        ("requests", f"{s.requests} in {s.elapsed_s:.0f}s ({s.requests_per_s:.1f}/s), {s.answered} answered"),
        (
            "SLO attainment",
            "-"
            if attainment is None
            else f"{100 * attainment:.1f}% ({s.slo_met} within TTFT + TPOT x tokens)",
        ),
        ("latency", f"p50 {_seconds(s.latency_p50_s)}, p99 {_seconds(s.latency_p99_s)} (answered requests)"),
        ("TTFT", f"p50 {_seconds(s.ttft_p50_s)}, p99 {_seconds(s.ttft_p99_s)} (as the replicas report it)"),
        (
            "added",
            f"p50 {_seconds(s.added_p50_s)}, p99 {_seconds(s.added_p99_s)} "
            "(latency seen minus the replica's own: gateway, HTTP, the replica server's loop)",
        ),
        ("failed", failures),
    ]
