"""The link fold: EWMA figures, p95 jitter, baseline, status and when a state is worth publishing."""

from __future__ import annotations

import pytest

from suanli.errors import InvalidArgument
from suanli.routing.domain.links import LinkStatus, Probe, ViewPolicy, differs, expire, fold, p95, summarise

POLICY = ViewPolicy(rtt_alpha=0.5, loss_alpha=0.5, jitter_window=4, probe_interval_ms=1000, down_after=3)


def probe(
    at_ms: int,
    rtt: float = 40.0,
    *,
    loss: float = 0.0,
    jitter: float = 1.0,
    bw: float | None = None,
    src: str = "tok-1",
    dst: str = "syd-1",
) -> Probe:
    return Probe("Tokyo", src, "Sydney", dst, rtt, jitter, loss, bw, 5, at_ms)


def folded(*probes: Probe, policy: ViewPolicy = POLICY):
    state = None
    for p in probes:
        state = fold(state, p, policy)
    assert state is not None
    return state


def test_first_round_sets_the_figures_and_the_baseline() -> None:
    s = folded(probe(1000, 40.0, jitter=2.0, bw=900.0))
    assert (s.link_id, s.scope, s.rtt_ms, s.baseline_rtt_ms) == ("tok-1->syd-1", "site", 40.0, 40.0)
    assert (s.jitter_p95_ms, s.bandwidth_mbps, s.last_probe_ms, s.rounds) == (2.0, 900.0, 1000, 1)
    assert s.status is LinkStatus.OK


def test_rtt_and_loss_are_exponentially_weighted() -> None:
    s = folded(probe(1000, 40.0), probe(2000, 60.0, loss=0.2))
    assert s.rtt_ms == pytest.approx(50.0)  # 0.5 x 60 + 0.5 x 40
    assert s.loss_ratio == pytest.approx(0.1)
    assert s.baseline_rtt_ms == 40.0  # the lowest round seen


def test_jitter_p95_covers_only_the_recent_window() -> None:
    s = folded(*(probe(1000 * i, jitter=j) for i, j in enumerate([50.0, 1.0, 2.0, 3.0, 4.0], start=1)))
    assert s.jitters == (1.0, 2.0, 3.0, 4.0)
    assert s.jitter_p95_ms == 4.0
    assert p95(tuple(float(i) for i in range(1, 21))) == 19.0
    assert p95(()) == 0.0


def test_loss_above_the_threshold_degrades() -> None:
    s = folded(probe(1000), probe(2000, loss=0.2))
    assert s.status is LinkStatus.DEGRADED
    assert s.reason == "loss 10.0% > 5.0%"


def test_rtt_far_above_the_baseline_degrades_but_noise_on_a_short_path_does_not() -> None:
    s = folded(probe(1000, 40.0), probe(2000, 120.0), probe(3000, 120.0))
    assert s.status is LinkStatus.DEGRADED
    assert s.reason == "rtt 100.0 ms > 1.5 x baseline 40.0 ms"
    short = folded(probe(1000, 1.0), probe(2000, 3.0))  # 2x the baseline but only 1 ms above it
    assert short.status is LinkStatus.OK


def test_a_round_with_every_probe_lost_is_down_and_keeps_the_rtt() -> None:
    s = folded(probe(1000, 40.0), probe(2000, 0.0, loss=1.0))
    assert s.status is LinkStatus.DOWN
    assert s.reason == "all 5 probes of the round lost"
    assert s.rtt_ms == 40.0 and s.baseline_rtt_ms == 40.0
    back = fold(s, probe(3000, 40.0), POLICY)
    assert back.status is LinkStatus.DEGRADED  # loss EWMA 0.25 still above 5 %


def test_a_replayed_round_is_ignored() -> None:
    s = folded(probe(1000, 40.0), probe(2000, 60.0))
    assert fold(s, probe(2000, 500.0), POLICY) is s
    assert fold(s, probe(1500, 500.0), POLICY) is s


def test_silence_for_down_after_intervals_is_down() -> None:
    s = folded(probe(1000))
    assert expire(s, 1000 + 2999, POLICY) is None
    down = expire(s, 1000 + 3000, POLICY)
    assert down is not None and down.status is LinkStatus.DOWN
    assert down.reason == "no probe for 3.0 s (3.0 probe intervals)"
    assert expire(down, 10_000, POLICY) is None  # already down: nothing new


def test_small_changes_are_not_published_large_ones_are() -> None:
    s = folded(probe(1000, 40.0))
    assert differs(None, s, POLICY)
    assert not differs(s, fold(s, probe(2000, 42.0), POLICY), POLICY)  # 41 ms: < 10 %
    assert differs(s, fold(s, probe(2000, 60.0), POLICY), POLICY)  # 50 ms
    assert differs(s, fold(s, probe(2000, loss=0.04), POLICY), POLICY)  # loss 0 -> 2 %
    assert differs(s, fold(s, probe(2000, bw=1000.0), POLICY), POLICY)  # bandwidth now known
    assert differs(s, fold(s, probe(2000, loss=1.0), POLICY), POLICY)  # status


def test_region_summary_is_down_only_when_every_path_is() -> None:
    a = folded(probe(1000, 40.0, bw=500.0, src="tok-1"))
    b = folded(probe(1000, 60.0, bw=900.0, src="tok-2"))
    ok = summarise("Tokyo", "Sydney", [a, b])
    assert (ok.link_id, ok.scope, ok.status, ok.rtt_ms, ok.bandwidth_mbps) == (
        "region:Tokyo->Sydney",
        "region",
        LinkStatus.OK,
        50.0,
        900.0,
    )
    b_down = fold(b, probe(2000, loss=1.0, src="tok-2"), POLICY)
    partial = summarise("Tokyo", "Sydney", [a, b_down])
    assert (partial.status, partial.reason, partial.rtt_ms) == (
        LinkStatus.DEGRADED,
        "1 of 2 site paths down",
        40.0,
    )
    a_down = fold(a, probe(2000, loss=1.0, src="tok-1"), POLICY)
    gone = summarise("Tokyo", "Sydney", [a_down, b_down])
    assert (gone.status, gone.reason) == (LinkStatus.DOWN, "all 2 site paths down")


def test_the_down_limit_follows_the_paths_own_probe_interval() -> None:
    # Rounds every 10 s on a path while the view assumes 1 s: DOWN after 3 x 10 s, not 3 x 1 s.
    s = folded(probe(0), probe(10_000), probe(20_000))
    assert s.interval_ms == 10_000
    assert expire(s, 20_000 + 29_999, POLICY) is None
    down = expire(s, 20_000 + 30_000, POLICY)
    assert down is not None and down.reason == "no probe for 30.0 s (3.0 probe intervals)"
    quicker = fold(s, probe(22_000), POLICY)  # the gaps shrink: 0.5 x 2 s + 0.5 x 10 s
    assert quicker.interval_ms == 6_000


def test_a_round_stamped_far_ahead_of_the_view_is_refused() -> None:
    # Folded, a future stamp would make every later real round look old: the link could never go DOWN.
    policy = ViewPolicy()
    now = 1_700_000_000_000
    policy.refuse_future(now + policy.max_future_ms, now)  # at the limit: accepted
    with pytest.raises(InvalidArgument, match="ahead of the view's clock"):
        policy.refuse_future(now + policy.max_future_ms + 1, now)
