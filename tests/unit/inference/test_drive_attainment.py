"""The trace driver's pure parts: SLO attainment, bounded percentiles, the recent rate, the trace window."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import pytest

from suanli.inference.attainment import RECENT_S, DriveStats, LatencyHistogram, Outcome, SloTarget
from suanli.inference.drive import OVER_IN_FLIGHT, DriveConfig, Driver, _answer_figures, window
from suanli.inference.drive_cli import slo_of
from suanli.serving.domain.trace import Trace

SLO = SloTarget(ttft_s=2.0, tpot_s=0.1)


def test_a_request_meets_the_slo_within_ttft_plus_tpot_per_later_token() -> None:
    stats = DriveStats(SLO)
    stats.record(Outcome(1.0, 200, 11.9, generated_tokens=101))  # target 2 + 100 x 0.1 = 12 s
    stats.record(Outcome(1.0, 200, 12.1, generated_tokens=101))
    stats.record(Outcome(1.0, 200, 2.0, generated_tokens=1))  # one token: the TTFT target alone
    summary = stats.summary(2.0)
    assert (summary.requests, summary.answered, summary.slo_met) == (3, 3, 2)
    assert summary.slo_attainment == pytest.approx(2 / 3)
    assert SLO.e2e_s(101) == pytest.approx(12.0)


def test_failures_count_against_attainment_by_reason() -> None:
    stats = DriveStats(SLO)
    stats.record(Outcome(0.5, 200, 0.5, 10, ttft_s=0.2))
    for _ in range(3):
        stats.record(Outcome(0.5, 503, 0.002, 10))
    stats.record(Outcome(0.6, 0, 120.0, 10, reason="timeout"))
    stats.record(Outcome(0.7, 0, 0.0, 10, reason=OVER_IN_FLIGHT))
    summary = stats.summary(1.0)
    assert summary.failures == {"http 503": 3, "timeout": 1, OVER_IN_FLIGHT: 1}
    assert summary.slo_attainment == pytest.approx(1 / 6)
    # Latency percentiles are of answered requests only: a fast 503 does not flatter them.
    assert summary.latency_p50_s == pytest.approx(0.5, rel=0.011)
    assert summary.ttft_p99_s == pytest.approx(0.2, rel=0.011)


def test_percentiles_are_exact_to_one_percent_in_bounded_memory() -> None:
    rng = np.random.default_rng(7)
    values = rng.lognormal(mean=0.0, sigma=1.5, size=20_000)
    histogram = LatencyHistogram()
    for v in values:
        histogram.add(float(v))
    for q in (0.5, 0.99):
        assert histogram.quantile(q) == pytest.approx(np.quantile(values, q), rel=0.011)
    assert len(histogram.counts) < 1_500  # buckets, not samples
    assert LatencyHistogram().quantile(0.5) is None


def test_the_recent_rate_counts_the_last_window_only() -> None:
    stats = DriveStats(SLO)
    for second in range(30):
        for _ in range(1 + 2 * (second % 2)):  # 1, 3, 1, 3 ... requests a second: 2 a second on average
            stats.record(Outcome(second + 0.5, 200, 0.1, 5))
    summary = stats.summary(30.0)
    assert summary.recent_per_s == pytest.approx(2.0)
    assert summary.requests_per_s == pytest.approx(2.0)
    assert len(stats.per_second) <= RECENT_S + 1


def test_the_replica_answer_gives_generated_tokens_ttft_and_latency_where_it_says_them() -> None:
    assert _answer_figures(b'{"generated_tokens": 7, "ttft_s": 0.25, "latency_s": 1}', 50) == (7, 0.25, 1.0)
    assert _answer_figures(b'{"replica": "r1"}', 50) == (50, None, None)
    assert _answer_figures(b"not json", 50) == (50, None, None)
    bad = b'{"generated_tokens": -1, "ttft_s": "soon", "latency_s": true}'
    assert _answer_figures(bad, 50) == (50, None, None)


def test_what_the_live_path_added_is_the_latency_seen_minus_the_replica_s() -> None:
    stats = DriveStats(SLO)
    for i in range(100):  # the replica's model says 2 s; the client saw 2.01 s, one in a hundred 2.5 s
        stats.record(Outcome(1.0, 200, 2.5 if i == 99 else 2.01, 5, 0.2, replica_latency_s=2.0))
    stats.record(Outcome(1.0, 200, 1.0, 5))  # an answer without the replica's figures: not counted
    summary = stats.summary(10.0)
    assert summary.added_p50_s == pytest.approx(0.01, rel=0.011)
    assert summary.added_p99_s == pytest.approx(0.01, rel=0.011)
    assert stats.added.count == 100
    stats.record(Outcome(1.0, 200, 2.5, 5, 0.2, replica_latency_s=2.0))
    assert stats.summary(10.0).added_p99_s == pytest.approx(0.5, rel=0.011)


def test_the_window_starts_later_keeps_a_limit_and_compresses() -> None:
    trace = Trace(np.array([0.0, 10.0, 20.0, 30.0]), np.array([1, 2, 3, 4]), np.array([5, 6, 7, 8]))
    chosen = window(trace, 10.0, 2, speed=10.0)
    assert chosen.offset_s.tolist() == [0.0, 1.0]
    assert chosen.context_tokens.tolist() == [2, 3]


def test_the_slo_comes_from_the_spec_unless_given() -> None:
    spec = '{"target": {"ttft_ms": 2000, "tpot_ms": 100}}'
    assert slo_of(spec, 0, 0) == SloTarget(2.0, 0.1)
    assert slo_of(spec, 500, 0) == SloTarget(0.5, 0.1)
    with pytest.raises(ValueError, match="no latency SLO"):
        slo_of('{"target": {"concurrency": 8}}', 0, 0)


async def test_the_replay_span_stops_at_its_end_so_the_rate_is_not_diluted_by_what_follows() -> None:
    now = [100.0]
    empty = Trace(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64))
    cfg = DriveConfig("http://gateway", "svc")
    driver = Driver(cast(Any, None), cfg, DriveStats(SLO), clock=lambda: now[0])
    assert driver.elapsed() == 0.0
    now[0] = 130.0
    await driver.replay(empty)  # ends at once: a span of 0 s
    now[0] = 190.0  # the platform drains and settles meanwhile
    assert driver.elapsed() == 0.0
